// The anti-entropy engine of one node: one Algorithm 1 or Algorithm 2 instance per partition,
// batched into one frame per neighbour per period. Sans-IO: the caller owns the CRDT state X,
// the clock, the randomness source and the network. It feeds in local deltas, received items
// and acks, and calls tick() once per period to learn what to send.
//
// Caller contract
//  - Payloads are immutable values. The engine keeps references to the deltas it is handed and
//    puts them (or joins of them) in frames; nobody may mutate them afterwards.
//  - Local operation: join the delta into X, then local(partition, delta).
//  - Received item: hand over the part of the payload d that was new to X: with RR on, Δ(d, X),
//    computed BEFORE joining d into X; with RR off, d itself when d ⋢ X (the join reporting a
//    change says exactly that); undefined when d brought nothing (receivedPart in
//    keyed-states.ts does either). Join d into X durably, then pass the items of the frame to
//    onFrame, which returns the acks to send back (Algorithm 2). Acks go out only after the join
//    is durable: an ack promises the deltas below its seq are held.
//  - tick(now) returns frames. A STATE item carries no payload: the caller ships the partition's
//    current X in its place (inline, or as a chunked PushState stream for large partitions).
//    Any X taken at or after the tick is correct, because X only grows and already holds every
//    delta below the item's seq. Under Algorithm 1, STATE items of partitions whose X is ⊥ may
//    be dropped. Report the bytes of shipped states with recordStateBytesSent.
//  - Algorithm 2's seq c is durable: the caller persists every partition in takeSeqChanges()
//    before the frames of the next tick leave, and passes the persisted values back as
//    initialSeqs on restart (then the empty buffer sends full state: line 24).
//  - Acks from the neighbour go to onAcks. Membership changes go to setNeighbours.
//  - Placement (gossip/placement.ts): setPartitionPeers names, per partition, the peers it is
//    exchanged with; a partition goes only to neighbours in its list (default: every neighbour).
import { PayloadKind } from "../gen/deltaset/v1/gossip.js";
import { Alg1Partition, type Choose } from "./algorithm1.js";
import { type Alg2Plan, Alg2Partition } from "./algorithm2.js";
import { type EngineSnapshot, type GossipCounters, newCounters, type PartitionStats } from "./metrics.js";
import type { PayloadOps } from "./payload.js";
import { PeerBoots } from "./peer-boots.js";
import { SeqMarks } from "./seq-marks.js";
import { type PartitionDropCount, PartitionDrops } from "./peer-drops.js";
import { type Random, pick } from "../common/prng.js";
import { lengthDelimitedSize, varintSize } from "../common/varint.js";

export { PayloadKind };
export type ItemKind = PayloadKind.DELTA | PayloadKind.STATE;

export const DEFAULT_PARTITIONS = 64;
export const DEFAULT_STATE_PERIOD = 10;

export interface Algorithm1Config {
  algorithm: 1;
  /** Transitive mode: forward what was received (the new part of it) as well as local deltas. */
  transitive: boolean;
  choose: Choose;
  /** With "delta+periodic-state": every k-th period a partition ships its full state. Default 10. */
  statePeriod?: number;
}

export interface Algorithm2Config {
  algorithm: 2;
  /** Avoid back-propagation: never send a buffered delta to the neighbour it came from. */
  bp: boolean;
  /**
   * Remove redundant state. The engine buffers whatever it is handed; this flag records which
   * receive contract the caller follows (Δ(d, X) when on, d when off) and is reported.
   */
  rr: boolean;
  /**
   * Who gets a frame each period: one random neighbour (Algorithm 2 as published, the default)
   * or every neighbour (the setup of Enes et al., where each node syncs with all its peers).
   */
  fanout?: "random" | "all";
  /** Byte budget of each partition's delta buffer; over it the oldest deltas are dropped. */
  maxBufferBytes?: number;
  /** The durable seq of each partition (default 0). */
  initialSeqs?: readonly number[];
}

/** What one tick sends (Algorithm 2). */
export interface TickOptions {
  /** Overrides Algorithm 2's choice of neighbours for this tick. */
  fanout?: "random" | "all";
  /**
   * A push of fresh local changes to every neighbour: each gets only what was never sent to it
   * (a tail push, algorithm2.ts), so pushes need not wait for the acks of the ones before.
   */
  tail?: boolean;
  /**
   * Neighbours to leave out of this tick (an exchange with them still runs). Nothing is planned
   * or built for them, and Algorithm 2's random pick is among the others. Algorithm 1 has no acks:
   * what a left-out neighbour misses waits for the next full state, as a lost message would.
   */
  skip?: (peer: string) => boolean;
  /**
   * With tail: the intervals of writes waiting for copies. A neighbour that needs a partition's
   * full state gets, beside it, each such interval of the partition alone (Alg2Partition.planRange).
   */
  ranges?: ReadonlyArray<{ partition: number; from: number; to: number }>;
}

/** Unacked tail pushes per neighbour and partition; past it, pushes wait for acks (or a period). */
export const MAX_TAILS_IN_FLIGHT = 64;

export interface EngineOptions<P> {
  /** This node's id (the origin of local deltas). */
  self: string;
  ops: PayloadOps<P>;
  /** Uniform [0, 1) source (seeded in tests and simulations). */
  random: Random;
  sync: Algorithm1Config | Algorithm2Config;
  /** Partition count P (default 64). */
  partitions?: number;
  neighbours?: Iterable<string>;
  /**
   * Algorithm 2: the clock seqs are dated by, for the age of the oldest change a neighbour has not
   * acknowledged (PartitionStats.unackedAgeMs). Without it no ages are kept.
   */
  clock?: () => number;
}

/** One partition inside a frame. */
export interface FrameItem<P> {
  partition: number;
  kind: ItemKind;
  /** Algorithm 2: the sender's c when the item was built (to be acked). Algorithm 1: 0. */
  seq: number;
  /** The delta-group for DELTA items; absent for STATE items (the caller ships X). */
  payload?: P;
}

export interface OutgoingFrame<P> {
  to: string;
  items: FrameItem<P>[];
}

/** One partition of a received frame, after the caller has joined it into X. */
export interface ReceivedItem<P> {
  partition: number;
  kind: ItemKind;
  seq: number;
  /** What the payload brought that was new (see the contract above); undefined when nothing. */
  fresh?: P;
  /** Encoded size of the received payload, for metrics. */
  bytes?: number;
  /**
   * The payload brought something new, too big for the caller to hand over as `fresh` (a large
   * catch-up). The engine forwards it by full state: a hole in Algorithm 2's buffer, the next
   * period's state in transitive Algorithm 1.
   */
  tooLarge?: boolean;
}

export interface Ack {
  partition: number;
  seq: number;
}

/** Encoded size of a PartitionAck inside a reply (tag, length, fields). */
export function ackBytes(a: Ack): number {
  return lengthDelimitedSize((a.partition === 0 ? 0 : 1 + varintSize(a.partition)) + (a.seq === 0 ? 0 : 1 + varintSize(a.seq)));
}

export class AntiEntropyEngine<P> {
  readonly self: string;
  readonly partitionCount: number;
  readonly counters: GossipCounters = newCounters();
  private readonly ops: PayloadOps<P>;
  private readonly random: Random;
  private readonly sync: Algorithm1Config | Algorithm2Config;
  private readonly alg1: Alg1Partition<P>[] = [];
  private readonly alg2: Alg2Partition<P>[] = [];
  /** Per Algorithm 2 partition, when its seqs were handed out (with a clock only). */
  private readonly marks: SeqMarks[] = [];
  private readonly clock: (() => number) | undefined;
  /** Partitions holding changes from before this process that no neighbour has acknowledged yet. */
  private readonly restoredUnshipped = new Set<number>();
  private peers: string[] = [];
  private peerSet = new Set<string>();
  /** Per partition, the peers it is exchanged with (placement); undefined: every neighbour. */
  private partitionPeers: ReadonlyArray<ReadonlySet<string>> | undefined;
  private period = 0;
  private lastTickAt: number | undefined;
  private readonly seqChanges = new Map<number, number>();
  private readonly boots = new PeerBoots();
  private readonly drops = new PartitionDrops();
  /** Per peer, how many times its acks were reset: a reply to a send made before a reset is void. */
  private readonly resets = new Map<string, number>();
  /** What resetsOf answers for an id without an entry (raised when entries are forgotten). */
  private resetsFloor = 0;

  constructor(opts: EngineOptions<P>) {
    this.self = opts.self;
    this.ops = opts.ops;
    this.random = opts.random;
    this.sync = opts.sync;
    this.partitionCount = opts.partitions ?? DEFAULT_PARTITIONS;
    if (!Number.isInteger(this.partitionCount) || this.partitionCount < 1) {
      throw new RangeError(`partition count must be a positive integer, got ${this.partitionCount}`);
    }
    if (this.sync.algorithm === 1) {
      const k = this.sync.statePeriod ?? DEFAULT_STATE_PERIOD;
      if (!Number.isInteger(k) || k < 1) throw new RangeError(`statePeriod must be a positive integer, got ${k}`);
      for (let p = 0; p < this.partitionCount; p++) this.alg1.push(new Alg1Partition(this.ops, p));
    } else {
      const seqs = this.sync.initialSeqs ?? [];
      if (seqs.length > this.partitionCount) {
        throw new RangeError(`${seqs.length} initial seqs for ${this.partitionCount} partitions`);
      }
      for (let p = 0; p < this.partitionCount; p++) this.alg2.push(new Alg2Partition(this.ops, p, seqs[p] ?? 0));
      if (opts.clock !== undefined) {
        for (let p = 0; p < this.partitionCount; p++) {
          this.marks.push(new SeqMarks());
          // Changes from before this process: no neighbour of this one has acknowledged them yet.
          if ((seqs[p] ?? 0) > 0) this.restoredUnshipped.add(p);
        }
      }
    }
    this.clock = this.sync.algorithm === 2 ? opts.clock : undefined;
    if (opts.neighbours !== undefined) this.setNeighbours(opts.neighbours);
  }

  get algorithm(): 1 | 2 {
    return this.sync.algorithm;
  }

  // ------------------------------------------------------------------ membership

  /**
   * Replace the neighbour set. A new neighbour starts at ack 0, so it is sent full state (or the
   * whole buffer while it still starts at seq 0); a departed one leaves the ack map so GC no
   * longer waits for it.
   */
  setNeighbours(ids: Iterable<string>): void {
    const next = new Set<string>();
    for (const id of ids) if (id !== this.self) next.add(id);
    for (const old of this.peerSet) {
      if (next.has(old)) continue;
      for (const part of this.alg2) part.forget(old);
      // A reply to a frame planned before (a tail push still under way) would otherwise credit
      // the forgotten acks back, past an interval the neighbour never got, if it returns.
      this.bumpResets(old);
    }
    this.peerSet = next;
    this.peers = [...next].sort();
    this.forgetPeersExcept(next);
  }

  /**
   * What is kept per peer id (boot ids, drop counts, reset counts) goes with the peers that are no
   * longer neighbours, so ids that come and go (replaced nodes, new identities) do not pile up. A
   * departed peer's acks are gone already (setNeighbours): if it returns, it starts over at 0.
   */
  private forgetPeersExcept(keep: ReadonlySet<string>): void {
    this.boots.forgetExcept(keep);
    this.drops.forgetExcept(keep);
    let highest: number | undefined;
    for (const [id, n] of this.resets) {
      if (keep.has(id)) continue;
      this.resets.delete(id);
      highest = Math.max(highest ?? 0, n);
    }
    if (highest === undefined) return;
    // A reset count must never go back to a value a planned send already took, or a late reply to
    // it would pass as fresh: neighbours without an entry keep the floor they had, and every id
    // without one from now on (the forgotten ones too) reads above all values handed out so far.
    for (const id of keep) if (!this.resets.has(id)) this.resets.set(id, this.resetsFloor);
    this.resetsFloor = Math.max(this.resetsFloor, highest) + 1;
  }

  /** Ids with something kept per peer (boot ids, drop counts, reset counts), for tests and stats. */
  peerStateIds(): Set<string> {
    return new Set([...this.boots.ids(), ...this.drops.ids(), ...this.resets.keys()]);
  }

  neighbours(): string[] {
    return this.peers.slice();
  }

  /**
   * Placement: the peers each partition is exchanged with (its other owners, say), or undefined
   * for every neighbour and every partition. A partition goes to a neighbour only when both lists
   * hold it; garbage collection waits only for those. A peer leaving a partition's list loses its
   * acks there, so if it comes back it starts at 0 (full state), as a new neighbour does.
   */
  setPartitionPeers(peersOf: ((partition: number) => Iterable<string>) | undefined): void {
    const before = this.partitionPeers;
    if (peersOf === undefined) {
      this.partitionPeers = undefined;
      return;
    }
    const next = Array.from({ length: this.partitionCount }, (_, p) => new Set([...peersOf(p)].filter((id) => id !== this.self)));
    const forgotten = new Set<string>();
    for (let p = 0; p < this.partitionCount; p++) {
      const old = before?.[p] ?? this.peerSet;
      for (const id of old) {
        if (next[p]!.has(id)) continue;
        this.alg2[p]?.forget(id);
        forgotten.add(id);
      }
    }
    // Replies to frames planned before are stale for them (see setNeighbours).
    for (const id of forgotten) this.bumpResets(id);
    this.partitionPeers = next;
  }

  /** The neighbours partition p is exchanged with. */
  peersOf(p: number): string[] {
    const only = this.partitionPeers?.[p];
    return only === undefined ? this.peers : this.peers.filter((id) => only.has(id));
  }

  /** Whether partition p has a neighbour (peersOf(p) is not empty), without building the list. */
  private hasPeers(p: number): boolean {
    const only = this.partitionPeers?.[p];
    return only === undefined ? this.peers.length > 0 : this.peers.some((id) => only.has(id));
  }

  private exchangesWith(p: number, peer: string): boolean {
    const only = this.partitionPeers?.[p];
    return only === undefined || only.has(peer);
  }

  /**
   * The boot id a neighbour named in its frame or reply (peer-boots.ts). When it changed, the
   * neighbour came back without what it acknowledged (a new data directory, or a restart that may
   * have lost unsynced writes): its acks go back to 0, so it gets full state. Returns true then;
   * the acks of a reply that says so promise only what its frame carried and must be ignored.
   */
  noticeBoot(id: string, boot: bigint): boolean {
    if (!this.boots.restarted(id, boot)) return false;
    for (const part of this.alg2) part.forget(id);
    this.drops.forgetPeer(id);
    this.bumpResets(id);
    this.counters.peerRestarts++;
    return true;
  }

  /**
   * The partitions a neighbour says it dropped (peer-drops.ts). Where its count went up, its acks
   * there go back to 0, so it gets full state once it takes the partition again. Returns those
   * partitions: the acks the same message carries for them must be ignored.
   */
  noticeDrops(id: string, drops: readonly PartitionDropCount[]): Set<number> {
    const raised = this.drops.noticePeer(id, drops).filter((p) => Number.isInteger(p) && p >= 0 && p < this.partitionCount);
    for (const p of raised) this.alg2[p]?.forget(id);
    if (raised.length > 0) {
      this.bumpResets(id);
      this.counters.peerDrops += raised.length;
    }
    return new Set(raised);
  }

  /** This node dropped its local copy of partition p (hand-off): its messages say so from now on. */
  noteDropped(p: number): void {
    this.checkPartition(p);
    this.drops.noteOwn(p);
    // What the buffer holds is no longer held here, yet a peer would book it as this node's (BP
    // would then keep it from this node for good). A hand-off drops only what every owner acked.
    this.alg2[p]?.clearBuffer();
  }

  /** This node's drops, for every frame and reply it sends. */
  droppedCounts(): PartitionDropCount[] {
    return this.drops.ownCounts();
  }

  /**
   * How many times this peer's acks were reset. Taken when a send is planned and compared when
   * its reply comes: a reply to a send planned before a reset acknowledges an interval that was
   * based on the acks the reset voided, so it proves nothing.
   */
  resetsOf(id: string): number {
    return this.resets.get(id) ?? this.resetsFloor;
  }

  private bumpResets(id: string): void {
    this.resets.set(id, this.resetsOf(id) + 1);
  }

  // ------------------------------------------------------------------ inputs

  /** A local operation's delta, already joined into X. Returns the partition's c (0 under Algorithm 1). */
  local(partition: number, delta: P): number {
    this.checkPartition(partition);
    if (this.ops.isBottom(delta)) return this.seq(partition);
    if (this.sync.algorithm === 1) {
      this.alg1[partition]!.local(delta);
      return 0;
    }
    return this.append(partition, delta, this.self);
  }

  /** The items of one received frame. Returns the acks owed to the sender (Algorithm 2). */
  onFrame(from: string, items: readonly ReceivedItem<P>[]): Ack[] {
    this.counters.framesReceived++;
    const acks: Ack[] = [];
    for (const item of items) {
      if (!this.validItem(item)) {
        this.counters.itemsRejected++;
        continue;
      }
      const kind = item.kind === PayloadKind.STATE ? "state" : "delta";
      this.counters.itemsReceived[kind]++;
      this.counters.bytesReceived[kind] += item.bytes ?? 0;
      const fresh = item.fresh !== undefined && !this.ops.isBottom(item.fresh) ? item.fresh : undefined;
      const tooLarge = item.tooLarge === true;
      if (fresh === undefined && !tooLarge) this.counters.redundantReceived++;
      if (tooLarge) this.counters.largeCatchUps++;
      if (this.sync.algorithm === 1) {
        const part = this.alg1[item.partition]!;
        part.receive(fresh, this.sync.transitive);
        if (tooLarge) part.receiveTooLarge(this.sync.transitive);
      } else {
        if (fresh !== undefined) this.append(item.partition, fresh, from);
        if (tooLarge) {
          this.noteSeq(item.partition);
          this.seqChanges.set(item.partition, this.alg2[item.partition]!.appendHole(from));
        }
        if (item.seq > 0) {
          const ack = { partition: item.partition, seq: item.seq };
          acks.push(ack);
          this.counters.acksSent++;
          this.counters.bytesSent.ack += ackBytes(ack);
        }
      }
    }
    return acks;
  }

  /** Acks received from a neighbour. */
  onAcks(from: string, acks: readonly Ack[]): void {
    for (const a of acks) {
      this.counters.acksReceived++;
      this.counters.bytesReceived.ack += ackBytes(a);
      const ok =
        this.sync.algorithm === 2 &&
        this.peerSet.has(from) &&
        (this.partitionPeers === undefined || this.partitionPeers[a.partition]?.has(from) === true) &&
        Number.isInteger(a.partition) &&
        a.partition >= 0 &&
        a.partition < this.partitionCount &&
        this.alg2[a.partition]!.ack(from, a.seq);
      if (!ok) this.counters.acksIgnored++;
    }
  }

  // ------------------------------------------------------------------ the period

  /**
   * Run one period: returns one frame per neighbour that has something to receive, then GCs.
   * fanout overrides Algorithm 2's choice of neighbours for this period (a push of fresh local
   * deltas goes to every neighbour: sending an interval more often than once a period is within
   * the algorithm, which only asks that what is not acknowledged be sent again).
   */
  tick(now: number, opts: TickOptions = {}): OutgoingFrame<P>[] {
    this.lastTickAt = now;
    this.counters.ticks++;
    const period = this.period++;
    const open = opts.skip === undefined ? this.peers : this.peers.filter((id) => !opts.skip!(id));
    const frames = this.sync.algorithm === 1 ? this.tickAlg1(period, this.sync, open) : this.tickAlg2(this.sync, opts, open);
    for (const f of frames) {
      this.counters.framesSent++;
      for (const item of f.items) {
        if (item.kind === PayloadKind.STATE) {
          this.counters.itemsSent.state++;
        } else {
          this.counters.itemsSent.delta++;
        }
      }
    }
    return frames;
  }

  private tickAlg1(period: number, cfg: Algorithm1Config, peers: readonly string[]): OutgoingFrame<P>[] {
    const k = cfg.statePeriod ?? DEFAULT_STATE_PERIOD;
    const items: FrameItem<P>[] = [];
    let deltaBytes = 0;
    for (const part of this.alg1) {
      const plan = part.plan(cfg.choose, period, k);
      if (plan.kind === "state") items.push({ partition: part.partition, kind: PayloadKind.STATE, seq: 0 });
      if (plan.kind !== "none" && plan.payload !== undefined) {
        items.push({ partition: part.partition, kind: PayloadKind.DELTA, seq: 0, payload: plan.payload });
        deltaBytes += this.ops.sizeBytes(plan.payload);
      }
    }
    if (items.length === 0) return [];
    // A left-out neighbour misses this period's full states too: they are owed next period.
    if (peers.length < this.peers.length) this.statesNotSent(items.filter((i) => i.kind === PayloadKind.STATE).map((i) => i.partition));
    if (this.partitionPeers === undefined) {
      this.counters.bytesSent.delta += deltaBytes * peers.length;
      return peers.map((to) => ({ to, items: items.slice() }));
    }
    const frames: OutgoingFrame<P>[] = [];
    for (const to of peers) {
      const mine = items.filter((i) => this.exchangesWith(i.partition, to));
      for (const i of mine) if (i.payload !== undefined) this.counters.bytesSent.delta += this.ops.sizeBytes(i.payload);
      if (mine.length > 0) frames.push({ to, items: mine });
    }
    return frames;
  }

  private tickAlg2(cfg: Algorithm2Config, opts: TickOptions, peers: readonly string[]): OutgoingFrame<P>[] {
    const fanout = opts.tail === true ? "all" : opts.fanout;
    // With placement, a random pick is among the neighbours that lack something of a partition they
    // share with this node: most neighbours share none of the partitions that changed, and a pick
    // among all of them would mostly send nothing.
    const candidates = this.partitionPeers === undefined ? peers : peers.filter((id) => this.alg2.some((part) => this.partitionPeers![part.partition]!.has(id) && part.ackOf(id) < part.seq));
    const targets =
      candidates.length === 0 ? [] : (fanout ?? cfg.fanout ?? "random") === "all" ? candidates : [pick(this.random, candidates)];
    const frames: OutgoingFrame<P>[] = [];
    for (const to of targets) {
      const items: FrameItem<P>[] = [];
      for (const part of this.alg2) {
        if (!this.exchangesWith(part.partition, to)) continue;
        const plan = opts.tail === true ? part.planTail(to, cfg.bp, MAX_TAILS_IN_FLIGHT) : part.plan(to, cfg.bp);
        switch (plan.kind) {
          case "none":
            break;
          case "state":
            this.counters.stateFallbacks++;
            items.push({ partition: part.partition, kind: PayloadKind.STATE, seq: plan.seq });
            if (opts.tail === true) this.planRanges(part, to, cfg.bp, opts.ranges, items);
            break;
          case "delta":
          case "advanced":
            this.takeDeltaPlan(part.partition, plan, items);
            break;
        }
      }
      if (items.length > 0) frames.push({ to, items });
    }
    this.gc();
    return frames;
  }

  /** Beside a full state a push sends j: the waiting writes' intervals of the partition, each alone. */
  private planRanges(part: Alg2Partition<P>, to: string, bp: boolean, ranges: TickOptions["ranges"], items: FrameItem<P>[]): void {
    for (const r of ranges ?? []) {
      if (r.partition !== part.partition) continue;
      if (this.takeDeltaPlan(part.partition, part.planRange(to, r.from, r.to, bp, MAX_TAILS_IN_FLIGHT), items)) this.counters.copyRanges++;
    }
  }

  /**
   * A delta plan into the frame's items, counting the deltas BP held back and the bytes sent; an
   * advanced plan counts only what BP held back. True when a delta goes out.
   */
  private takeDeltaPlan(partition: number, plan: Alg2Plan<P>, items: FrameItem<P>[]): boolean {
    if (plan.kind !== "delta" && plan.kind !== "advanced") return false;
    this.counters.bpHeldBack += plan.held;
    if (plan.kind === "advanced") return false;
    this.counters.bytesSent.delta += this.ops.sizeBytes(plan.payload);
    items.push({ partition, kind: PayloadKind.DELTA, seq: plan.seq, payload: plan.payload });
    return true;
  }

  /** Drop the deltas every current neighbour has acked (runs at the end of each tick). */
  gc(): void {
    for (const part of this.alg2) {
      const peers = this.peersOf(part.partition);
      this.counters.deltasCollected += part.gc(peers);
      const minAck = this.minAckOf(part, peers);
      this.marks[part.partition]?.prune(minAck);
      if (peers.length > 0 && minAck === part.seq) this.restoredUnshipped.delete(part.partition);
    }
  }

  /**
   * The caller did not ship these partitions' STATE items (a stream to the peer was running).
   * Algorithm 1 reset their delta-groups when it planned them, so they owe the state next period;
   * Algorithm 2 plans it again by itself while the peer's ack stays behind.
   */
  statesNotSent(partitions: readonly number[]): void {
    if (this.sync.algorithm !== 1) return;
    for (const p of partitions) {
      this.checkPartition(p);
      this.alg1[p]!.oweState();
    }
  }

  /** Algorithm 2: the caller did not get these tail-push items to j (see Alg2Partition.tailNotSent). */
  tailsNotSent(to: string, items: ReadonlyArray<{ partition: number; seq: number }>): void {
    if (this.sync.algorithm !== 2) return;
    for (const i of items) this.alg2[i.partition]?.tailNotSent(to, i.seq);
  }

  /** The caller shipped a full state of this many bytes. */
  recordStateBytesSent(bytes: number): void {
    this.counters.bytesSent.state += bytes;
  }

  /** The caller received this many bytes of a full state (its STATE items carry none). */
  recordStateBytesReceived(bytes: number): void {
    this.counters.bytesReceived.state += bytes;
  }

  // ------------------------------------------------------------------ durable seq

  /** Algorithm 2: c of a partition (0 under Algorithm 1). */
  seq(partition: number): number {
    this.checkPartition(partition);
    return this.sync.algorithm === 2 ? this.alg2[partition]!.seq : 0;
  }

  /** Partitions whose c moved since the last call, with the new value. The caller persists them. */
  takeSeqChanges(): Map<number, number> {
    const out = new Map(this.seqChanges);
    this.seqChanges.clear();
    return out;
  }

  // ------------------------------------------------------------------ inspection

  /** Algorithm 2: whether neighbour j holds the partition's deltas [from, to) (Alg2Partition.holdsRange); Algorithm 1: never known. */
  holdsRange(partition: number, peer: string, from: number, to: number): boolean {
    this.checkPartition(partition);
    return this.sync.algorithm === 2 && this.alg2[partition]!.holdsRange(peer, from, to);
  }

  /** Algorithm 2: A(j) for a partition. */
  ackOf(partition: number, peer: string): number {
    this.checkPartition(partition);
    return this.sync.algorithm === 2 ? this.alg2[partition]!.ackOf(peer) : 0;
  }

  /**
   * Algorithm 2: partitions no neighbour has acknowledged up to their seq yet (what changed there
   * lives on this node alone, or on nodes it learnt it from). Partitions without a neighbour are
   * left out: nothing can take them. Algorithm 1 has no acknowledgements: none. judge narrows the
   * neighbours (isPeer: which count as the partition's neighbours at all) and whose
   * acknowledgements count (counts).
   */
  unshipped(judge: { isPeer?: (id: string) => boolean; counts?: (id: string) => boolean } = {}): number[] {
    if (this.sync.algorithm !== 2) return [];
    const isPeer = judge.isPeer ?? (() => true);
    const counts = judge.counts ?? (() => true);
    const out: number[] = [];
    for (const part of this.alg2) {
      if (part.seq === 0) continue;
      const peers = this.peersOf(part.partition).filter(isPeer);
      if (peers.length > 0 && !peers.some((j) => counts(j) && part.ackOf(j) >= part.seq)) out.push(part.partition);
    }
    return out;
  }

  /** Algorithm 2: the buffered deltas of a partition, oldest first. */
  buffered(partition: number): ReadonlyArray<{ seq: number; delta: P; origin: string; bytes: number }> {
    this.checkPartition(partition);
    return this.sync.algorithm === 2 ? this.alg2[partition]!.bufferEntries : [];
  }

  /** Algorithm 1: the delta-group not yet shipped. */
  deltaGroup(partition: number): P {
    this.checkPartition(partition);
    return this.sync.algorithm === 1 ? this.alg1[partition]!.deltaGroup : this.ops.bottom();
  }

  partitionStats(partition: number): PartitionStats {
    this.checkPartition(partition);
    if (this.sync.algorithm === 1) return { partition, seq: 0, bufferEntries: 0, bufferBytes: 0, lag: 0 };
    const part = this.alg2[partition]!;
    const lag = part.seq - this.minAckOf(part, this.peersOf(partition));
    const stats: PartitionStats = { partition, seq: part.seq, bufferEntries: part.bufferEntries.length, bufferBytes: part.bufferBytes, lag };
    const marks = this.marks[partition];
    if (marks !== undefined) {
      // Before it has any neighbour, a restarted node cannot tell whether its last changes ever
      // left it (a partition without peers while it has neighbours has nobody to wait for).
      const unknown = this.peers.length === 0 && this.restoredUnshipped.has(partition);
      stats.unackedAgeMs = unknown ? Infinity : lag > 0 ? marks.ageOf(part.seq - lag, this.clock!()) : 0;
    }
    return stats;
  }

  snapshot(): EngineSnapshot {
    const partitions: PartitionStats[] = [];
    for (let p = 0; p < this.partitionCount; p++) partitions.push(this.partitionStats(p));
    return {
      counters: structuredClone(this.counters),
      partitions,
      neighbours: this.neighbours(),
      lastTickAt: this.lastTickAt,
    };
  }

  // ------------------------------------------------------------------ helpers

  private append(partition: number, delta: P, origin: string): number {
    const part = this.alg2[partition]!;
    if (!this.hasPeers(partition)) {
      // Nobody exchanges this partition (a lone node, or one owner per partition): holding the
      // delta until the tick's gc would only keep a second of writes alive in memory.
      const { c, dropped } = part.skip();
      this.counters.deltasCollected += dropped + 1;
      this.seqChanges.set(partition, c);
      return c;
    }
    this.noteSeq(partition);
    const c = part.append(delta, origin);
    const limit = (this.sync as Algorithm2Config).maxBufferBytes;
    if (limit !== undefined) this.counters.bufferOverflowDrops += part.enforceLimit(limit);
    this.seqChanges.set(partition, c);
    return c;
  }

  /** The partition's next seq is being handed out now. */
  private noteSeq(partition: number): void {
    this.marks[partition]?.note(this.alg2[partition]!.seq, this.clock!());
  }

  /** The lowest ack among the partition's peers (c with none: nothing is owed). */
  private minAckOf(part: Alg2Partition<P>, peers: readonly string[]): number {
    let min = part.seq;
    for (const j of peers) min = Math.min(min, part.ackOf(j));
    return min;
  }

  private validItem(item: ReceivedItem<P>): boolean {
    return (
      Number.isInteger(item.partition) &&
      item.partition >= 0 &&
      item.partition < this.partitionCount &&
      (item.kind === PayloadKind.DELTA || item.kind === PayloadKind.STATE) &&
      Number.isSafeInteger(item.seq) &&
      item.seq >= 0
    );
  }

  private checkPartition(p: number): void {
    if (!Number.isInteger(p) || p < 0 || p >= this.partitionCount) {
      throw new RangeError(`partition ${p} is outside 0..${this.partitionCount - 1}`);
    }
  }
}
