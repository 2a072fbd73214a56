// Dissemination for the SWIM core: which membership records ride on each outgoing message. Every
// change enters the budgeted broadcast queue (broadcast-queue.ts); on top of it, suspicions and
// recent LEFTs are pinned to every message while they last (see piggyback()).
import { BroadcastQueue } from "./broadcast-queue.js";
import { retransmitLimit, type MembershipConfig } from "./config.js";
import { toInfo, type Member, type MemberTable } from "./member-table.js";
import { MemberState, type MemberInfo } from "./types.js";

export class Dissemination {
  private readonly queue = new BroadcastQueue();
  /** Ids of members held SUSPECT (always piggybacked, see piggyback()). */
  private readonly suspects = new Set<string>();
  /** Members that left recently, with the time until which their LEFT is always piggybacked. */
  private readonly recentlyLeft = new Map<string, number>();

  constructor(
    private readonly config: MembershipConfig,
    private readonly table: MemberTable,
  ) {}

  /** Queue the member's current record for epidemic spreading, with a fresh budget. */
  broadcast(member: Member): void {
    this.queue.enqueue(toInfo(member));
  }

  /** Pin a suspected member's record to every message until it is no longer SUSPECT. */
  pinSuspect(nodeId: string): void {
    this.suspects.add(nodeId);
  }

  /**
   * Follow a member's change of state: a suspicion is pinned while it lasts; a LEFT has no timer
   * that would repair a missed copy (a DEAD has the suspicion timeout), so it is pinned until
   * `leftUntil`.
   */
  stateChanged(nodeId: string, state: MemberState, leftUntil: number): void {
    if (state === MemberState.SUSPECT) this.suspects.add(nodeId);
    else this.suspects.delete(nodeId);
    if (state === MemberState.LEFT) this.recentlyLeft.set(nodeId, leftUntil);
    else this.recentlyLeft.delete(nodeId);
  }

  /** Unpin LEFT records whose time is over. */
  expire(now: number): void {
    for (const [id, until] of this.recentlyLeft) if (until <= now) this.recentlyLeft.delete(id);
  }

  /** A reaped member: nothing about it is sent any more. */
  forget(nodeId: string): void {
    this.queue.remove(nodeId);
    this.recentlyLeft.delete(nodeId);
  }

  /**
   * Updates to attach to a message for `peer`. Before the budgeted queue come, in order: this node's
   * LEFT record while it leaves; the peer's own record if we do not hold it ALIVE (so it can refute);
   * our newer records of what the peer just told us in an older version (corrections); every
   * suspicion we hold, so that a node that missed a refutation is corrected by whoever it talks to
   * before its suspicion timer runs out; and recent LEFT records. Plain epidemic piggybacking with
   * a log(n) budget misses about one node in a few hundred per update at 10% loss; these pinned
   * records close exactly the gaps that would turn into false deaths or late LEFTs.
   */
  piggyback(peer: string, corrections: readonly string[] = [], introduce = false): MemberInfo[] {
    const max = this.config.maxPiggyback;
    const table = this.table;
    const included = new Set<string>();
    const out: MemberInfo[] = [];
    const add = (member: Member | undefined): void => {
      if (!member || included.has(member.nodeId) || out.length >= max) return;
      included.add(member.nodeId);
      out.push(toInfo(member));
    };
    // A probe carries the prober's own record: a member that missed our join learns us from it.
    if (table.left || introduce) add(table.self);
    const known = table.get(peer);
    if (known && known.state !== MemberState.ALIVE) add(known);
    for (const id of corrections) add(table.lookup(id));
    let pinned = 0;
    for (const id of this.suspects) {
      if (pinned++ >= max / 2) break;
      add(table.get(id));
    }
    for (const id of this.recentlyLeft.keys()) {
      if (pinned++ >= (3 * max) / 4) break;
      add(table.get(id));
    }
    const limit = retransmitLimit(this.config, table.liveCount());
    return out.concat(this.queue.pick(max - out.length, limit, included));
  }
}
