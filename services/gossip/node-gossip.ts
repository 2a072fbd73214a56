// Runs the gossip exchange (exchange.ts) inside a node, behind gRPC: a timer drives ticks, delta
// frames travel on one ExchangeStream per neighbour (frame-stream.ts; Exchange calls to a
// neighbour without it) and full states in chunked PushState streams, and the Gossip
// service hands what arrives to the exchange, which checks, joins and acknowledges it. Peers that
// are unknown, of another cluster, or send malformed frames are refused and counted; nothing they
// send is applied. This file holds only what needs the network: clients, calls, streams, timers.
import { randomBytes } from "node:crypto";
import { type OverlayKind, overlayNeighbours } from "./overlay.js";
import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { type CausalContext, type ObjectType, contextToProto } from "../crdt/index.js";
import type { ContextsReply, GossipClient, GossipFrame, GossipReply, GossipServer, HandOverReply, HandOverRequest, StateChunk, StateReply } from "../gen/deltaset/v1/gossip.js";
import type { Store } from "../store/store.js";
import type { Logger } from "../common/logger.js";
import { PeerGossipClient } from "../client/peer-clients.js";
import { addressedTo } from "../client/peer-receiver.js";
import { hostOf } from "../common/host-port.js";
import { logThrottle } from "../common/log-throttle.js";
import { looksLikeTlsFailure } from "../common/tls-failure.js";
import { seededRandom } from "../common/prng.js";
import { type Answer, GossipExchange, type Outgoing, type TransportCounters } from "./exchange.js";
import type { AntiEntropyEngine } from "./engine.js";
import type { KeyedStates } from "./keyed-states.js";
import type { Ownership } from "./ownership.js";
import { HandOff, type HandOffCounters } from "./hand-off.js";
import { FrameStream } from "./frame-stream.js";
import { StallTimer } from "../common/stall-timer.js";
import type { Holdings } from "./catch-up.js";
import { streamRefusalOf } from "../common/stream-refusal.js";
import { STATE_SENDER_HEADER } from "./state-receive.js";
import { CopyWaiters } from "./copy-waiters.js";
import { withTimeout } from "../common/with-timeout.js";
import { partitionOf } from "./partition.js";

export { MAX_BUFFERED_STATE_ELEMENTS, type TransportCounters } from "./exchange.js";

export interface NodeGossipOptions {
  store: Store;
  log: Logger;
  cluster: string;
  partitions: number;
  intervalMs: number;
  algorithm: "alg1" | "alg2";
  /** Algorithm 1's choose (default delta+periodic-state). */
  choose?: "state" | "delta" | "delta+periodic-state";
  /** Algorithm 1: forward received deltas too (default true). */
  transitive?: boolean;
  /** Drop each outgoing send with this probability (tests of the algorithms over lossy links; default 0). */
  lossRate?: number;
  /** Seed of the loss decisions. */
  lossSeed?: number;
  bp: boolean;
  rr: boolean;
  maxBufferBytes: number;
  stateChunkEntries: number;
  /** Largest filter a received state may hold (--max-filter-bytes); a key above it is skipped. Default: no bound. */
  maxFilterBytes?: number;
  /** Largest state stored whole gathered from a peer's pieces (--max-state-bytes); a key above it is skipped. Default: no bound. */
  maxStateBytes?: number;
  /** A full-state stream ends after the partition that brings it to this many payload bytes; the rest follow in the next (default 8 MiB). */
  stateStreamBytes?: number;
  /** A full-state stream that moves nothing for this many ms is cancelled (default 30 s); one that moves runs as long as it needs. */
  stateStreamStallMs?: number;
  rpcTimeoutMs: number;
  /**
   * Ask a neighbour what it holds of a partition before pushing its full state, and push each key
   * only what it lacks (catch-up.ts; default true). Off: every key goes whole.
   */
  catchUpByContexts?: boolean;
  /** Most bytes of a Contexts answer this node gives (ExchangeOptions.contextsReplyBytes). */
  contextsReplyBytes?: number;
  /** ExchangeOptions.contextsClaimMs. */
  contextsClaimMs?: number;
  /** Partitions of a full-state push asked about (Contexts) ahead of the stream (holdings-prefetch.ts); default CONTEXTS_AHEAD. */
  contextsAhead?: number;
  maxMessageBytes: number;
  credentials?: grpc.ChannelCredentials;
  /** Extra options of peer clients (the interceptor signing peer calls with the cluster key). */
  channelOptions?: grpc.ChannelOptions;
  /** Maps a peer's advertised address to the address to dial (per-link fault proxies). */
  dialAddress?: (nodeId: string, address: string) => Promise<string> | string;
  random?: () => number;
  /**
   * A received full state whose new part exceeds this many elements is not held in the delta
   * buffer; the partition is forwarded to the other neighbours by full state instead.
   */
  maxBufferedStateElements?: number;
  /**
   * Algorithm 2: this many ms after a local change, push what is unacknowledged to every
   * neighbour at once instead of waiting for the next period's random neighbour (0: off). Lowers
   * replication lag; costs more, smaller exchanges.
   */
  pushLocalMs?: number;
  /** A push whose call failed goes again after this many ms (or pushLocalMs, if longer), doubling per failure up to the period (default PUSH_RETRY_MS). */
  pushRetryMs?: number;
  /**
   * Settle announcements: a probabilistic set whose reads changed here is sent whole to every
   * neighbour once it had no such change for this many ms (0: off). Replicas that a burst of
   * writes left apart (a partial filter union, a forgotten remove) meet again without a write.
   */
  settleMs?: number;
  /** Keys whose encoded state is larger are not announced. */
  settleMaxBytes?: number;
  /** A key still changing this many ms after its first unannounced change is announced anyway (0: only once quiet). */
  settleMaxWaitMs?: number;
  /** Encoded bytes of settle announcements one period puts in the buffer, at most; the rest wait. */
  settleBytesPerPeriod?: number;
  /** ExchangeOptions.refusedJoinsBytes: refused counter joins held to be joined again once their key changes. */
  refusedJoinsBytes?: number;
  /** Who to gossip with among the live peers (overlay.ts): all of them (default) or the fingers. */
  overlay?: OverlayKind;
  /**
   * Placement: which partitions this node owns. With a replication factor other than "all", each
   * partition is exchanged only with its owners (every live member is a neighbour, the overlay is
   * not used), gossip of partitions not owned here is refused, and a partition held here without
   * being owned is handed off to its owners (hand-off.ts). Default: full replication.
   */
  ownership?: Ownership;
  /**
   * Send frames on one long-lived ExchangeStream per neighbour (default true) instead of an
   * Exchange call each: a quarter of the CPU per frame. A neighbour without the method gets calls.
   */
  exchangeStream?: boolean;
  /** Frames of one incoming ExchangeStream applied at once before it is paused (default STREAM_FRAMES_IN_FLIGHT). */
  streamFramesInFlight?: number;
  /** Runs each send to a peer inside a tracing span (telemetry on). */
  trace?: <T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>) => Promise<T>;
}

/** A neighbour as this node's sends see it (NodeGossip.peers). */
interface PeerLink {
  address: string;
  client?: GossipClient;
  frames?: FrameStream;
  dialed?: string;
  busy: number;
  streaming?: boolean;
  pushWaiting?: boolean;
  pushFailures?: number;
}

/** A peer refusing this node as "not a known member" is warned about once that lasted this long... */
const NOT_MEMBER_WARN_AFTER_MS = 10_000;
/** ...counted from a first refusal no older than this (an earlier episode is forgotten). */
const NOT_MEMBER_RESET_MS = 60_000;

/** Default of NodeGossipOptions.pushRetryMs. */
const PUSH_RETRY_MS = 100;

/**
 * After the last sign of another live process under this node's id, every neighbour is greeted
 * each period for this many periods, and at least this many ms (identityContested): long enough
 * for the membership records of a process that stopped to stop arriving, and for a greeting to
 * reach each neighbour after them.
 */
const CONTEST_GREET_PERIODS = 20;
const CONTEST_GREET_MIN_MS = 10_000;

/** Algorithm 1: exchanges per peer at once (see tick). */
const ALG1_IN_FLIGHT = 8;

export class NodeGossip {
  /**
   * busy: a period's exchanges with the peer still running; streaming: one of them streams full
   * state; frames: the ExchangeStream its frames go on (with the client); pushWaiting: a push to
   * it waited for one of those to end; pushFailures: its push sends that failed in a row.
   */
  private readonly peers = new Map<string, PeerLink>();
  private timer: NodeJS.Timeout | undefined;
  private pushTimer: NodeJS.Timeout | undefined;
  /** A push again after a push send failed (backing off; see pushFailed). */
  private pushRetryTimer: NodeJS.Timeout | undefined;
  /** Every live member (frames are accepted from them); peers holds the overlay's choice. */
  private live = new Set<string>();
  private stopped = false;
  /**
   * While shipping (ship): each neighbour heard from since, with whether it said it is leaving
   * too. Only those heard from, and not leaving, are counted as holding what they acknowledged:
   * a neighbour that stops at the same time would leave with it.
   */
  private shipHeard: Map<string, boolean> | undefined;
  /** Neighbours whose last frame or reply said they are leaving. */
  private readonly peersLeaving = new Set<string>();
  /** Neighbours that do not serve Gossip/Contexts (an older version): they get full state. */
  private readonly noContexts = new Set<string>();
  private ticking = false;
  /** A push asked for while a tick was running: made right after it. */
  private pushAfterTick = false;
  private readonly lossRandom: () => number;
  private readonly refusalLog = logThrottle(60_000);
  private readonly leavingRefusalLog = logThrottle(5_000);
  /** Per peer: since when it has refused this node as not a known member (reportSendFailure). */
  private readonly notMemberSince = new Map<string, number>();
  private readonly handOff: HandOff | undefined;
  /** Per peer: when a gossip frame or reply of it last arrived (Date.now). */
  private readonly lastHeard = new Map<string, number>();
  /** The placement version setPeers last saw. */
  private placementSeen = -1;
  /** How long every neighbour is greeted after the placement changed (hand-off's grace, twice). */
  private greetAfterMoveMs = 0;
  /** Members now suspected (setSuspects). */
  private suspects: ReadonlySet<string> = new Set();
  /** Client writes waiting until enough neighbours acknowledged them (confirmCopies). */
  private readonly copyWaiters: CopyWaiters;

  /** Use create(), which restores the durable sequence numbers. */
  private constructor(
    private readonly o: NodeGossipOptions,
    private readonly x: GossipExchange,
  ) {
    this.lossRandom = seededRandom(o.lossSeed ?? 1);
    this.copyWaiters = new CopyWaiters(
      (p, from, to) => {
        let held = 0;
        for (const j of x.engine.peersOf(p)) if (x.engine.holdsRange(p, j, from, to)) held++;
        return held;
      },
      (ms, fn) => {
        const t = setTimeout(fn, ms);
        return () => clearTimeout(t);
      },
    );
    const own = o.ownership;
    if (own !== undefined && !own.full) {
      const graceMs = Math.max(2000, 5 * o.intervalMs);
      this.greetAfterMoveMs = 2 * graceMs;
      this.handOff = new HandOff({
        heardSince: (peer, sinceMs) => (this.lastHeard.get(peer) ?? Number.NEGATIVE_INFINITY) >= sinceMs,
        store: o.store,
        engine: x.engine as AntiEntropyEngine<unknown>,
        ownership: own,
        log: o.log,
        graceMs,
        // A leaving owner announces its leave within ms of its successors' acks (ship, then
        // membership.leave), and one that dies meanwhile is dead within the suspicion timeout:
        // five graces cover both and delay a drop after a brief view difference by as much.
        successorHoldMs: 5 * graceMs,
        now: Date.now,
        localChangesWaiting: (p) => x.localChangesWaiting(p),
        handOverRemove: (key, element, unseen) => this.handOverRemove(key, element, unseen),
      });
    }
  }

  /**
   * A gossip driver whose Algorithm 2 sequence numbers restart past the durable ones (so every
   * partition ships full state to every neighbour first: durable-seq.ts).
   */
  static async create(o: NodeGossipOptions): Promise<NodeGossip> {
    let self: NodeGossip | undefined;
    const x = await GossipExchange.create(
      {
        store: o.store,
        log: o.log,
        cluster: o.cluster,
        partitions: o.partitions,
        sync:
          o.algorithm === "alg2"
            ? { algorithm: 2, bp: o.bp, rr: o.rr, maxBufferBytes: o.maxBufferBytes }
            : { algorithm: 1, transitive: o.transitive ?? true, choose: o.choose ?? "delta+periodic-state" },
        stateChunkEntries: o.stateChunkEntries,
        stateStreamBytes: o.stateStreamBytes ?? STATE_STREAM_BYTES,
        contextsReplyBytes: o.contextsReplyBytes,
        contextsClaimMs: o.contextsClaimMs,
        contextsAhead: o.contextsAhead,
        maxMessageBytes: o.maxMessageBytes,
        maxFilterBytes: o.maxFilterBytes,
        maxStateBytes: o.maxStateBytes,
        maxBufferedStateElements: o.maxBufferedStateElements,
        boot: randomBytes(8).readBigUInt64BE(0) | 1n,
        random: o.random ?? Math.random,
        leaving: () => self?.shipHeard !== undefined,
        onPeerHeard: (peer, leaving) => self?.peerHeard(peer, leaving),
        // Every local change that enters the buffer is pushed, one that waited behind a received frame too.
        onLocalBuffered: () => self?.schedulePush(),
        onAcked: (partitions) => self?.copyWaiters.acked(partitions),
        // Pushes of waiting writes to that peer went unacknowledged for good: push them again.
        onAcksReset: () => {
          if (self !== undefined && self.copyWaiters.size > 0) void self.tick("push");
        },
        accepts:
          o.ownership === undefined || o.ownership.full
            ? undefined
            : (p, from) => {
                if (o.ownership!.owns(p)) return true;
                if (!o.ownership!.ownsOnceGone(p, from)) {
                  // A leaving member ships to the owners it leaves its partitions to: refused here,
                  // it waits (--leave-timeout-ms). Logged, as the two views disagree on who that is.
                  if (o.ownership!.isLeaving(from)) self?.refusedFromLeaving(p, from);
                  return false;
                }
                // Taken from its owner as its successor: not to be dropped as handed back (hand-off.ts).
                self?.handOff?.takenAsSuccessor(p, from);
                return true;
              },
        onPartitionWhole: o.ownership === undefined || o.ownership.full ? undefined : (p, from, startedMs) => o.ownership!.receivedWhole(p, from, startedMs),
        settleMs: o.settleMs,
        settleMaxBytes: o.settleMaxBytes,
        settleMaxWaitMs: o.settleMaxWaitMs,
        settleBytesPerPeriod: o.settleBytesPerPeriod,
        refusedJoinsBytes: o.refusedJoinsBytes,
      },
      // Frames are taken from any live member, not only this node's overlay neighbours: while
      // membership views differ, a node may be another's neighbour without the reverse.
      (id) => self?.live.has(id) ?? false,
    );
    self = new NodeGossip(o, x);
    return self;
  }

  get engine(): AntiEntropyEngine<KeyedStates> {
    return this.x.engine;
  }

  /**
   * Exchange.oldestUnackedMs: the age of the oldest change a neighbour has not acknowledged;
   * Infinity while a peer of any partition is suspected (setSuspects).
   */
  oldestUnackedMs(): number | undefined {
    return this.x.oldestUnackedMs(this.suspects);
  }

  /** The members now suspected (SWIM SUSPECT): live for placement, but vouching for nothing. */
  setSuspects(ids: ReadonlySet<string>): void {
    this.suspects = ids;
  }

  get counters(): TransportCounters {
    return this.x.counters;
  }

  /** Hand-off counters (placement with a replication factor other than "all"). */
  get handOffCounters(): HandOffCounters | undefined {
    return this.handOff?.counters;
  }

  /** This process's boot id (see GossipReply.boot). */
  get boot(): bigint {
    return this.x.boot;
  }

  /** A durable local change. */
  onLocalDelta(key: string, type: ObjectType, delta: unknown): void {
    // Pushed (pushLocalMs) once it is in the buffer: at once, or after the received payloads of its partition it waits for (onLocalBuffered).
    this.x.local(key, type, delta);
  }

  /**
   * How many other nodes could confirm a copy of a write of key now: the neighbours its partition
   * is gossiped with (its other owners with placement). Undefined under Algorithm 1, which has no
   * acknowledgements.
   */
  copyHolders(key: string): number | undefined {
    if (this.x.engine.algorithm !== 2) return undefined;
    return this.x.engine.peersOf(partitionOf(key, this.o.partitions)).length;
  }

  /** The seq of key's partition now: taken before a write asking for copies (confirmCopies' since). */
  copyMark(key: string): number {
    return this.x.engine.seq(partitionOf(key, this.o.partitions));
  }

  /**
   * A write of key made since copyMark gave `since` was just reported (onLocalDelta, one or more
   * changes): push it to the partition's neighbours now and resolve with how many hold it durably,
   * once need do or after timeoutMs. Its changes took seqs in [since, c) with c read once they are
   * all buffered; a neighbour holds them when its Algorithm 2 ack reached c, or tail pushes it
   * acknowledged carried all of [since, c) above its ack. Other writes' changes in that interval
   * make the wait longer, never the answer early. A write that buffered nothing (a retry found a
   * duplicate, a merge that changed nothing) waits for everything of the partition made here.
   */
  async confirmCopies(key: string, need: number, timeoutMs: number, since: number): Promise<number> {
    const p = partitionOf(key, this.o.partitions);
    const started = Date.now();
    // Behind received payloads of its partition (local-gate.ts), the change has no seq yet; one
    // still held at the deadline is on no other node.
    const buffered = await withTimeout(this.x.localBuffered(p), timeoutMs, "local change buffered").then(
      () => true,
      () => false,
    );
    if (!buffered) return 0;
    const to = this.x.engine.seq(p);
    // Waiting first: the push sends the waiting writes' intervals to neighbours catching up.
    const held = this.copyWaiters.wait(p, to > since ? since : 0, to, need, timeoutMs - (Date.now() - started));
    void this.tick("push");
    return held;
  }

  /** Writes waiting for copies now. */
  get copiesWaiting(): number {
    return this.copyWaiters.size;
  }

  /** With pushLocalMs: one push to every neighbour after the delay (changes within it share it). */
  private schedulePush(): void {
    const push = this.o.pushLocalMs ?? 0;
    if (push <= 0 || this.o.algorithm !== "alg2" || this.pushTimer !== undefined || this.stopped) return;
    this.pushTimer = setTimeout(() => {
      this.pushTimer = undefined;
      void this.tick("push");
    }, push);
  }

  /** Another live process runs under this node's id: greet every neighbour each period for a while (Exchange.identityContested). */
  identityContested(): void {
    this.x.identityContested(Date.now() + Math.max(CONTEST_GREET_MIN_MS, CONTEST_GREET_PERIODS * this.o.intervalMs));
  }

  /** The live peers (node id → advertised address); the overlay picks the neighbours among them. */
  setPeers(live: ReadonlyMap<string, string>): void {
    this.live = new Set(live.keys());
    // A member that left the view and comes back under its id is not leaving until it says so.
    for (const id of this.peersLeaving) if (!this.live.has(id)) this.peersLeaving.delete(id);
    const placed = this.o.ownership !== undefined && !this.o.ownership.full;
    // With placement a partition's peers are its owners, whoever they are: every live member is a neighbour.
    const chosen = new Set(placed ? live.keys() : overlayNeighbours(this.o.overlay ?? "all", this.o.store.nodeId, live.keys()));
    const peers = new Map([...live].filter(([id]) => chosen.has(id)));
    for (const [id, p] of this.peers) {
      if (!peers.has(id) || peers.get(id) !== p.address) {
        p.frames?.close();
        p.client?.close();
        this.peers.delete(id);
      }
    }
    let added = false;
    for (const [id, address] of peers) {
      if (id === this.o.store.nodeId || this.peers.has(id)) continue;
      this.peers.set(id, { address, busy: 0 });
      added = true;
    }
    this.x.engine.setNeighbours(this.peers.keys());
    for (const id of this.lastHeard.keys()) if (!this.peers.has(id)) this.lastHeard.delete(id);
    if (placed) {
      this.x.engine.setPartitionPeers((p) => this.o.ownership!.peersOf(p));
      // The placement moved: every neighbour is greeted for a while, so that each hears what the
      // others dropped (a partition this node dropped and owns again must reach it in full from
      // an owner that thinks it acked), and answers (hand-off counts only owners heard since).
      if (this.o.ownership!.version !== this.placementSeen) {
        this.placementSeen = this.o.ownership!.version;
        this.x.greetEveryNeighbourUntil(Date.now() + this.greetAfterMoveMs);
      }
    }
    // A neighbour that (re)appears missed the pushes made while it was away (a suspicion under
    // load takes it out of the set): with pushes on, it gets them now, not a period later.
    if (added) this.schedulePush();
  }

  peerIds(): string[] {
    return [...this.peers.keys()].sort();
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.o.intervalMs);
    this.timer.unref();
  }

  /**
   * Wait, at most timeoutMs, until every partition holding changes has reached a neighbour
   * (Algorithm 2: one acknowledged it up to its seq, durably), gossiping as usual meanwhile. A
   * node that stops calls it after its last client call ended and before it leaves: otherwise
   * what it acknowledged in its last periods would stay on its disk alone. Algorithm 1 has no
   * acknowledgements: it waits two periods, time for its pushes to go out. Returns the partitions
   * still unshipped (0: all shipped).
   *
   * With placement the node first turns to leaving (Ownership.startLeaving): a partition's
   * neighbours are then the owners it will have once this node is gone, which take it from a
   * leaving sender, so what only this node holds (with R = 1, all it owns) reaches one of them in
   * full, and its deferred removes are handed to them. Without that, a graceful leave at R = 1 left
   * its partitions' acknowledged writes on its disk alone while the new owners answered without them.
   */
  async ship(timeoutMs: number): Promise<{ unshipped: number; waitedMs: number }> {
    const started = Date.now();
    const until = started + timeoutMs;
    if (this.x.engine.algorithm !== 2) {
      await new Promise((r) => setTimeout(r, Math.min(timeoutMs, 2 * this.o.intervalMs)));
      return { unshipped: 0, waitedMs: Date.now() - started };
    }
    const own = this.o.ownership;
    const placed = own !== undefined && !own.full;
    // From now on this node's frames and replies say it leaves; each neighbour is greeted every
    // period, so that its answer says whether it leaves too.
    const heard = new Map<string, boolean>();
    this.shipHeard = heard;
    this.x.greetEveryNeighbourUntil(until);
    if (placed) {
      own.startLeaving();
      this.x.engine.setPartitionPeers((p) => own.peersOf(p));
      this.schedulePush();
    }
    const judge = { isPeer: (id: string) => !this.peersLeaving.has(id), counts: (id: string) => heard.get(id) === false };
    // Deferred removes wait on this node alone: while leaving, every one goes to an owner (hand-off).
    const unshipped = () => this.x.engine.unshipped(judge).length + (placed && this.handOff !== undefined ? this.o.store.keysWithPendingRemoves().length : 0);
    let left = unshipped();
    // Every period at least: a greeting out and its answer back.
    if (left > 0) void this.tick();
    while (left > 0 && Date.now() < until && !this.stopped) {
      // Periods without waiting for the timer (each exchanges with a neighbour not busy): a
      // partition that must go whole to its next owners should not wait a gossip interval per peer.
      void this.tick();
      await new Promise((r) => setTimeout(r, Math.min(25, this.o.intervalMs)));
      left = unshipped();
    }
    return { unshipped: left, waitedMs: Date.now() - started };
  }

  /**
   * A neighbour's frame or reply said whether it is leaving. A node that leaves does not count
   * one that leaves too among those its partitions go to (ship), and takes nothing over from one
   * (Ownership.ownsOnceGone); one that stays keeps what a leaving owner sent it (hand-off.ts).
   */
  private peerHeard(peer: string, leaving: boolean): void {
    this.lastHeard.set(peer, Date.now());
    // It answered, so it knows this node: a later "not a known member" starts a new count.
    this.notMemberSince.delete(peer);
    this.shipHeard?.set(peer, leaving);
    if (leaving) this.peersLeaving.add(peer);
    else this.peersLeaving.delete(peer);
    const own = this.o.ownership;
    if (own === undefined || own.full || !own.peerLeaving(peer, leaving)) return;
    if (own.leaving) this.x.engine.setPartitionPeers((p) => own.peersOf(p));
  }

  /** A leaving member's gossip of partition p was refused: this node is not among the owners it leaves p to, in this node's view. */
  private refusedFromLeaving(p: number, from: string): void {
    const own = this.o.ownership!;
    const admitted = this.leavingRefusalLog.admit(from);
    if (admitted === undefined) return;
    this.o.log.info("refused a partition a leaving member ships: this node would not own it once that member is gone, in its view", {
      from,
      partition: p,
      owners: own.ownersOf(p),
      leavingPeers: [...this.peersLeaving],
      suppressedSinceLast: admitted.suppressed,
    });
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.pushTimer) clearTimeout(this.pushTimer);
    if (this.pushRetryTimer) clearTimeout(this.pushRetryTimer);
    this.copyWaiters.endAll();
    this.o.log.info("gossip totals", { engine: this.x.engine.counters, transport: this.x.counters });
    for (const p of this.peers.values()) {
      p.frames?.close();
      p.client?.close();
    }
  }

  // ------------------------------------------------------------ sending

  private async clientFor(id: string): Promise<GossipClient | undefined> {
    const p = this.peers.get(id);
    if (p === undefined) return undefined;
    if (p.client === undefined) {
      const dial = this.o.dialAddress ? await this.o.dialAddress(id, p.address) : p.address;
      p.dialed = dial;
      p.client = new PeerGossipClient(dial, this.o.credentials ?? grpc.credentials.createInsecure(), {
        "grpc.max_receive_message_length": this.o.maxMessageBytes,
        "grpc.max_send_message_length": this.o.maxMessageBytes,
        "grpc.initial_reconnect_backoff_ms": 200,
        "grpc.max_reconnect_backoff_ms": 2000,
        ...this.o.channelOptions,
        // Every call names this peer as its receiver, in its proof (client/peer-receiver.ts).
        interceptors: [addressedTo(id), ...((this.o.channelOptions?.interceptors as grpc.Interceptor[] | undefined) ?? [])],
        // Through a proxy, the peer's certificate still names its advertised host.
        ...(this.o.credentials !== undefined && dial !== p.address
          ? { "grpc.ssl_target_name_override": hostOf(p.address) }
          : {}),
      });
    }
    return p.client;
  }

  /**
   * One period, or (push) a push of fresh local changes: the exchange persists moved sequence
   * numbers and says what to send; send it.
   *
   * Under Algorithm 2 a period leaves out a peer whose previous period exchange still runs (like a
   * lost message: nothing is acked, so nothing is lost, and a later period sends it), and picks its
   * random neighbour among the others. Under Algorithm 1 nothing is sent again: a skipped
   * delta-group would be lost until the next full state, and with link latency (a round trip
   * longer than the period) every period would find the peer busy, full states included. So Algorithm 1 runs up to ALG1_IN_FLIGHT exchanges per
   * peer at once, as a link without flow control would carry them. A push is a tail push
   * (algorithm2.ts): each neighbour gets only what was never sent to it, so pushes run beside the
   * period's exchange and beside each other. Waiting for the exchange in flight would make a
   * push a round trip late whenever links have latency (an exchange is then nearly always
   * running). A push that did not go out or whose call failed is pushed again soon (pushWaits,
   * pushFailed); one lost unseen is repaired by the periods, which send everything unacknowledged.
   */
  async tick(push?: "push"): Promise<void> {
    if (this.stopped) return;
    if (this.ticking) {
      if (push !== undefined) this.pushAfterTick = true;
      return;
    }
    this.ticking = true;
    try {
      if (push === undefined) await this.x.announceSettled(Date.now());
      // A period leaves out the peers whose previous period exchange still runs: nothing is built
      // for them (a frame of everything they have not acked can be megabytes), and Algorithm 2
      // picks its random neighbour among the others.
      const inFlight = this.o.algorithm === "alg1" ? ALG1_IN_FLIGHT : 1;
      const skip =
        push === undefined
          ? (id: string) => {
              const busy = (this.peers.get(id)?.busy ?? 0) >= inFlight;
              if (busy) this.x.counters.busySkips++;
              return busy;
            }
          : undefined;
      const opts = push !== undefined ? { tail: true, ranges: this.copyWaiters.intervals() } : { skip };
      for (let out of await this.x.tick(Date.now(), opts)) {
        const peer = this.peers.get(out.to);
        if (peer === undefined) continue;
        // A push that ships full state (the peer needs it) counts as a period's exchange: never two.
        const period = push === undefined || out.states.length > 0;
        // A push that ships full state to a busy peer waits for it (the skip above covers periods).
        if (period && peer.busy >= inFlight) {
          this.x.counters.framesNotSent++;
          if (push === undefined) this.x.engine.statesNotSent(out.states.map((st) => st.partition));
          else this.pushWaits(peer, out);
          continue;
        }
        // One full-state stream per peer at a time: beside a running one, Algorithm 1's period
        // sends its delta-groups and drops its states (the next full state comes a few periods
        // later); doubling streams over a slow link only makes every one of them slower.
        if (out.states.length > 0 && peer.streaming) {
          this.x.engine.statesNotSent(out.states.map((st) => st.partition));
          if (push !== undefined) peer.pushWaiting = true; // what the stream does not bring goes when it ends
          if (out.frames.length === 0) {
            this.x.counters.framesNotSent++;
            continue;
          }
          this.x.counters.statesDeferred++;
          out = { ...out, states: [] };
        }
        if ((this.o.lossRate ?? 0) > 0 && this.lossRandom() < this.o.lossRate!) {
          this.x.counters.sendsDropped++; // a lost message: the engine resends what is not acked
          continue;
        }
        // A period holds its slot until its frames are answered; a full-state stream runs on
        // beside later periods (only another stream waits for it).
        const streams = out.states.length > 0;
        if (period) peer.busy++;
        if (streams) peer.streaming = true;
        // The send starts inside the tracing span (the runner calls it at once), so its calls are children of it.
        let parts!: ReturnType<NodeGossip["send"]>;
        const sendOut = (o: Outgoing) => () => {
          parts = this.send(o, push !== undefined);
          return Promise.all([parts.frames, parts.states]).then(() => undefined);
        };
        const attributes = { "deltaset.peer": out.to, "deltaset.frames": out.frames.length, "deltaset.states": out.states.length };
        void (this.o.trace ? this.o.trace("gossip.send", attributes, sendOut(out)) : sendOut(out)());
        if (period)
          void parts.frames.finally(() => {
            peer.busy--;
            this.resumePush(peer);
          });
        if (streams)
          void parts.states.finally(() => {
            peer.streaming = false;
            this.resumePush(peer);
          });
      }
    } catch (err) {
      this.o.log.error("gossip tick failed", { err });
    } finally {
      this.ticking = false;
      if (this.pushAfterTick) {
        this.pushAfterTick = false;
        this.schedulePush();
      }
    }
    if (push === undefined && this.handOff !== undefined && !this.stopped) {
      void this.handOff.run();
      // A drop waits only to hear from an owner since the placement changed: ask every neighbour.
      if (this.handOff.waitingToHear) this.x.greetEveryNeighbourUntil(Date.now() + 2 * this.o.intervalMs);
    }
  }

  /**
   * A push the peer could not take now (a period's exchange with it still runs): nothing of it is
   * counted as sent, and it goes again when that exchange ends, not a whole period later.
   */
  private pushWaits(peer: PeerLink, out: Outgoing): void {
    this.x.pushNotSent(out);
    peer.pushWaiting = true;
  }

  private resumePush(peer: PeerLink): void {
    if (peer.pushWaiting !== true) return;
    peer.pushWaiting = false;
    this.pushAgain();
  }

  /** A push that did not go out goes again: at once for writes waiting for copies (also with pushes of local changes off), else after the push delay. */
  private pushAgain(): void {
    if (this.copyWaiters.size > 0) void this.tick("push");
    else this.schedulePush();
  }

  /**
   * A push send failed (the peer is down, or the call broke): nothing of it is counted as sent,
   * and a push goes again after a delay that doubles with each failure in a row, up to the period,
   * so a peer that is down costs one attempt per period and one that blinked is caught up at once.
   */
  private pushFailed(out: Outgoing): void {
    const peer = this.peers.get(out.to);
    this.x.pushNotSent(out);
    if (peer === undefined || this.stopped || this.pushRetryTimer !== undefined) return;
    const failures = (peer.pushFailures = (peer.pushFailures ?? 0) + 1);
    const first = Math.max(this.o.pushRetryMs ?? PUSH_RETRY_MS, this.o.pushLocalMs ?? 0, 1);
    const delay = Math.min(this.o.intervalMs, first * 2 ** Math.min(failures - 1, 20));
    this.pushRetryTimer = setTimeout(() => {
      this.pushRetryTimer = undefined;
      this.pushAgain();
    }, delay);
  }

  /** Send what a tick said: its frames (settled when they are answered) and its full-state stream (when that ends). */
  private send(out: Outgoing, push = false): { frames: Promise<void>; states: Promise<void> } {
    const client = this.clientFor(out.to);
    const resets = out.resets; // the peer's reset count when these sends were planned (Exchange.onReply)
    // One failed send counts once, whether its frames, its stream or both failed.
    let failed = false;
    const guarded = (work: (c: GossipClient) => Promise<void>) =>
      client.then(async (c) => {
        if (c === undefined) return;
        try {
          await work(c);
        } catch (err) {
          if (!failed) {
            this.x.counters.rpcErrors++;
            if (push) this.pushFailed(out);
          }
          failed = true;
          this.reportSendFailure(out.to, err);
        }
      });
    const frames = out.frames.length === 0 ? Promise.resolve() : guarded(async (c) => {
      for (const frame of out.frames) {
        const reply = await this.exchange(out.to, c, frame);
        this.x.onReply(out.to, reply.boot, reply.acks, reply.dropped, resets, reply.leaving);
      }
      const link = this.peers.get(out.to);
      if (push && link !== undefined) link.pushFailures = 0;
    });
    const states = out.states.length === 0 ? Promise.resolve() : guarded((c) => this.pushStates(out.to, c, out.states, resets));
    return { frames, states };
  }

  /**
   * A send that failed. A peer refusing this node (a certificate one side does not accept, a TLS
   * handshake that fails, a permission) is a configuration problem that resending never fixes:
   * warn, at most once per peer and cause per minute; anything else (the peer is down) is routine.
   */
  private reportSendFailure(to: string, err: unknown): void {
    const e = err as { code?: number; details?: string; message?: string };
    const text = `${e.details ?? ""} ${e.message ?? ""}`;
    // UNAUTHENTICATED is already warned about by the peer-call interceptor (node/peer-interceptors.ts).
    const refused = e.code === grpc.status.PERMISSION_DENIED || (e.code !== grpc.status.UNAUTHENTICATED && looksLikeTlsFailure(text));
    if (!refused) {
      this.o.log.debug("gossip send failed", { to, err });
      return;
    }
    // "Not a known member" while the peer's view has not yet taken this node in is routine for a
    // few seconds after either starts; only a refusal that lasts is warned about.
    if (/is not a known member/.test(text)) {
      // A node that leaves is taken out of its peers' views as it goes: expected, not a fault.
      if (this.shipHeard !== undefined) {
        this.o.log.debug("a peer no longer knows this node, which is leaving", { to });
        return;
      }
      const now = Date.now();
      const first = this.notMemberSince.get(to);
      const since = first === undefined || now - first > NOT_MEMBER_RESET_MS ? now : first;
      this.notMemberSince.set(to, since);
      if (now - since < NOT_MEMBER_WARN_AFTER_MS) {
        this.o.log.debug("a peer does not know this node yet", { to });
        return;
      }
    }
    const admitted = this.refusalLog.admit(`${to} ${e.code}`);
    if (admitted !== undefined) {
      this.o.log.warn("a peer refuses this node's gossip", { to, code: e.code, reason: (e.details ?? e.message ?? "").slice(0, 300), suppressedSinceLast: admitted.suppressed });
    }
  }

  /** One frame to a peer: on its ExchangeStream, or by an Exchange call when it has none. */
  private exchange(to: string, client: GossipClient, frame: GossipFrame): Promise<GossipReply> {
    const peer = this.peers.get(to);
    if ((this.o.exchangeStream ?? true) && peer !== undefined && peer.client === client) {
      const frames = (peer.frames ??= new FrameStream(() => client.exchangeStream(new grpc.Metadata()), this.o.rpcTimeoutMs));
      if (!frames.unsupported) {
        const opened = frames.opened;
        const reply = frames.send(frame);
        if (frames.opened > opened) this.x.counters.exchangeStreamsOpened++;
        return reply.catch((err: unknown) => {
          // A neighbour of an older version: this frame and later ones go by Exchange calls.
          if (!frames.unsupported) throw err;
          if (!frames.fallbackReported) {
            frames.fallbackReported = true;
            this.x.counters.exchangeStreamFallbacks++;
            this.o.log.info("a neighbour does not serve ExchangeStream; using Exchange calls", { to });
          }
          return this.exchangeCall(client, frame);
        });
      }
    }
    return this.exchangeCall(client, frame);
  }

  private exchangeCall(client: GossipClient, frame: GossipFrame): Promise<GossipReply> {
    return new Promise((resolve, reject) =>
      client.exchange(frame, new grpc.Metadata(), { deadline: Date.now() + this.o.rpcTimeoutMs }, (err, res) => (err ? reject(err) : resolve(res))),
    );
  }

  /**
   * Give a deferred remove of a key this node no longer owns to one of the key's owners, by the
   * peer-authenticated HandOver call (the remove's client is long gone, and its token with it);
   * resolves once an owner holds it durably, rejects when none took it (hand-off retries later).
   */
  private async handOverRemove(key: string, element: Buffer, unseen: CausalContext): Promise<void> {
    const own = this.o.ownership!;
    const request: HandOverRequest = {
      cluster: this.o.cluster,
      from: this.o.store.nodeId,
      partitions: this.o.partitions,
      removes: [{ key, element, unseen: contextToProto(unseen) }],
    };
    let last: unknown = new Error(`no live owner of "${key}" to hand a deferred remove to`);
    for (const owner of own.peersOf(own.partitionOf(key))) {
      const client = await this.clientFor(owner);
      if (client === undefined) continue;
      try {
        await new Promise<HandOverReply>((resolve, reject) =>
          client.handOver(request, new grpc.Metadata(), { deadline: Date.now() + this.o.rpcTimeoutMs }, (err, res) => (err ? reject(err) : resolve(res))),
        );
        return;
      } catch (err) {
        last = err;
        this.reportSendFailure(owner, err);
      }
    }
    throw last;
  }

  /**
   * Stream the full state of partitions (the exchange reads the chunks from the store as they are
   * written), in streams of about stateStreamBytes each, one after the other: each stream's
   * acknowledgements are taken before the next starts, so a catch-up of any size makes progress
   * that a broken stream does not undo.
   */
  private async pushStates(to: string, client: GossipClient, parts: Outgoing["states"], resets: number): Promise<void> {
    let rest = parts;
    while (rest.length > 0) {
      const covered = await this.pushStateStream(to, client, rest, resets);
      rest = rest.slice(covered);
      // The peer restarted or dropped partitions meanwhile: the next period plans on its new acks
      // (Algorithm 1, which has none, owes the partitions left out their state next period).
      if (this.stopped || this.x.engine.resetsOf(to) !== resets) {
        this.x.engine.statesNotSent(rest.map((st) => st.partition));
        return;
      }
    }
  }

  /**
   * One full-state stream: the first partitions of parts, up to the exchange's byte budget.
   * Returns how many it covered. No deadline bounds the whole stream (a large partition over a
   * slow link may take minutes); a stall does: no chunk taken by the peer, or no answer after the
   * last, for stateStreamStallMs.
   */
  private async pushStateStream(to: string, client: GossipClient, parts: Outgoing["states"], resets: number): Promise<number> {
    let settle!: (err: grpc.ServiceError | null, res?: StateReply) => void;
    const done = new Promise<StateReply>((resolve, reject) => {
      settle = (err, res) => (err ? reject(err) : resolve(res!));
    });
    done.catch(() => {}); // observed below; a failure while still writing must not go unhandled
    const md = new grpc.Metadata();
    md.set(STATE_SENDER_HEADER, this.o.store.nodeId);
    const call = client.pushState(md, (err, res) => settle(err, res));
    const stallMs = this.o.stateStreamStallMs ?? STATE_STREAM_STALL_MS;
    let stalled = false;
    const stall = new StallTimer(stallMs, () => {
      stalled = true;
      this.x.counters.stateStreamsStalled++;
      call.cancel();
    });
    const chunks = this.x.stateStream(
      parts,
      this.o.catchUpByContexts === false ? undefined : (p, after) => this.holdingsOf(to, client, p, after),
      () => !this.stopped && this.x.engine.resetsOf(to) === resets,
    );
    try {
      let next = await chunks.next();
      for (; !next.done; next = await chunks.next()) {
        // A stream the peer or the network broke never drains: the call's end (done) settles instead.
        if (!call.write(next.value)) await Promise.race([once(call, "drain"), done]);
        stall.moved();
      }
      call.end();
      const res = await done;
      this.x.onReply(to, res.boot, res.acks, res.dropped, resets);
      return next.value;
    } catch (err) {
      call.cancel();
      // Close the store reads the stream was pulling (a for await loop would have).
      await chunks.return(0).catch(() => {});
      if (stalled) throw new Error(`state stream to ${to} moved nothing for ${stallMs} ms: cancelled (--gossip-state-stream-stall-ms)`);
      throw err;
    } finally {
      stall.stop();
    }
  }

  /**
   * What a neighbour holds of a partition (Gossip/Contexts), for a catch-up by contexts; undefined
   * when it cannot say (full state then): an older node without the method, or a call that failed
   * otherwise than for want of a connection. Without a connection (UNAVAILABLE) it throws: the
   * push fails as its stream would, and the next period asks again, instead of pushing full state
   * to a neighbour that may hold it all.
   */
  private async holdingsOf(to: string, client: GossipClient, partition: number, startAfter?: string): Promise<Holdings | undefined> {
    if (this.noContexts.has(to)) return undefined;
    try {
      const reply = await new Promise<ContextsReply>((resolve, reject) =>
        client.contexts(this.x.contextsRequest(partition, startAfter), new grpc.Metadata(), { deadline: Date.now() + this.o.rpcTimeoutMs }, (err, res) => (err ? reject(err) : resolve(res))),
      );
      return this.x.holdingsFrom(to, reply);
    } catch (err) {
      const code = (err as grpc.ServiceError).code;
      this.x.counters.catchUpContextsFailed++;
      if (code === grpc.status.UNAVAILABLE) throw err;
      if (code === grpc.status.UNIMPLEMENTED) this.noContexts.add(to);
      this.o.log.debug("a neighbour did not say what it holds; its partition goes as full state", { peer: to, partition, err });
      return undefined;
    }
  }

  // ------------------------------------------------------------ receiving

  service(): GossipServer {
    return {
      exchange: (call, callback) => {
        this.x.receiveFrame(call.request).then(
          (a) => answer(a, callback),
          (err: unknown) => {
            this.o.log.error("applying a gossip frame failed", { from: call.request.from, err });
            callback({ code: grpc.status.UNAVAILABLE, details: "could not apply the frame; retry later", metadata: new grpc.Metadata() });
          },
        );
      },
      // A stream's call span lasts as long as the stream: each frame gets a span of its own.
      exchangeStream: (call) =>
        serveFrameStream(
          call,
          (frame) =>
            this.o.trace
              ? this.o.trace("gossip.receive", { "deltaset.peer": frame.from, "deltaset.frame": Number(frame.frameId), "deltaset.payloads": frame.payloads.length }, () => this.x.receiveFrame(frame))
              : this.x.receiveFrame(frame),
          this.o.log,
          this.o.streamFramesInFlight,
        ),
      handOver: (call, callback) => {
        this.x.receiveHandOver(call.request).then(
          // Removes taken over that applied here are pushed as they enter the buffer (onLocalBuffered).
          (a) => answer(a, callback),
          (err: unknown) => {
            this.o.log.error("taking over deferred removes failed", { from: call.request.from, err });
            callback({ code: grpc.status.UNAVAILABLE, details: "could not take the removes; retry later", metadata: new grpc.Metadata() });
          },
        );
      },
      contexts: (call, callback) => {
        this.x.answerContexts(call.request).then(
          (a) => answer(a, callback),
          (err: unknown) => {
            this.o.log.error("answering a contexts request failed", { from: call.request.from, err });
            callback({ code: grpc.status.UNAVAILABLE, details: "could not read the partition's contexts; retry later", metadata: new grpc.Metadata() });
          },
        );
      },
      pushState: (call, callback) => {
        const sender = call.metadata.get(STATE_SENDER_HEADER)[0];
        this.x.receiveStateStream(call as AsyncIterable<StateChunk>, typeof sender === "string" ? sender : undefined).then(
          (a) => answer(a, callback),
          (err: unknown) => {
            this.o.log.warn("state stream failed", { err });
            callback({ code: grpc.status.UNAVAILABLE, details: "state stream failed; it will be retried", metadata: new grpc.Metadata() });
          },
        );
      },
    };
  }
}

/** Default of frames of one ExchangeStream applied at once; past it the stream is paused (HTTP/2 flow control holds the sender). */
export const STREAM_FRAMES_IN_FLIGHT = 32;
/** Default of NodeGossipOptions.stateStreamBytes. */
export const STATE_STREAM_BYTES = 8 * 1024 * 1024;
/** Default of NodeGossipOptions.stateStreamStallMs. */
export const STATE_STREAM_STALL_MS = 30_000;

/**
 * Serve one ExchangeStream: each frame is applied as an Exchange call's would be (several at once,
 * as concurrent calls are) and answered in the order the frames came. The first refusal (or a
 * failure to apply) ends the stream with its status; the frames behind it are not answered, and
 * their sender resends what they carried.
 */
export function serveFrameStream(
  call: grpc.ServerDuplexStream<GossipFrame, GossipReply>,
  receive: (frame: GossipFrame) => Promise<Answer<GossipReply>>,
  log: Logger,
  maxInFlight = STREAM_FRAMES_IN_FLIGHT,
): void {
  let answered: Promise<void> = Promise.resolve();
  let inFlight = 0;
  let ended = false;
  const finish = (status?: grpc.StatusObject) => {
    if (ended) return;
    ended = true;
    if (status === undefined) call.end();
    else call.emit("error", status);
  };
  call.on("data", (frame: GossipFrame) => {
    if (ended) return;
    if (++inFlight >= maxInFlight) call.pause();
    // A frame an interceptor refused (it did not decode, its MAC or sender is wrong) is not applied:
    // the stream ends with that refusal once the answers before it are written.
    const refusal = streamRefusalOf(frame);
    const applied: Promise<Answer<GossipReply>> =
      refusal !== undefined
        ? Promise.resolve({ refused: refusal })
        : receive(frame).catch((err: unknown): Answer<GossipReply> => {
            log.error("applying a gossip frame failed", { from: frame.from, err });
            return { refused: { code: grpc.status.UNAVAILABLE, details: "could not apply the frame; retry later" } };
          });
    answered = answered.then(async () => {
      const a = await applied;
      if (inFlight-- === maxInFlight) call.resume();
      if (ended) return;
      if ("refused" in a) return finish({ code: a.refused.code, details: a.refused.details, metadata: new grpc.Metadata() });
      call.write({ ...a.reply, frameId: frame.frameId });
    });
  });
  // The sender closed its side: answer what is still being applied, then end.
  call.on("end", () => void answered.then(() => finish()));
  // The sender went away (cancelled, connection lost): nothing more is written.
  call.on("error", () => {
    ended = true;
  });
  call.on("cancelled", () => {
    ended = true;
  });
}

/** Answer a call with the exchange's reply, or with its refusal as a gRPC status. */
function answer<T>(a: Answer<T>, callback: grpc.sendUnaryData<T>): void {
  if ("refused" in a) callback({ code: a.refused.code, details: a.refused.details, metadata: new grpc.Metadata() });
  else callback(null, a.reply);
}
