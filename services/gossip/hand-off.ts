// Hand-off of partitions this node holds but no longer owns (placement changed: a join, a leave,
// a death). Nothing is sent here: the engine keeps exchanging such a partition with its owners
// (Ownership.peersOf), so a new owner receives it by the chunked full-state transfer a new peer
// gets, and acknowledges it once durable (exchange.ts acks after the store's join returned, and
// joins are durable when they return). This part drops the local copy, key by key, only once
// every owner in this node's view has acknowledged everything the partition holds here
// (Algorithm 2: ack >= the partition's seq), and the placement has been stable for a grace
// period, and not while it was lately taken from a leaving owner as its successor
// (takenAsSuccessor). Algorithm 1 has no acks: under it nothing is ever dropped. A restart sets
// every ack back to 0, so a restarted node drops nothing before the owners acknowledged its full
// state again.
// Deferred removes exist only on the node that took them: those of keys not owned here go to an
// owner first. Peers are told of the drop (engine.noteDropped, carried by every gossip message)
// and reset their acks for this node on that partition: otherwise, if it owned the partition
// again after views disagreed for a while, they would send it only what came after those acks.
// Before the first key goes, the store draws a new replica id, so a later write to a dropped key
// never mints a dot this node already used there.
import type { Store } from "../store/store.js";
import type { Logger } from "../common/logger.js";
import { logThrottle } from "../common/log-throttle.js";
import type { AntiEntropyEngine } from "./engine.js";
import type { Ownership } from "./ownership.js";
import type { CausalContext } from "../crdt/index.js";

export interface HandOffCounters {
  /** Partitions whose local copy was dropped after its owners acknowledged it. */
  partitionsDropped: number;
  keysDropped: number;
  /** Bytes of the records dropped (what moved to the owners). */
  bytesDropped: number;
  /** Keys kept because deferred removes wait on them here. */
  keysKept: number;
  /** Deferred removes given to an owner before their key was dropped. */
  removesHandedOver: number;
}

export interface HandOffOptions {
  store: Store;
  engine: AntiEntropyEngine<unknown>;
  ownership: Ownership;
  log: Logger;
  /** No drop until the placement has not changed for this long (ms): views settle first. */
  graceMs: number;
  /**
   * Whether durable local changes of a partition wait outside the engine's buffer (the gossip's
   * local gate, behind a received stream being joined): they have no seq yet, so the owners'
   * acks cannot cover them, and the partition is not dropped meanwhile. Default: none wait.
   */
  localChangesWaiting?: (partition: number) => boolean;
  now: () => number;
  /**
   * Give a deferred remove of a key to one of its owners (the element and the dots it waits for,
   * answered once durable there: the node sends it by the peer-authenticated Gossip HandOver);
   * rejects when no owner took it. Without it, keys with deferred removes are kept.
   */
  handOverRemove?: (key: string, element: Buffer, unseen: CausalContext) => Promise<void>;
  /**
   * Whether a peer has been heard (a gossip frame or reply from it) at or after sinceMs (now's
   * clock). An owner's acknowledgement counts toward a drop only if it was heard since the
   * placement last changed: a node killed a moment ago is still an owner in every view until it is
   * suspected, and its old acks would otherwise let this node drop the partition onto the one live
   * owner left (a new node), then own it again, empty, once the dead one is declared dead.
   * Default: every peer counts as heard.
   */
  heardSince?: (peer: string, sinceMs: number) => boolean;
  /** How long a partition taken from an owner as its successor is kept from a drop (takenAsSuccessor); default SUCCESSOR_HOLD_MS. */
  successorHoldMs?: number;
}

/**
 * Default of HandOffOptions.successorHoldMs: far longer than the few ms between a leaving owner's
 * last acknowledged send and its leave, and than the suspicion of one that dies meanwhile. It is
 * also how much later a partition is dropped after a lagging owner sent it here while views
 * differed (a join), since a receipt cannot tell the two apart.
 */
export const SUCCESSOR_HOLD_MS = 10_000;

export class HandOff {
  readonly counters: HandOffCounters = { partitionsDropped: 0, keysDropped: 0, bytesDropped: 0, keysKept: 0, removesHandedOver: 0 };
  /** Partitions that may hold keys here (all of them at start: the store may hold anything). */
  private readonly mayHold = new Set<number>();
  /** Per partition: durable changes seen (onChange). A drop forgets a partition only if none came meanwhile. */
  private readonly changesSeen: number[];
  private seenVersion: number;
  private stableSince: number;
  private running = false;
  /** Partition → the owner it was taken from, and until when it is kept here although not owned (takenAsSuccessor). */
  private readonly successorHolds = new Map<number, { from: string; until: number }>();
  /**
   * The last ready() found a partition whose owners all acked it but not all were heard since
   * the placement changed: the caller greets them (an owner quiet because nothing flows would
   * otherwise never be heard, and the copy would stay here for good).
   */
  waitingToHear = false;
  /** A failure that recurs every run (no owner reachable) is warned about once a minute. */
  private readonly failureLog = logThrottle(60_000);

  constructor(private readonly o: HandOffOptions) {
    for (let p = 0; p < o.ownership.partitions; p++) this.mayHold.add(p);
    this.changesSeen = new Array<number>(o.ownership.partitions).fill(0);
    this.seenVersion = o.ownership.version;
    this.stableSince = o.now();
    o.store.onChange((key) => {
      const p = o.ownership.partitionOf(key);
      this.mayHold.add(p);
      this.changesSeen[p]!++;
    });
  }

  /**
   * A partition this node does not own was taken from its owner because this node owns it once
   * that owner is gone: the owner is leaving and ships what only it may hold (with R = 1,
   * everything). In this node's view the owner is still there and has acknowledged it all, so
   * without a hold the copy would be dropped as handed back, and the owner would then leave with
   * the only other copy. Kept from a drop while that owner, having said it leaves
   * (GossipFrame.leaving), is still in this node's view, however long its leave takes to arrive
   * (a lost leave is only found by failure detection); once it is gone the partition is owned
   * here. From an owner that did not say it leaves (views that only differed, or an earlier
   * version), kept for successorHoldMs after the last such receipt, then dropped as usual.
   */
  takenAsSuccessor(partition: number, from: string): void {
    this.mayHold.add(partition);
    this.successorHolds.set(partition, { from, until: this.o.now() + (this.o.successorHoldMs ?? SUCCESSOR_HOLD_MS) });
  }

  private held(partition: number): boolean {
    const hold = this.successorHolds.get(partition);
    if (hold === undefined) return false;
    const own = this.o.ownership;
    if (own.isLeaving(hold.from) && own.addressOf(hold.from) !== undefined) return true;
    if (this.o.now() < hold.until) return true;
    this.successorHolds.delete(partition);
    return false;
  }

  /** A partition this node may now hold keys of (a local write). */
  noteWrite(partition: number): void {
    this.mayHold.add(partition);
  }

  /**
   * Partitions held here that this node does not own, acknowledged by all their owners: each with
   * the seq they acknowledged and the placement version it was judged under, which its drop
   * holds to (a write served here meanwhile, or a new owner, stops the drop).
   */
  ready(): Array<{ partition: number; seq: number; version: number }> {
    const { ownership: own, engine, now } = this.o;
    if (own.full || engine.algorithm !== 2) return [];
    if (own.version !== this.seenVersion) {
      this.seenVersion = own.version;
      this.stableSince = now();
    }
    if (now() - this.stableSince < this.o.graceMs) return [];
    const out: Array<{ partition: number; seq: number; version: number }> = [];
    this.waitingToHear = false;
    for (const p of this.mayHold) {
      if (own.owns(p) || this.held(p) || this.o.localChangesWaiting?.(p) === true) continue;
      const seq = engine.seq(p);
      if (seq === 0) continue;
      const a = this.ackState(p, seq);
      if (a === "acked") out.push({ partition: p, seq, version: own.version });
      else if (a === "unheard") this.waitingToHear = true;
    }
    return out;
  }

  /** Every owner of p in this node's view has acknowledged p up to seq, and has been heard since the placement last changed. */
  private acked(p: number, seq: number): boolean {
    return this.ackState(p, seq) === "acked";
  }

  /** acked: every owner acked p up to seq and was heard since the change; unheard: all acked, not all heard. */
  private ackState(p: number, seq: number): "acked" | "unheard" | "no" {
    const owners = this.o.ownership.peersOf(p);
    if (owners.length === 0 || !owners.every((o) => this.o.engine.ackOf(p, o) >= seq)) return "no";
    const heard = this.o.heardSince ?? (() => true);
    return owners.every((o) => heard(o, this.stableSince)) ? "acked" : "unheard";
  }

  /**
   * Whether p may still be dropped against what its owners acknowledged: nothing written here
   * since (the seq), the same placement, not owned here, and the acknowledgement still standing
   * (an owner that dropped or restarted resets it).
   */
  private stillReady(r: { partition: number; seq: number; version: number }): boolean {
    const { engine, ownership } = this.o;
    return (
      engine.seq(r.partition) === r.seq &&
      ownership.version === r.version &&
      !ownership.owns(r.partition) &&
      !this.held(r.partition) &&
      this.o.localChangesWaiting?.(r.partition) !== true &&
      this.acked(r.partition, r.seq)
    );
  }

  /** Hand over deferred removes of keys not owned here, then drop what is ready; one run at a time. */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.handOverRemoves();
      // A leaving node drops nothing: its copies stay on its disk whatever it drops, and dropping
      // (deleting keys, drawing replica ids) took seconds of a loaded node's leave timeout from
      // shipping what only it held (two nodes leaving together ran out of it with partitions unshipped).
      if (this.o.ownership.leaving) return;
      // Each partition is checked again as its drop starts and before each key: dropping one
      // takes a while, and writes or placement changes meanwhile void what was acknowledged.
      for (const r of this.ready()) await this.drop(r);
    } catch (err) {
      // The store closing under a run (the node stops) ends it with the database's errors: nothing to retry.
      if (this.o.store.isClosed) return;
      const admitted = this.failureLog.admit("run");
      if (admitted !== undefined) this.o.log.warn("hand-off failed; retried every period", { err, suppressedSinceLast: admitted.suppressed });
    } finally {
      this.running = false;
    }
  }

  /**
   * Deferred removes of keys this node does not own go to an owner at once, without waiting for
   * the partition's acks: the adds they wait for no longer come here, and an owner takes such a
   * remove whatever it holds (it applies what it can and defers the rest).
   */
  private async handOverRemoves(): Promise<void> {
    const { store, ownership } = this.o;
    if (this.o.handOverRemove === undefined || ownership.full) return;
    for (const key of store.keysWithPendingRemoves()) {
      if (ownership.owns(ownership.partitionOf(key))) continue;
      await this.handOver(key);
    }
  }

  private async handOver(key: string): Promise<void> {
    for (const { element, unseen } of this.o.store.pendingRemovesOf(key)) {
      await this.o.handOverRemove!(key, element, unseen);
      if (await this.o.store.forgetPendingRemove(key, element, unseen)) this.counters.removesHandedOver++;
    }
  }

  private async drop(r: { partition: number; seq: number; version: number }): Promise<void> {
    const { store, engine, ownership } = this.o;
    const p = r.partition;
    let keys = 0;
    let bytes = 0;
    let kept = 0;
    let rotated = false;
    const changesBefore = this.changesSeen[p];
    for await (const key of store.keys(p)) {
      // Stop if the partition changed or came back here meanwhile: the check starts over.
      if (!this.stillReady(r)) return;
      // Deferred removes exist only here: an owner takes them over first (their adds never come
      // here again, gossip of a partition not owned is refused).
      if (this.o.handOverRemove !== undefined) await this.handOver(key);
      // A later write to a dropped key must not mint dots (or counter values) this node already
      // used there: from now on it mints under a new replica id.
      if (!rotated) {
        const id = await store.rotateReplicaId();
        rotated = true;
        this.o.log.info("new replica id before dropping handed-off keys", { replicaId: id, partition: p });
        // From now on this node's messages say it dropped p: peers reset what they think it acked
        // there, so it gets the partition's full state if it owns it again.
        engine.noteDropped(p);
      }
      // Checked again under the key's lock once earlier writes are durable: a write that slipped in
      // since the check above would otherwise travel only as a delta (lost to an owner that needs
      // a full state from here); the partition is then tried again once its owners acked it.
      const dropped = await store.dropLocalCopy(key, () => this.stillReady(r));
      if (dropped === false) {
        kept++;
        this.counters.keysKept++;
        continue;
      }
      keys++;
      bytes += dropped;
      this.counters.keysDropped++;
      this.counters.bytesDropped += dropped;
    }
    // A key written here after the scan passed it (a forwarded write served whatever the view)
    // would otherwise stay, never looked at again.
    if (kept === 0 && this.changesSeen[p] === changesBefore) {
      this.mayHold.delete(p);
      if (keys > 0) this.counters.partitionsDropped++;
    }
    if (keys > 0) this.o.log.info("partition handed off: local copy dropped", { partition: p, keys, bytes, kept, owners: ownership.peersOf(p) });
  }
}
