// Which of two records about the same member wins. Records are ordered by incarnation first; at
// equal incarnation a more severe state wins (ALIVE < SUSPECT < DEAD < LEFT). Only the member
// itself raises its incarnation, so an ALIVE can only beat a suspicion or a death by carrying a
// higher incarnation (a refutation, or a restart).
import { MemberState } from "../gen/deltaset/v1/membership.js";

/** The part of a record that decides precedence. */
export interface Versioned {
  state: MemberState;
  incarnation: bigint;
}

function severity(state: MemberState): number {
  switch (state) {
    case MemberState.ALIVE: return 1;
    case MemberState.SUSPECT: return 2;
    case MemberState.DEAD: return 3;
    case MemberState.LEFT: return 4;
    default: return 0;
  }
}

/** True when `incoming` should replace `current`. */
export function supersedes(incoming: Versioned, current: Versioned): boolean {
  if (incoming.incarnation !== current.incarnation) return incoming.incarnation > current.incarnation;
  return severity(incoming.state) > severity(current.state);
}
