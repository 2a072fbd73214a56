// The gossip exchange of one node, sans-IO: everything between the anti-entropy engine and the
// wire except the wire. It builds the frames and state streams (state-stream.ts) a tick asks for,
// answers what this node holds (catch-up.ts), and checks, decodes and joins what arrives (frames
// here, chunked state streams in state-receive.ts) into the store, with redundancy removal, chunk
// order checks and the transfer hold, then hands the engine the new parts and returns the reply. The node
// (node-gossip.ts) runs it behind gRPC and a timer; the simulator (simulator.ts) runs the same
// code over a lossy in-process channel, each node on an in-memory store, so what is simulated is
// what runs.
import { logThrottle } from "../common/log-throttle.js";
import { status } from "@grpc/grpc-js";
import { type CausalContext, type DecodeBound, ObjectType, JoinConflictError, contextFromProto, decodeBoundOf, latticeFor } from "../crdt/index.js";
import type { ContextsReply, ContextsRequest, GossipFrame, GossipReply, HandOverReply, HandOverRequest, PartitionDrop, StateChunk, StateReply } from "../gen/deltaset/v1/gossip.js";
import { ContextsReply as ContextsReplyMsg, PayloadKind } from "../gen/deltaset/v1/gossip.js";
import type { Store } from "../store/store.js";
import type { JoinResult } from "../store/layout.js";
import { TypeMismatchError } from "../store/errors.js";
import type { Logger } from "../common/logger.js";
import { persistMovedSeqs, restartSeqs } from "./durable-seq.js";
import { type Ack, type Algorithm1Config, type Algorithm2Config, AntiEntropyEngine, type ReceivedItem, type TickOptions } from "./engine.js";
import { type KeyedState, type KeyedStates, keyedFromProto, keyedStatesOps, keyedToProto, protoKeysSize } from "./keyed-states.js";
import { LocalGate } from "./local-gate.js";
import { SettleAnnouncer } from "./settle-announcer.js";
import type { PayloadOps } from "./payload.js";
import { partitionOf } from "./partition.js";
import { NO_MAC } from "../common/trailing-mac.js";
import { forEachBounded } from "../common/bounded.js";
import { type Holdings, PartitionClaims, holdingsFrom, partitionHoldings } from "./catch-up.js";
import { type StateStreamSource, stateStream } from "./state-stream.js";
import { type StateReceiveHost, receiveStateStream } from "./state-receive.js";
import { type Answer, type Refusal, ackToProto } from "./answer.js";
import { REFUSED_JOINS_BYTES, RefusedJoins } from "./refused-joins.js";


/** Keys of one received frame joined into the store at once. */
const FRAME_KEYS_AT_ONCE = 16;

/** Default of ExchangeOptions.contextsClaimMs. */
export const CONTEXTS_CLAIM_MS = 10_000;

/** Default of ExchangeOptions.contextsReplyBytes. */
export const CONTEXTS_REPLY_BYTES = 4 * 1024 * 1024;

export { MAX_BUFFERED_STATE_ELEMENTS } from "./state-receive.js";
export { REFUSED_JOINS_BYTES } from "./refused-joins.js";

export interface ExchangeOptions {
  store: Store;
  log: Logger;
  cluster: string;
  partitions: number;
  sync: Algorithm1Config | Algorithm2Config;
  /** Elements per chunk of a full-state stream. */
  stateChunkEntries: number;
  /**
   * Payload bytes after which a full-state stream ends, at the end of the partition that reached
   * them; the rest of its partitions go in the next stream (default: no limit). See stateStream.
   */
  stateStreamBytes?: number;
  /**
   * Most encoded bytes of a Contexts answer (the keys past it are not listed: the sender pushes
   * them whole). Default CONTEXTS_REPLY_BYTES.
   */
  contextsReplyBytes?: number;
  /**
   * How long a neighbour this node answered Contexts for a partition may take to start pushing it
   * before another neighbour asking is no longer told to wait (busy). Default CONTEXTS_CLAIM_MS.
   */
  contextsClaimMs?: number;
  /** Contexts questions a full-state push has out at once ahead of its stream (holdings-prefetch.ts); default CONTEXTS_AHEAD. */
  contextsAhead?: number;
  /** Largest message; delta frames are cut to half of it, a larger delta ships as full state. */
  maxMessageBytes: number;
  /**
   * Largest filter a received state may hold (--max-filter-bytes): a key whose state asks for more
   * is skipped (counted as oversizedStates, logged), and the rest of its frame or stream is applied.
   * Default: no bound.
   */
  maxFilterBytes?: number;
  /**
   * Largest encoded state of a key stored whole this node gathers from the pieces of a full-state
   * stream (--max-state-bytes): a larger one is skipped like an oversized filter. Default: no bound.
   */
  maxStateBytes?: number;
  /**
   * A received full state whose new part exceeds this many elements is not held in the delta
   * buffer; the partition is forwarded to the other neighbours by full state instead.
   */
  maxBufferedStateElements?: number;
  /** This process's boot id (drawn at each start). */
  boot: bigint;
  /** Whether this node is leaving the cluster (GossipFrame.leaving, GossipReply.leaving); default never. */
  leaving?: () => boolean;
  /** Told of every frame and reply a peer sends, with whether it says it is leaving. */
  onPeerHeard?: (peer: string, leaving: boolean) => void;
  /**
   * Told each time a change made here enters the delta buffer (a client's, or one made while
   * joining: spreadSettled): at once, or later, when it waited behind received payloads of its
   * partition (local-gate.ts). A push of local changes (NodeGossip's pushLocalMs) is scheduled
   * from here, so one that waited is not left for the period. Settle announcements are not told.
   */
  onLocalBuffered?: () => void;
  /** Told after a neighbour's acks were taken, with their partitions (writes waiting for copies). */
  onAcked?: (partitions: number[]) => void;
  /** A peer's acks went back (it restarted, or dropped partitions): what it held is sent again. */
  onAcksReset?: (peer: string) => void;
  random: () => number;
  /** The engine's payload sizes (the simulator caches encodings); keyedStatesOps by default. */
  ops?: PayloadOps<KeyedStates>;
  /**
   * Placement: whether this node takes a partition's gossip from a sender (it owns it, or will
   * once that sender, leaving, is gone). Items of other partitions are neither joined nor
   * acknowledged, so their sender keeps them. Default: all.
   */
  accepts?: (partition: number, from: string) => boolean;
  /** A sender's full-state stream of a partition ended with its end marker, its first chunk at startedMs (Date.now), no key of it left out: the partition arrived whole from it. */
  onPartitionWhole?: (partition: number, from: string, startedMs: number) => void;
  /**
   * Settle announcements (settle-announcer.ts): a key of a type whose deltas can lose information
   * (Lattice.settlesByState) is sent whole to the neighbours once it had no change that reads see
   * for this many ms. 0 or left out: never.
   */
  settleMs?: number;
  /** A key whose encoded state is larger than this is not announced (counted in settleTooLarge). */
  settleMaxBytes?: number;
  /**
   * A key still changing this many ms after its first change not yet announced is announced
   * anyway (0 or left out: only once quiet).
   */
  settleMaxWaitMs?: number;
  /**
   * Encoded bytes one call of announceSettled puts in the buffer, at most (at least one key):
   * keys past it stay due for the next period. Left out: no bound.
   */
  settleBytesPerPeriod?: number;
  /** The clock settle announcements count quiet time on, and unacknowledged changes are dated by (default Date.now; the simulator's own time). */
  clock?: () => number;
  /**
   * Encoded bytes of received states the store refused to join (counters whose join would leave
   * int64) held to be joined again once their key changes here (refused-joins.ts); a refusal past
   * it is not held. Default REFUSED_JOINS_BYTES.
   */
  refusedJoinsBytes?: number;
}

/** Counters of the transport (the engine keeps its own). */
export interface TransportCounters {
  framesRejected: number;
  chunksApplied: number;
  chunksRejected: number;
  rpcErrors: number;
  typeConflicts: number;
  /** Received keys skipped because their state asks for a filter above maxFilterBytes. */
  oversizedStates: number;
  /**
   * Received keys skipped because their state does not decode here (a type this version does not
   * serve, or an encoding it refuses); their partitions go unacknowledged.
   */
  undecodableStates: number;
  /** Peers a period left out because their previous period exchange still ran (nothing built for them). */
  busySkips: number;
  /** Frames built but not sent: a full-state push to a busy peer, or states beside a running stream. */
  framesNotSent: number;
  /** Periods whose states waited for a stream running to the peer (their frames were sent). */
  statesDeferred: number;
  /** Sends dropped on purpose (lossRate). */
  sendsDropped: number;
  stateStreamsSent: number;
  stateStreamsReceived: number;
  /** State streams cancelled because they moved nothing for the stall time (retried in a later period). */
  stateStreamsStalled: number;
  /** Received full states whose new part was too big to buffer (forwarded by full state). */
  freshPartsNotBuffered: number;
  /** Items and state chunks of partitions this node does not own, left unapplied and unacked. */
  notOwnedRefused: number;
  /** Payload bytes of state-stream chunks applied here (what full-state transfers and hand-offs moved in). */
  stateBytesApplied: number;
  /** Deferred removes taken over from a node that no longer owns their keys (HandOver). */
  removesTakenOver: number;
  /** ExchangeStreams opened to neighbours (one per neighbour, again after one fails). */
  exchangeStreamsOpened: number;
  /** Neighbours found not to serve ExchangeStream (UNIMPLEMENTED), sent unary Exchange calls instead. */
  exchangeStreamFallbacks: number;
  /** Keys sent whole to the neighbours once quiet (settle announcements). */
  settleAnnouncements: number;
  /** Contexts requests answered (a neighbour about to push a partition asked what is here). */
  contextsAnswered: number;
  /** Of contextsAnswered, those answered busy: another neighbour held the partition's claim. */
  contextsAnsweredBusy: number;
  /** Encoded bytes of the Contexts answers this node gave. */
  contextsReplyBytes: number;
  /** Keys a full-state push sent as their delta since what the receiver holds (catch-up.ts). */
  catchUpDeltaKeys: number;
  /** Keys a full-state push left out: the receiver held all of them (context or digest). */
  catchUpKeysSkipped: number;
  /** Of catchUpKeysSkipped, sets left out without reading them: the live digests agreed (store/live-digest.ts). */
  catchUpKeysUnread: number;
  /** Streams refused here: their deltas were cut against what this node held in another life or before a drop. */
  catchUpStale: number;
  /** Partitions a push left for a later period: another neighbour was pushing them to the receiver. */
  catchUpBusyDeferred: number;
  /** Contexts requests that failed (pushed as full state): an older neighbour, a timeout, a node still starting. */
  catchUpContextsFailed: number;
  /** Keys due for a settle announcement but larger than settleMaxBytes: not announced. */
  settleTooLarge: number;
  /** Of settleAnnouncements, keys announced still changing, their first change settleMaxWaitMs old (hot keys). */
  settleOverdue: number;
  /** Received states the store refused to join (counters out of int64), held to be joined again once their key changes. */
  refusedJoinsHeld: number;
  /** Refused states not held: refusedJoinsBytes was reached. Their key converges only when written again. */
  refusedJoinsNotHeld: number;
  /** Held refused states that joined on a later try (a change of their key brought them in range) and spread from here. */
  refusedJoinsJoined: number;
}

/** What a tick sends one peer: delta frames (each under the message limit), then a state stream. */
export interface Outgoing {
  to: string;
  frames: GossipFrame[];
  /** Partitions to stream in full (stateStream), with the seq each one's end marker acknowledges. */
  states: Array<{ partition: number; seq: number }>;
  /** The peer's reset count when these were planned: handed back to onReply with their replies. */
  resets: number;
}

export type { Answer, Refusal } from "./answer.js";

export class GossipExchange {
  readonly engine: AntiEntropyEngine<KeyedStates>;
  readonly counters: TransportCounters = {
    framesRejected: 0,
    chunksApplied: 0,
    chunksRejected: 0,
    rpcErrors: 0,
    typeConflicts: 0,
    oversizedStates: 0,
    undecodableStates: 0,
    busySkips: 0,
    framesNotSent: 0,
    statesDeferred: 0,
    sendsDropped: 0,
    stateStreamsSent: 0,
    stateStreamsReceived: 0,
    stateStreamsStalled: 0,
    freshPartsNotBuffered: 0,
    exchangeStreamsOpened: 0,
    exchangeStreamFallbacks: 0,
    settleAnnouncements: 0,
    settleTooLarge: 0,
    settleOverdue: 0,
    refusedJoinsHeld: 0,
    refusedJoinsNotHeld: 0,
    refusedJoinsJoined: 0,
    notOwnedRefused: 0,
    stateBytesApplied: 0,
    removesTakenOver: 0,
    contextsAnswered: 0,
    contextsAnsweredBusy: 0,
    contextsReplyBytes: 0,
    catchUpDeltaKeys: 0,
    catchUpKeysSkipped: 0,
    catchUpKeysUnread: 0,
    catchUpStale: 0,
    catchUpBusyDeferred: 0,
    catchUpContextsFailed: 0,
  };
  private frameId = 0n;
  /** What received states are decoded under (maxFilterBytes, maxStateBytes). */
  private readonly decodeBound: DecodeBound | undefined;
  /** Warnings about keys left out (conflicts, oversized states), which recur at every exchange. */
  private readonly skipLog = logThrottle(60_000);
  private readonly gate = new LocalGate<{ partition: number; payload: KeyedStates; push: boolean }>(
    (c) => {
      this.engine.local(c.partition, c.payload);
      if (c.push) this.o.onLocalBuffered?.();
    },
    () => this.ageClock(),
  );
  private readonly settle: SettleAnnouncer<ObjectType> | undefined;
  private readonly rr: boolean;
  private readonly self: string;
  /** Partitions a neighbour is pushing here (Contexts' busy). */
  private readonly claims: PartitionClaims;
  /** What outgoing state streams are built from (state-stream.ts). */
  private readonly streamSource: StateStreamSource;
  /** What incoming state streams are joined with (state-receive.ts). */
  private readonly receiveHost: StateReceiveHost;
  /** Neighbours that answered a frame or stream of this process: they know its boot id. */
  private readonly greeted = new Set<string>();
  /** Until when every neighbour is greeted each period (identityContested, greetEveryNeighbourUntil). */
  private greetAllUntil = Number.NEGATIVE_INFINITY;
  /** Received states the store refused to join, tried again when their key changes (refused-joins.ts). */
  private readonly refusedJoins: RefusedJoins;
  /** Durable changes of the store seen so far (Store.onChange): did a key change during a refused join? */
  private storeChanges = 0;

  private constructor(
    private readonly o: ExchangeOptions,
    initialSeqs: number[],
    /** Is this id a member allowed to gossip with us? */
    private readonly isPeer: (id: string) => boolean,
  ) {
    this.self = o.store.nodeId;
    this.claims = new PartitionClaims(o.contextsClaimMs ?? CONTEXTS_CLAIM_MS);
    this.decodeBound = decodeBoundOf(o);
    this.refusedJoins = new RefusedJoins(o.refusedJoinsBytes ?? REFUSED_JOINS_BYTES);
    o.store.onChange((key) => {
      this.storeChanges++;
      this.refusedJoins.changed(key);
    });
    this.streamSource = { o, self: this.self, counters: this.counters, recordStateBytesSent: (bytes) => this.engine.recordStateBytesSent(bytes) };
    this.rr = o.sync.algorithm === 2 && o.sync.rr;
    this.settle = o.settleMs !== undefined && o.settleMs > 0 ? new SettleAnnouncer(o.settleMs, o.settleMaxWaitMs !== undefined && o.settleMaxWaitMs > 0 ? o.settleMaxWaitMs : Infinity) : undefined;
    this.engine = new AntiEntropyEngine<KeyedStates>({
      self: this.self,
      ops: o.ops ?? keyedStatesOps,
      random: o.random,
      partitions: o.partitions,
      sync: o.sync.algorithm === 2 ? { ...o.sync, initialSeqs } : o.sync,
      clock: () => this.ageClock(),
    });
    this.receiveHost = {
      o,
      self: this.self,
      counters: this.counters,
      gate: this.gate,
      claims: this.claims,
      checkPeer: (cluster, from, partitions) => this.checkPeer(cluster, from, partitions),
      noticeBoot: (peer, boot) => this.noticeBoot(peer, boot),
      refuse: (code, details, from) => this.refuse(code, details, from),
      ownDrops: (p) => this.ownDrops(p),
      onFrame: (from, items) => this.engine.onFrame(from, items),
      recordStateBytesReceived: (bytes) => this.engine.recordStateBytesReceived(bytes),
      spreadSettled: (key, settled) => this.spreadSettled(key, settled),
      changeMark: () => this.storeChanges,
      holdRefused: (key, type, state, from, mark) => this.holdRefused(key, type, state, from, mark),
      changedHere: (key, type) => this.changedHere(key, type),
      dropped: () => this.dropped(),
      skipOversized: (key, err, from) => this.skipOversized(key, err, from),
      skipUndecodable: (key, err, from) => this.skipUndecodable(key, err, from),
      skipConflict: (key, reason) => this.skipConflict(key, reason),
    };
  }

  /**
   * An exchange whose Algorithm 2 sequence numbers restart past the durable ones, made durable
   * before it runs (so every partition holding data ships full state to every neighbour first:
   * durable-seq.ts).
   */
  static async create(o: ExchangeOptions, isPeer: (id: string) => boolean): Promise<GossipExchange> {
    const seqs = await restartSeqs(await o.store.loadSeqs(), o.partitions, await o.store.partitionsHoldingData(), o.store);
    return new GossipExchange(o, seqs, isPeer);
  }

  get boot(): bigint {
    return this.o.boot;
  }

  /** What unacknowledged changes are dated by: monotonic, since a wall clock stepped back would make ages read low. */
  private ageClock(): number {
    return this.o.clock !== undefined ? this.o.clock() : performance.now();
  }

  /**
   * How long ago the oldest change here that some neighbour has not acknowledged was taken, at most
   * (ms; Infinity when unknown): the engine's partitions, and the local changes the gate holds
   * back, which have no seq yet. Infinity while a partition has a suspected peer (suspect). Undefined under Algorithm 1, which has no acknowledgements.
   */
  oldestUnackedMs(suspect: ReadonlySet<string> = new Set()): number | undefined {
    if (this.engine.algorithm !== 2) return undefined;
    let oldest = 0;
    for (let p = 0; p < this.engine.partitionCount; p++) {
      // A suspected peer may be dead with what it acknowledged: its acks vouch for nothing until
      // it is alive again (or declared dead, and the partition's owners change).
      // (Whatever this partition's seq: one received whole may hold data under seq 0.)
      if (suspect.size > 0 && this.engine.peersOf(p).some((id) => suspect.has(id))) return Infinity;
      oldest = Math.max(oldest, this.engine.partitionStats(p).unackedAgeMs ?? 0);
    }
    const held = this.gate.oldestHeldAt();
    return held === undefined ? oldest : Math.max(oldest, this.ageClock() - held);
  }

  /** Resolves once every durable local change of partition p made so far is in the delta buffer (it has a seq). */
  localBuffered(partition: number): Promise<void> {
    return this.gate.released(partition);
  }

  /** Whether durable local changes of partition p wait behind received payloads (local-gate.ts): not in the buffer, no seq yet. */
  localChangesWaiting(partition: number): boolean {
    return this.gate.holds(partition);
  }

  /** A durable local change of key (behind the new parts of frames being joined: local-gate.ts). */
  local(key: string, type: ObjectType, delta: unknown): void {
    this.changedHere(key, type);
    this.buffer(key, type, delta, true);
  }

  /** Into the delta buffer through the gate; push: a change made here (onLocalBuffered), not a settle announcement. */
  private buffer(key: string, type: ObjectType, delta: unknown, push = false): void {
    const partition = partitionOf(key, this.o.partitions);
    this.gate.offer(partition, { partition, payload: new Map<string, KeyedState>([[key, { type, state: delta }]]), push });
  }

  /** What reads return of key changed here: due for a settle announcement when its type needs one. */
  private changedHere(key: string, type: ObjectType): void {
    if (this.settle !== undefined && latticeFor(type).settlesByState === true) this.settle.touch(key, type, (this.o.clock ?? Date.now)());
  }

  /**
   * Settle announcements due at now: each key's current state, whole, into the buffer as this
   * node's own change (every neighbour gets it, acknowledged as any delta). Returns how many.
   */
  async announceSettled(now: number): Promise<number> {
    if (this.settle === undefined) return 0;
    let n = 0;
    let bytes = 0;
    for (const { key, type, overdue } of this.settle.quiet(now)) {
      const w = await this.o.store.wholeState(key);
      if (w === undefined || w.type !== type) {
        this.settle.done(key);
        continue;
      }
      const l = latticeFor(type);
      const size = l.encodedSize(w.state);
      if (size > (this.o.settleMaxBytes ?? Infinity)) {
        this.settle.done(key);
        this.counters.settleTooLarge++;
        continue;
      }
      // The period's budget spent: the rest wait for the next period, in their order.
      if (n > 0 && bytes + size > (this.o.settleBytesPerPeriod ?? Infinity)) break;
      this.settle.done(key);
      // A copy: the store's state is shared with its cache and changes in place.
      this.buffer(key, type, l.clone(w.state));
      this.counters.settleAnnouncements++;
      if (overdue) this.counters.settleOverdue++;
      bytes += size;
      n++;
    }
    return n;
  }

  /**
   * A change this node made while joining (a remove by deferred removes whose adds just arrived,
   * a probabilistic set's refusal of dots its filter reports): a local delta, so it reaches every
   * neighbour, the one that sent the state included (BP holds back only what came from a neighbour).
   */
  private spreadSettled(key: string, settled: JoinResult<unknown>["settled"]): void {
    if (settled !== undefined) this.buffer(key, settled.type, settled.delta, true);
  }

  // ------------------------------------------------------------ sending

  /** One period: persist moved sequence numbers, then what to send to whom. */
  async tick(now: number, opts: TickOptions = {}): Promise<Outgoing[]> {
    // First: what joins now enters the buffer, and its seqs are persisted with the others.
    await this.retryRefused();
    await persistMovedSeqs(this.engine, this.o.store);
    const out: Outgoing[] = [];
    const limit = this.o.maxMessageBytes / 2;
    // Planned now, on the acks as they are now: each send remembers the peer's reset count.
    for (const f of this.engine.tick(now, opts)) {
      const resets = this.engine.resetsOf(f.to);
      const states: Outgoing["states"] = [];
      const frames: GossipFrame[] = [];
      let batch: GossipFrame["payloads"] = [];
      let batchBytes = 0;
      const flush = () => {
        if (batch.length === 0) return;
        frames.push(this.frame(batch));
        batch = [];
        batchBytes = 0;
      };
      for (const item of f.items) {
        if (item.kind === PayloadKind.STATE || item.payload === undefined) {
          states.push({ partition: item.partition, seq: item.seq });
          continue;
        }
        const keys = keyedToProto(item.payload, this.o.store.now());
        const size = keys.reduce((n, k) => n + k.key.length + (k.state?.payload.length ?? 0) + 16, 0);
        if (size > limit) {
          // Too big for one message: the partition's full state (which includes it) streams instead.
          states.push({ partition: item.partition, seq: item.seq });
          continue;
        }
        if (batchBytes + size > limit) flush();
        batch.push({ partition: item.partition, kind: PayloadKind.DELTA, seq: BigInt(item.seq), keys });
        batchBytes += size;
      }
      flush();
      out.push({ to: f.to, frames, states: states.length > 1 ? rotated(states, Math.floor(this.o.random() * states.length)) : states, resets });
    }
    if (opts.tail !== true) this.greet(out, now);
    return out;
  }

  /**
   * Another live process runs under this node's id (membership saw its records). A neighbour
   * takes whichever of the two spoke last for the id, with its acks and, through BP, the deltas
   * it sent: once a neighbour had answered this process, it went quiet here while the neighbour
   * credited the id with what the other process took. If the other then stopped, nothing reset
   * the neighbour and this process stayed short of the other's writes until it restarted. Until
   * untilMs, this process greets every neighbour each period (greet): the boot id on the frame
   * resets the neighbour's acks for the id whenever the other spoke last, and it sends full state.
   */
  identityContested(untilMs: number): void {
    this.greetEveryNeighbourUntil(untilMs);
  }

  /** Greet every neighbour each period until untilMs (a leaving node hears from each whether it leaves too). */
  greetEveryNeighbourUntil(untilMs: number): void {
    this.greetAllUntil = Math.max(this.greetAllUntil, untilMs);
  }

  private leaving(): boolean {
    return this.o.leaving?.() ?? false;
  }

  /**
   * A tail push (tick with tail) that did not reach its peer: the next push sends its deltas
   * again. Its full states need nothing: Algorithm 2 plans them again while the peer's ack stays behind.
   */
  pushNotSent(out: Outgoing): void {
    const items = out.frames.flatMap((f) => f.payloads.map((p) => ({ partition: p.partition, seq: Number(p.seq) })));
    this.engine.tailsNotSent(out.to, items);
  }

  /**
   * An empty frame to each neighbour that has not answered this process yet and gets nothing else
   * this period: it carries this boot id, so a neighbour learns of a restart even when this node
   * has nothing to send (its partitions hold no data and restart at seq 0: durable-seq.ts), and
   * gives a wiped node everything back. Sent again each period until answered, and each period
   * to every neighbour while another process contests this node's id (identityContested).
   */
  private greet(out: Outgoing[], now: number): void {
    const greetAll = now < this.greetAllUntil;
    for (const to of this.engine.neighbours()) {
      if ((this.greeted.has(to) && !greetAll) || out.some((o) => o.to === to)) continue;
      out.push({ to, frames: [this.frame([])], states: [], resets: this.engine.resetsOf(to) });
    }
  }

  /** A frame of this node's with these payloads (its boot id and dropped partitions on it). */
  private frame(payloads: GossipFrame["payloads"]): GossipFrame {
    return { cluster: this.o.cluster, from: this.self, frameId: ++this.frameId, payloads, acks: [], partitions: this.o.partitions, boot: this.o.boot, dropped: this.dropped(), leaving: this.leaving(), mac: NO_MAC };
  }

  /** The chunks of a full-state stream of these partitions (state-stream.ts); returns how many it covered. */
  stateStream(
    parts: ReadonlyArray<{ partition: number; seq: number }>,
    askHoldings?: (partition: number, startAfter?: string) => Promise<Holdings | undefined>,
    planHolds?: () => boolean,
  ): AsyncGenerator<StateChunk, number> {
    return stateStream(this.streamSource, parts, askHoldings, planHolds);
  }

  /** Gossip/Contexts: what this node holds of a partition, for a sender about to push it (catch-up.ts). */
  async answerContexts(req: ContextsRequest): Promise<Answer<ContextsReply>> {
    const bad = this.checkPeer(req.cluster, req.from, req.partitions);
    if (bad) return bad;
    if (req.partition >= this.o.partitions) return this.refuse(status.INVALID_ARGUMENT, `partition ${req.partition} out of range`, req.from);
    this.noticeBoot(req.from, req.boot);
    this.counters.contextsAnswered++;
    const busy = this.claims.ask(req.partition, req.from, (this.o.clock ?? Date.now)());
    if (busy) this.counters.contextsAnsweredBusy++;
    const { keys, complete } = busy ? { keys: [], complete: false } : await partitionHoldings(this.o.store, req.partition, this.o.contextsReplyBytes ?? CONTEXTS_REPLY_BYTES, req.startAfter);
    const reply: ContextsReply = { from: this.self, boot: this.o.boot, dropped: this.dropped(), drops: BigInt(this.ownDrops(req.partition)), keys, complete, busy };
    this.counters.contextsReplyBytes += ContextsReplyMsg.encode(reply).finish().length;
    return { reply };
  }

  /** The request to ask a neighbour what it holds of a partition (after a key: the next page). */
  contextsRequest(partition: number, startAfter = ""): ContextsRequest {
    return { cluster: this.o.cluster, from: this.self, partitions: this.o.partitions, boot: this.o.boot, partition, startAfter };
  }

  /**
   * A neighbour's answer to contextsRequest, as what to send it. Undefined (send full state) when
   * the answer is malformed or comes from another node, or tells of a restart this node had not
   * seen: the stream is then planned on acks that no longer hold, and stops (NodeGossip.pushStates).
   */
  holdingsFrom(peer: string, reply: ContextsReply): Holdings | undefined {
    if (reply.from !== peer) return undefined;
    if (this.noticeBoot(peer, reply.boot)) return undefined;
    try {
      return holdingsFrom(reply);
    } catch (err) {
      this.o.log.warn("a neighbour's contexts did not decode; its partition goes as full state", { peer, err });
      return undefined;
    }
  }

  /** This node's drop count for partition p (0 when never dropped since it started). */
  private ownDrops(p: number): number {
    return this.engine.droppedCounts().find((d) => d.partition === p)?.count ?? 0;
  }

  /**
   * Acks from a peer's reply. A new boot id means the peer restarted and may have lost what it
   * acked: its acks go back to 0 (full state next) and the acks of this reply, which promise only
   * what this frame carried, are ignored.
   */
  onReply(from: string, boot: bigint, acks: ReadonlyArray<{ partition: number; seq: bigint }>, dropped: readonly PartitionDrop[] = [], resetsAtSend?: number, leaving?: boolean): void {
    this.greeted.add(from);
    // A GossipReply says whether the peer leaves; a StateReply does not (undefined).
    if (leaving !== undefined) this.o.onPeerHeard?.(from, leaving);
    if (this.noticeBoot(from, boot)) return;
    // Acks answer what was sent: if the peer's acks were reset since (a restart or a drop it told
    // of meanwhile), that send was planned on acks that no longer hold, and its acks prove nothing.
    const stale = resetsAtSend !== undefined && resetsAtSend !== this.engine.resetsOf(from);
    const reset = this.noticeDrops(from, dropped);
    if (stale) return;
    this.takeAcks(from, acks, reset);
  }

  /** A peer's acks, but those of partitions whose acks this very message reset. */
  private takeAcks(from: string, acks: ReadonlyArray<{ partition: number; seq: bigint }>, reset: ReadonlySet<number>): void {
    const taken = acks.filter((a) => !reset.has(a.partition)).map((a) => ({ partition: a.partition, seq: Number(a.seq) }));
    this.engine.onAcks(from, taken);
    if (taken.length > 0) this.o.onAcked?.(taken.map((a) => a.partition));
  }

  /** This node's dropped partitions, as its frames and replies carry them. */
  private dropped(): PartitionDrop[] {
    return this.engine.droppedCounts().map((d) => ({ partition: d.partition, count: BigInt(d.count) }));
  }

  /** A peer's dropped partitions, from its frame or reply; returns those whose count went up. */
  private noticeDrops(peer: string, dropped: readonly PartitionDrop[]): Set<number> {
    const reset = this.engine.noticeDrops(
      peer,
      dropped.filter((d) => d.count <= BigInt(Number.MAX_SAFE_INTEGER)).map((d) => ({ partition: d.partition, count: Number(d.count) })),
    );
    if (reset.size > 0) {
      this.o.log.info("peer dropped partitions it held: it gets their full state when it owns them", { peer, partitions: [...reset] });
      this.o.onAcksReset?.(peer);
    }
    return reset;
  }

  /** A peer's boot id, from its reply or its own frame; true when it restarted (acks reset). */
  private noticeBoot(peer: string, boot: bigint): boolean {
    if (!this.engine.noticeBoot(peer, boot)) return false;
    this.o.log.info("peer restarted: it gets full state", { peer });
    this.o.onAcksReset?.(peer);
    return true;
  }

  // ------------------------------------------------------------ receiving

  private refuse(code: status, details: string, from: string, routine = false): { refused: Refusal } {
    this.counters.framesRejected++;
    // A sender not yet in this node's view is routine while membership spreads (nodes starting a
    // second apart); the sender warns if it lasts (node-gossip.ts reportSendFailure).
    if (routine) this.o.log.info("gossip frame refused", { from, reason: details });
    else this.o.log.warn("gossip frame refused", { from, reason: details });
    return { refused: { code, details } };
  }

  private checkPeer(cluster: string, from: string, partitions: number): { refused: Refusal } | undefined {
    if (cluster !== this.o.cluster) return this.refuse(status.FAILED_PRECONDITION, `cluster "${cluster}" is not "${this.o.cluster}"`, from);
    if (partitions !== this.o.partitions) return this.refuse(status.FAILED_PRECONDITION, `partition count ${partitions} differs from ${this.o.partitions}`, from);
    if (!this.isPeer(from)) return this.refuse(status.PERMISSION_DENIED, `node "${from}" is not a known member`, from, true);
    return undefined;
  }

  /** Join one key's state into the store; returns the part that was new (per the RR contract). */
  private async joinKey(key: string, ks: KeyedState, from: string): Promise<KeyedState | undefined> {
    try {
      const mark = this.storeChanges;
      const r = await this.o.store.merge(key, ks.type, ks.state);
      this.spreadSettled(key, r.settled);
      if (r.refused !== undefined) this.holdRefused(key, ks.type, ks.state, from, mark);
      if (!r.changed) return undefined;
      if (r.readChanged !== false) this.changedHere(key, ks.type);
      return { type: ks.type, state: this.rr ? r.newPart : ks.state };
    } catch (err) {
      if (err instanceof TypeMismatchError || err instanceof JoinConflictError) {
        this.skipConflict(key, err.message);
        return undefined;
      }
      throw err;
    }
  }

  /**
   * A received state the store refused to join (a counter whose join would leave int64): still
   * acknowledged, and held to be joined again once the key changes here (refused-joins.ts). mark:
   * storeChanges before the join; a change since may already have made room, so it is tried at
   * the next period.
   */
  private holdRefused(key: string, type: ObjectType, state: unknown, from: string, mark: number): void {
    if (this.refusedJoins.hold(key, type, state, from, this.storeChanges !== mark)) {
      this.counters.refusedJoinsHeld++;
      return;
    }
    this.counters.refusedJoinsNotHeld++;
    const told = this.skipLog.admit(`refused not held ${key}`);
    if (told !== undefined) {
      this.o.log.warn("a refused join is not held for another try: the refused joins held fill --gossip-refused-joins-bytes; the key converges only once written again", { key, from, held: this.refusedJoins.size, heldBytes: this.refusedJoins.bytes, suppressed: told.suppressed });
    }
  }

  /**
   * The held refused joins whose key changed since their last try, joined again. What joins now
   * enters the buffer as this node's own change (every neighbour gets it: its sender may have
   * dropped it since it was acknowledged). A held state of a partition this node no longer takes
   * from its sender is forgotten; the partition's owners take it from that sender.
   */
  private async retryRefused(): Promise<void> {
    const due = this.refusedJoins.takeDue();
    if (due.length === 0) return;
    await forEachBounded(due, FRAME_KEYS_AT_ONCE, async (h) => {
      const partition = partitionOf(h.key, this.o.partitions);
      if (this.o.accepts !== undefined && !this.o.accepts(partition, h.from)) {
        this.refusedJoins.release(h);
        return;
      }
      // As a received frame: local changes of the partition made meanwhile enter the buffer after this.
      const gate = this.gate.openGate(partition);
      try {
        const r = await this.o.store.merge(h.key, h.type, h.state);
        this.spreadSettled(h.key, r.settled);
        // Still out of range: tried again at the key's next change.
        if (r.refused !== undefined) return;
        this.refusedJoins.release(h);
        if (!r.changed) return;
        this.counters.refusedJoinsJoined++;
        if (r.readChanged !== false) this.changedHere(h.key, h.type);
        this.engine.local(partition, new Map<string, KeyedState>([[h.key, { type: h.type, state: r.newPart }]]));
        this.o.onLocalBuffered?.();
      } catch (err) {
        if (err instanceof TypeMismatchError || err instanceof JoinConflictError) {
          this.refusedJoins.release(h);
          this.skipConflict(h.key, err.message);
          return;
        }
        throw err;
      } finally {
        this.gate.closeGate(gate);
      }
    });
  }

  /** A received key whose type or parameters conflict with this node's: left out, counted. */
  skipConflict(key: string, reason: string): void {
    this.counters.typeConflicts++;
    // It recurs at every exchange of the key: logged once a minute per key, with the count between.
    const told = this.skipLog.admit(`conflict ${key}`);
    if (told !== undefined) this.o.log.warn("key type or parameter conflict between nodes; key skipped", { key, reason, suppressed: told.suppressed });
  }

  /** A received key whose state asks for a filter larger than this node takes: left out, counted. */
  skipOversized(key: string, reason: string, from: string): void {
    this.counters.oversizedStates++;
    const told = this.skipLog.admit(`oversized ${key}`);
    if (told === undefined) return;
    this.o.log.warn("received state of a key larger than this node accepts; key skipped (give every node the same --max-filter-bytes and --max-state-bytes)", { key, from, reason, suppressed: told.suppressed });
  }

  /**
   * A received key whose state does not decode here: left out, counted, and its partition not
   * acknowledged, so the sender keeps what it sent (its deltas, or the partition it would hand
   * off) and sends it again. A node of an older version that does not serve the key's type takes
   * it after its upgrade (a restarted node gets full state); the frame's other keys are applied.
   */
  skipUndecodable(key: string, reason: string, from: string): void {
    this.counters.undecodableStates++;
    const told = this.skipLog.admit(`undecodable ${key}`);
    if (told === undefined) return;
    this.o.log.warn("received state of a key that does not decode on this node; key skipped and its partition not acknowledged (a newer type from a node of a later version, or a state this version refuses)", { key, from, reason, suppressed: told.suppressed });
  }

  /**
   * A frame of deltas: checked whole before anything is joined, and acked once durable. A key that
   * does not decode is left out and its partition's payloads are not acked (skipUndecodable).
   */
  async receiveFrame(f: GossipFrame): Promise<Answer<GossipReply>> {
    const bad = this.checkPeer(f.cluster, f.from, f.partitions);
    if (bad) return bad;
    // Before the payloads: a leaving sender's partitions are taken (and held) as its successor's.
    this.o.onPeerHeard?.(f.from, f.leaving);
    this.noticeBoot(f.from, f.boot);
    const reset = this.noticeDrops(f.from, f.dropped);
    const decoded: Array<{ partition: number; kind: PayloadKind; seq: number; keys: KeyedStates; bytes: number }> = [];
    const unacked = new Set<number>();
    for (const p of f.payloads) {
      if (p.partition >= this.o.partitions || (p.kind !== PayloadKind.DELTA && p.kind !== PayloadKind.STATE) || p.seq > BigInt(Number.MAX_SAFE_INTEGER)) {
        return this.refuse(status.INVALID_ARGUMENT, `payload for partition ${p.partition} is malformed`, f.from);
      }
      for (const k of p.keys) {
        if (partitionOf(k.key, this.o.partitions) !== p.partition) {
          return this.refuse(status.INVALID_ARGUMENT, `key "${k.key}" is not in partition ${p.partition}`, f.from);
        }
      }
      try {
        const keys = keyedFromProto(
          p.keys,
          this.o.store.now(),
          this.decodeBound,
          (key, err) => this.skipOversized(key, err.message, f.from),
          (key, err) => {
            this.skipUndecodable(key, err.message, f.from);
            unacked.add(p.partition);
          },
        );
        decoded.push({ partition: p.partition, kind: p.kind, seq: Number(p.seq), keys, bytes: protoKeysSize(p.keys) });
      } catch (err) {
        return this.refuse(status.INVALID_ARGUMENT, `undecodable payload: ${(err as Error).message}`, f.from);
      }
    }
    const taken = decoded.filter((d) => {
      const ok = this.o.accepts === undefined || this.o.accepts(d.partition, f.from);
      if (!ok) this.counters.notOwnedRefused++;
      return ok;
    });
    // Every key of the frame is joined at once (up to FRAME_KEYS_AT_ONCE): keys are independent
    // (each store write holds its own key's lock), and their writes then share group commits, so
    // a frame of n keys waits for about one fsync instead of n in a row.
    const joins = taken.map((d) => [...d.keys].map(([key, ks]) => ({ key, ks, part: undefined as KeyedState | undefined })));
    // Local changes of these partitions made meanwhile enter the buffer after this frame's new parts.
    const gates = [...new Set(taken.map((d) => d.partition))].map((p) => this.gate.openGate(p));
    let acks: Ack[];
    try {
      await forEachBounded(joins.flat(), FRAME_KEYS_AT_ONCE, async (j) => {
        j.part = await this.joinKey(j.key, j.ks, f.from);
      });
      const items: ReceivedItem<KeyedStates>[] = taken.map((d, i) => {
        // The new parts in the frame's key order, whatever order the joins finished in.
        const fresh = new Map<string, KeyedState>();
        for (const j of joins[i]!) if (j.part !== undefined) fresh.set(j.key, j.part);
        return { partition: d.partition, kind: d.kind as ReceivedItem<KeyedStates>["kind"], seq: d.seq, fresh: fresh.size > 0 ? fresh : undefined, bytes: d.bytes };
      });
      acks = this.engine.onFrame(f.from, items).filter((a) => !unacked.has(a.partition));
    } finally {
      for (const g of gates) this.gate.closeGate(g);
    }
    this.takeAcks(f.from, f.acks, reset);
    return { reply: { from: this.self, acks: acks.map(ackToProto), boot: this.o.boot, dropped: this.dropped(), frameId: f.frameId, leaving: this.leaving(), mac: NO_MAC } };
  }

  /**
   * Deferred removes handed over by a node that no longer owns their keys: all checked (this node
   * owns every key's partition, the contexts decode, no key holds another type) before any is
   * applied, each applied as a Remove with its context would be, and answered once durable.
   * Removes of adds this node already holds take effect now and travel as local deltas; the rest
   * wait here as deferred removes.
   */
  async receiveHandOver(req: HandOverRequest): Promise<Answer<HandOverReply>> {
    const bad = this.checkPeer(req.cluster, req.from, req.partitions);
    if (bad) return bad;
    const removes: Array<{ key: string; element: Uint8Array; unseen: CausalContext }> = [];
    for (const [i, r] of req.removes.entries()) {
      if (r.key === "" || r.element.length === 0) return this.refuse(status.INVALID_ARGUMENT, `removes[${i}]: key and element must not be empty`, req.from);
      const p = partitionOf(r.key, this.o.partitions);
      if (this.o.accepts !== undefined && !this.o.accepts(p, req.from)) {
        return this.refuse(status.FAILED_PRECONDITION, `removes[${i}]: this node does not own partition ${p} of key "${r.key}"`, req.from);
      }
      try {
        removes.push({ key: r.key, element: r.element, unseen: contextFromProto(r.unseen) });
      } catch (err) {
        return this.refuse(status.INVALID_ARGUMENT, `removes[${i}]: ${(err as Error).message}`, req.from);
      }
      const type = await this.o.store.typeOf(r.key);
      if (type !== undefined && type !== ObjectType.AWSET) {
        return this.refuse(status.FAILED_PRECONDITION, `removes[${i}]: key "${r.key}" holds another type than AWSET here`, req.from);
      }
    }
    let pending = 0;
    for (const r of removes) {
      try {
        const out = await this.o.store.remove(r.key, [r.element], r.unseen);
        pending += out.pending;
        if (!out.delta.ctx.isEmpty()) this.local(r.key, ObjectType.AWSET, out.delta);
      } catch (err) {
        if (err instanceof TypeMismatchError) return this.refuse(status.FAILED_PRECONDITION, err.message, req.from);
        throw err;
      }
      this.counters.removesTakenOver++;
    }
    return { reply: { from: this.self, pending } };
  }

  /** A full-state stream (state-receive.ts). */
  receiveStateStream(chunks: AsyncIterable<StateChunk> | Iterable<StateChunk>, sender?: string): Promise<Answer<StateReply>> {
    return receiveStateStream(this.receiveHost, chunks, sender);
  }
}

/**
 * parts from index `start` on, then those before it. Each sender streams a node's catch-up from
 * its own random partition: neighbours catching up the same node (a wiped one) cover different
 * partitions first, and one that reaches a partition another already delivered finds it held
 * (Contexts) and sends none of it, instead of each sending every partition in the same order.
 */
function rotated<T>(parts: T[], start: number): T[] {
  return start <= 0 || start >= parts.length ? parts : [...parts.slice(start), ...parts.slice(0, start)];
}

