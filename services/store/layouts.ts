// The stored form of each replicated type: ObjectType → layout. A new type needs its lattice in
// crdt/ and one line here (wholeStateLayout(itsLattice) for a small state); the store, gossip and
// the replica service then handle it with no code of their own.
import { AWSetProbLattice, FILTER_LATTICES, type FilterSiblings, ObjectType } from "../crdt/index.js";
import { counterLayout } from "./counter-layout.js";
import { elementLayout } from "./element-layout.js";
import { UnstorableTypeError } from "./errors.js";
import type { ObjectLayout } from "./layout.js";
import { filterKeyRetryIds } from "./received-retry-ids.js";
import { wholeStateLayout } from "./whole-state-layout.js";

const layouts = new Map<ObjectType, ObjectLayout<unknown>>();

export function registerLayout<S>(type: ObjectType, layout: ObjectLayout<S>): void {
  layouts.set(type, layout as ObjectLayout<unknown>);
}

export function layoutFor(type: ObjectType): ObjectLayout<unknown> {
  const l = layouts.get(type);
  if (l === undefined) throw new UnstorableTypeError(type);
  return l;
}

export function storableTypes(): ObjectType[] {
  return [...layouts.keys()];
}

registerLayout(ObjectType.AWSET, elementLayout);
// A counter and the retry filter of its request ids: one record (counter-layout.ts).
registerLayout(ObjectType.COUNTER, counterLayout());
// The filters of seed 001: one record each while small; a large one as a base and a log of the
// deltas of its changes, since joining an operation's delta gives the state the operation left
// (up to where a cuckoo entry sits, which their equality ignores).
// A bloom filter decodes to its bit array; the cuckoo filters' entries are objects (see
// WholeStateOptions.memoryPerEncodedByte).
const BLOOM = new Set<ObjectType>([ObjectType.GBF, ObjectType.SCGBF]);
// A filter key's retry filter (the request ids of its Adds) is received as a counter's is.
for (const l of FILTER_LATTICES) {
  registerLayout(l.type, wholeStateLayout<FilterSiblings<unknown>>(l as never, { log: true, memoryPerEncodedByte: BLOOM.has(l.type) ? 1 : 36, retryIds: filterKeyRetryIds }));
}
// The probabilistic add-wins set: its live dots and its tombstone filter, one record while small,
// then a base and a log. Its join is not associative, so the log records each join an operation
// made (a batch's steps), never a join of them, and replaying them in order gives the state. A
// received state with tombstones that does not list them (a whole state, or a delta of an earlier
// version) is costly to replay: its join asks its filter about every live dot, so a log holds only
// a few of them; deltas that list their removed dots replay in the time of the list. A join answers the dots the filter refuses with a
// remove of this node's own (AWSetProb.refusalOf), so that a false positive does not keep replicas apart.
registerLayout(
  ObjectType.AWSET_PROB,
  wholeStateLayout(AWSetProbLattice, {
    log: true,
    logSteps: (d) => d.takeSteps(),
    // A delta that lists its removed dots replays in the time of its list.
    costly: (d) => d.removed === undefined && !d.tombstones.isEmpty(),
    reply: (state, incoming) => state.refusalOf(incoming),
    readVersion: (state) => state.readVersion,
  }),
);
