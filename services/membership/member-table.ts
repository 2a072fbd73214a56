// The member list of the SWIM core: this node's own record and what it knows of every other member,
// with the read-only views the core answers from (sorted lists, live counts). It holds no timers
// and makes no decisions: suspicion.ts changes the records, probe.ts and dissemination.ts read them.
import { MemberState, isDeparted, isLive, type MemberInfo, type NodeIdentity } from "./types.js";

/** What this node holds about one member (itself included). */
export interface Member {
  nodeId: string;
  address: string;
  state: MemberState;
  incarnation: bigint;
  /** When this node saw the state change. */
  since: number;
  /** SUSPECT: when it becomes DEAD. */
  suspectUntil: number;
  /** DEAD/LEFT: when it is forgotten. */
  reapAt: number;
  /** DEAD/LEFT: earliest known time of the departure (from the record's since), for reaping. */
  departedAt: number;
  /** An event about it was emitted (tombstones learned second-hand are reaped silently). */
  announced: boolean;
}

export class MemberTable {
  readonly self: Member;
  /** Every other member known, departed ones included until they are reaped. */
  readonly others = new Map<string, Member>();

  constructor(self: NodeIdentity, incarnation: bigint, now: number) {
    this.self = {
      nodeId: self.nodeId,
      address: self.address,
      state: MemberState.ALIVE,
      incarnation,
      since: now,
      suspectUntil: 0,
      reapAt: 0,
      departedAt: 0,
      announced: true,
    };
  }

  /** True after this node left. */
  get left(): boolean {
    return this.self.state === MemberState.LEFT;
  }

  /** Another member's record, or undefined. */
  get(nodeId: string): Member | undefined {
    return this.others.get(nodeId);
  }

  /** The record of `nodeId`, this node's own included. */
  lookup(nodeId: string): Member | undefined {
    return nodeId === this.self.nodeId ? this.self : this.others.get(nodeId);
  }

  /** The view, this node included, sorted by node id. */
  list(includeDeparted: boolean): MemberInfo[] {
    const list: MemberInfo[] = [toInfo(this.self)];
    for (const member of this.others.values()) {
      if (includeDeparted || !isDeparted(member.state)) list.push(toInfo(member));
    }
    return list.sort(byNodeId);
  }

  /** Live members (ALIVE or SUSPECT), this node included unless it left. */
  liveCount(): number {
    let n = this.left ? 0 : 1;
    for (const member of this.others.values()) if (isLive(member.state)) n++;
    return n;
  }

  /** The other members that are ALIVE or SUSPECT, in view order. */
  liveOthers(): Member[] {
    const list: Member[] = [];
    for (const member of this.others.values()) if (isLive(member.state)) list.push(member);
    return list;
  }
}

/** A record for a member first heard of now. */
export function newMember(info: MemberInfo, now: number): Member {
  return {
    nodeId: info.nodeId,
    address: info.address,
    state: info.state,
    incarnation: info.incarnation,
    since: now,
    suspectUntil: 0,
    reapAt: 0,
    departedAt: 0,
    announced: false,
  };
}

/** The wire record of a member; a departure carries when it happened, not when we learned it. */
export function toInfo(member: Member): MemberInfo {
  const since = isDeparted(member.state) ? member.departedAt : member.since;
  return {
    nodeId: member.nodeId,
    address: member.address,
    state: member.state,
    incarnation: member.incarnation,
    sinceUnixMs: BigInt(Math.floor(since)),
  };
}

function byNodeId(a: MemberInfo, b: MemberInfo): number {
  return a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0;
}
