// Suspicion for the SWIM core: how records heard from others change the member list (incarnation
// precedence), this node's refutation of anything said against it, the suspicion timer that turns
// a SUSPECT into DEAD, and the reaping of DEAD and LEFT members. Every change is reported as an
// event and handed to dissemination.
import { suspicionTimeoutMs, type MembershipConfig } from "./config.js";
import type { Dissemination } from "./dissemination.js";
import { newMember, toInfo, type Member, type MemberTable } from "./member-table.js";
import type { Outbox } from "./outbox.js";
import { supersedes } from "./precedence.js";
import { MemberState, isDeparted, isLive, kindOf, type MemberInfo, type MembershipChange, type MembershipStats } from "./types.js";

export class Suspicion {
  constructor(
    private readonly config: MembershipConfig,
    private readonly table: MemberTable,
    private readonly dissemination: Dissemination,
    private readonly outbox: Outbox,
    private readonly counters: MembershipStats,
    /** A member became live (new, or back): it joins the probe round. */
    private readonly onLive: (nodeId: string) => void,
    /** Another live process claims this node's id from the address given (identityContests). */
    private readonly onIdentityConflict?: (address: string) => void,
  ) {}

  /** Newer ALIVE claims of this node's id heard from another address, by that address. */
  private readonly contests = new Map<string, number>();

  /** Merge records; returns the ids of those for which this node holds a newer record. */
  applyAll(updates: readonly MemberInfo[] | undefined, now: number): string[] {
    const stale: string[] = [];
    if (!updates) return stale;
    for (const info of updates) if (this.apply(info, now)) stale.push(info.nodeId);
    return stale;
  }

  /** Merge one record about a member into the view. Returns true when ours is newer than it. */
  apply(info: MemberInfo, now: number): boolean {
    if (info.nodeId === this.table.self.nodeId) return this.applyAboutSelf(info);
    const current = this.table.get(info.nodeId);
    if (!current) {
      this.learn(info, now);
      return false;
    }
    if (!supersedes(info, current)) return supersedes(current, info);
    const departedAt = isDeparted(info.state) ? clampSince(info.sinceUnixMs, now, this.config.reapAfterMs) : now;
    const previousAddress = current.address;
    current.address = info.address;
    if (info.state !== current.state) {
      this.transition(current, info.state, info.incarnation, now, departedAt);
      if (isLive(info.state)) this.onLive(info.nodeId);
    } else {
      current.incarnation = info.incarnation;
      // A suspicion of a newer incarnation starts a new timeout.
      if (info.state === MemberState.SUSPECT) current.suspectUntil = now + suspicionTimeoutMs(this.config, this.table.liveCount());
      if (info.state === MemberState.ALIVE && previousAddress !== info.address) {
        this.emit(current, MemberState.ALIVE, "alive");
      }
    }
    this.dissemination.broadcast(current);
    return false;
  }

  /** Our own probe of `member` failed: hold it SUSPECT (the caller checked it is ALIVE). */
  suspect(member: Member, now: number): void {
    this.counters.suspicionsRaised++;
    this.transition(member, MemberState.SUSPECT, member.incarnation, now, now);
    this.dissemination.broadcast(member);
  }

  /** Declare DEAD the suspects whose timer ran out, and forget departed members whose time is up. */
  expire(now: number): void {
    for (const member of [...this.table.others.values()]) {
      if (member.state === MemberState.SUSPECT && member.suspectUntil <= now) {
        this.counters.deathsDeclared++;
        this.transition(member, MemberState.DEAD, member.incarnation, now, now);
        this.dissemination.broadcast(member);
      } else if (isDeparted(member.state) && member.reapAt <= now) {
        this.table.others.delete(member.nodeId);
        this.dissemination.forget(member.nodeId);
        this.counters.reaped++;
        if (member.announced) this.outbox.out.events.push({ kind: "reaped", member: toInfo(member), previous: member.state });
      }
    }
  }

  /** The earliest suspicion timeout or reaping time, or Infinity. */
  nextDeadline(): number {
    let at = Infinity;
    for (const member of this.table.others.values()) {
      if (member.state === MemberState.SUSPECT) at = Math.min(at, member.suspectUntil);
      else if (isDeparted(member.state)) at = Math.min(at, member.reapAt);
    }
    return at;
  }

  /** A member not in the view. */
  private learn(info: MemberInfo, now: number): void {
    if (isDeparted(info.state)) {
      // Keep a tombstone so that stale ALIVE gossip cannot revive it, unless it is already due.
      const departedAt = clampSince(info.sinceUnixMs, now, this.config.reapAfterMs);
      if (departedAt + this.config.reapAfterMs <= now) return;
      const member = newMember(info, now);
      member.departedAt = departedAt;
      member.reapAt = departedAt + this.config.reapAfterMs;
      this.table.others.set(info.nodeId, member);
      this.dissemination.broadcast(member);
      return;
    }
    const member = newMember(info, now);
    if (member.state === MemberState.SUSPECT) {
      member.suspectUntil = now + suspicionTimeoutMs(this.config, this.table.liveCount() + 1);
      this.dissemination.pinSuspect(member.nodeId);
    }
    this.table.others.set(info.nodeId, member);
    this.onLive(info.nodeId);
    this.dissemination.broadcast(member);
    this.emit(member, MemberState.MEMBER_STATE_UNSPECIFIED, kindOf(member.state));
  }

  /**
   * Someone says something about this node: refute anything but our current record. Returns true
   * when the sender's record is out of date (it gets ours in the answer).
   */
  private applyAboutSelf(info: MemberInfo): boolean {
    const self = this.table.self;
    const newer = info.incarnation > self.incarnation;
    const contradicts = info.incarnation === self.incarnation && info.state !== self.state;
    if (!newer && !contradicts) return info.incarnation < self.incarnation;
    if (newer && info.state === MemberState.ALIVE && info.address !== self.address) this.contested(info.address);
    self.incarnation = (info.incarnation > self.incarnation ? info.incarnation : self.incarnation) + 1n;
    if (self.state !== MemberState.LEFT) this.counters.refutations++;
    this.dissemination.broadcast(self);
    return true;
  }

  /**
   * A newer ALIVE record of this node's id at another address: a restart elsewhere cannot make
   * one (a process starts above every incarnation its predecessors used), unless clocks went back,
   * so a second one from the same address, after this node refuted the first, is another live
   * process under the same id (two nodes started with one id, or a copy of a data directory).
   * They would refute each other for ever, the cluster's view of the id flipping between them.
   */
  private contested(address: string): void {
    if (this.contests.size > 64) this.contests.clear(); // addresses contesting at once: a handful
    const n = (this.contests.get(address) ?? 0) + 1;
    this.contests.set(address, n);
    if (n < 2) return;
    this.counters.identityContests++;
    this.onIdentityConflict?.(address);
  }

  private transition(member: Member, state: MemberState, incarnation: bigint, now: number, departedAt: number): void {
    const previous = member.state;
    member.state = state;
    member.incarnation = incarnation;
    member.since = now;
    // Computed once the member's new state counts in the live total.
    const timeout = suspicionTimeoutMs(this.config, this.table.liveCount());
    if (state === MemberState.SUSPECT) member.suspectUntil = now + timeout;
    this.dissemination.stateChanged(member.nodeId, state, now + timeout);
    if (isDeparted(state)) {
      member.departedAt = Math.min(departedAt, now);
      member.reapAt = member.departedAt + this.config.reapAfterMs;
    }
    // Listeners never heard of a tombstone learned second-hand: report it as new, or not at all.
    if (!member.announced && isDeparted(state)) return;
    this.emit(member, member.announced ? previous : MemberState.MEMBER_STATE_UNSPECIFIED, kindOf(state));
  }

  private emit(member: Member, previous: MemberState, kind: MembershipChange["kind"]): void {
    member.announced = true;
    this.outbox.out.events.push({ kind, member: toInfo(member), previous });
  }
}

/** The time a departure record says it happened, kept within [now - reapAfter, now]. */
function clampSince(since: bigint | undefined, now: number, reapAfterMs: number): number {
  const value = typeof since === "bigint" ? Number(since) : 0;
  if (!(value > 0)) return now;
  return Math.max(now - reapAfterMs, Math.min(now, value));
}
