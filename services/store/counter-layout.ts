// The stored form of a COUNTER: its whole state (PN-counter × retry filter, crdt/pncounter.ts) in
// the key's header body, like any small type (whole-state-layout.ts). A received state's retry
// filter is pruned to this node's window and checked for clock skew (received-retry-ids.ts).
import { CounterLattice, type PNCounter, counterRangeProblems } from "../crdt/index.js";
import type { ObjectLayout } from "./layout.js";
import { counterRetryIds } from "./received-retry-ids.js";
import { wholeStateLayout } from "./whole-state-layout.js";

export function counterLayout(): ObjectLayout<PNCounter> {
  return wholeStateLayout(CounterLattice, { problems: counterRangeProblems, retryIds: counterRetryIds });
}
