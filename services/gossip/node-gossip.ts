// Runs the anti-entropy engine inside a node: a timer drives tick(), deltas travel in Exchange
// frames, full states in chunked PushState streams straight out of the store, and received
// payloads are joined into the store before they are acknowledged. Peers that are unknown, of
// another cluster, or send malformed frames are refused and counted; nothing they send is applied.
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import {
  type AWSet,
  type CausalContext,
  ObjectType,
  type PNCounter,
  contextFromProto,
  contextToProto,
  decodeAWSetSlice,
  elementKey,
  latticeFor,
} from "../crdt/index.js";
import {
  GossipClient,
  type GossipFrame,
  type GossipReply,
  type GossipServer,
  PayloadKind,
  type StateChunk,
  type StateReply,
} from "../gen/deltaset/v1/gossip.js";
import type { Store } from "../store/store.js";
import { TypeMismatchError } from "../store/store.js";
import type { Logger } from "../common/logger.js";
import { persistMovedSeqs, restartSeqs } from "./durable-seq.js";
import { PeerGossipClient } from "../client/peer-clients.js";
import { hostOf } from "../common/host-port.js";
import { logThrottle } from "../common/log-throttle.js";
import { looksLikeTlsFailure } from "../common/tls-failure.js";
import { seededRandom } from "../common/prng.js";
import { type Ack, AntiEntropyEngine, type ReceivedItem } from "./engine.js";
import { type KeyedState, type KeyedStates, keyedFromProto, keyedStatesOps, keyedToProto } from "./keyed-states.js";
import { ChunkOrderError, KeyChunkSequence } from "./chunking.js";
import { partitionOf } from "./partition.js";

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
  rpcTimeoutMs: number;
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
  /** Runs each send to a peer inside a tracing span (telemetry on). */
  trace?: <T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>) => Promise<T>;
}

/** Counters of the transport (the engine keeps its own). */
export interface TransportCounters {
  framesRejected: number;
  chunksApplied: number;
  chunksRejected: number;
  rpcErrors: number;
  typeConflicts: number;
  busySkips: number;
  /** Sends dropped on purpose (lossRate). */
  sendsDropped: number;
  stateStreamsSent: number;
  stateStreamsReceived: number;
  /** Received full states whose new part was too big to buffer (forwarded by full state). */
  freshPartsNotBuffered: number;
}

/** Default of NodeGossipOptions.maxBufferedStateElements. */
export const MAX_BUFFERED_STATE_ELEMENTS = 10_000;

export class NodeGossip {
  readonly engine: AntiEntropyEngine<KeyedStates>;
  readonly counters: TransportCounters = {
    framesRejected: 0,
    chunksApplied: 0,
    chunksRejected: 0,
    rpcErrors: 0,
    typeConflicts: 0,
    busySkips: 0,
    sendsDropped: 0,
    stateStreamsSent: 0,
    stateStreamsReceived: 0,
    freshPartsNotBuffered: 0,
  };
  private readonly peers = new Map<string, { address: string; client?: GossipClient; dialed?: string; busy: boolean }>();
  private timer: NodeJS.Timeout | undefined;
  private frameId = 0;
  private stopped = false;
  private ticking = false;
  /** This process's boot id (see GossipReply.boot). */
  readonly boot = randomBytes(8).readBigUInt64BE(0) | 1n;
  private readonly lossRandom: () => number;
  private readonly refusalLog = logThrottle(60_000);

  /** Use create(), which restores the durable sequence numbers. */
  private constructor(
    private readonly o: NodeGossipOptions,
    initialSeqs: number[],
  ) {
    this.lossRandom = seededRandom(o.lossSeed ?? 1);
    this.engine = new AntiEntropyEngine<KeyedStates>({
      self: o.store.nodeId,
      ops: keyedStatesOps,
      random: o.random ?? Math.random,
      partitions: o.partitions,
      sync:
        o.algorithm === "alg2"
          ? { algorithm: 2, bp: o.bp, rr: o.rr, maxBufferBytes: o.maxBufferBytes, initialSeqs }
          : { algorithm: 1, transitive: o.transitive ?? true, choose: o.choose ?? "delta+periodic-state" },
    });
  }

  /**
   * A gossip driver whose Algorithm 2 sequence numbers restart past the durable ones (so every
   * partition ships full state to every neighbour first: durable-seq.ts).
   */
  static async create(o: NodeGossipOptions): Promise<NodeGossip> {
    const seqs = await restartSeqs(await o.store.loadSeqs(), o.partitions, o.store);
    return new NodeGossip(o, seqs);
  }

  // ------------------------------------------------------------ wiring

  /** A durable local change. */
  onLocalDelta(key: string, type: ObjectType, delta: unknown): void {
    const p = partitionOf(key, this.o.partitions);
    this.engine.local(p, new Map<string, KeyedState>([[key, { type, state: delta }]]));
  }

  /**
   * A remove this node made while joining (deferred removes whose adds just arrived): a local
   * delta, so it reaches every neighbour, the one that sent the add included (BP holds back only
   * what came from a neighbour).
   */
  private spreadSettled(key: string, settled: AWSet | undefined): void {
    if (settled !== undefined) this.onLocalDelta(key, ObjectType.AWSET, settled);
  }

  /** The live peers (node id → advertised address); the engine's neighbour set follows. */
  setPeers(peers: ReadonlyMap<string, string>): void {
    for (const [id, p] of this.peers) {
      if (!peers.has(id) || peers.get(id) !== p.address) {
        p.client?.close();
        this.peers.delete(id);
      }
    }
    for (const [id, address] of peers) {
      if (id === this.o.store.nodeId || this.peers.has(id)) continue;
      this.peers.set(id, { address, busy: false });
    }
    this.engine.setNeighbours(this.peers.keys());
  }

  peerIds(): string[] {
    return [...this.peers.keys()].sort();
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.o.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.o.log.info("gossip totals", { engine: this.engine.counters, transport: this.counters });
    for (const p of this.peers.values()) p.client?.close();
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
        // Through a proxy, the peer's certificate still names its advertised host.
        ...(this.o.credentials !== undefined && dial !== p.address
          ? { "grpc.ssl_target_name_override": hostOf(p.address) }
          : {}),
      });
    }
    return p.client;
  }

  /** One period: persist moved sequence numbers, then send what the engine asks for. */
  async tick(): Promise<void> {
    if (this.stopped || this.ticking) return;
    this.ticking = true;
    try {
      await persistMovedSeqs(this.engine, this.o.store);
      const frames = this.engine.tick(Date.now());
      for (const f of frames) {
        const peer = this.peers.get(f.to);
        if (peer === undefined) continue;
        if (peer.busy) {
          this.counters.busySkips++; // like a lost message: nothing is acked, so nothing is lost
          continue;
        }
        if ((this.o.lossRate ?? 0) > 0 && this.lossRandom() < this.o.lossRate!) {
          this.counters.sendsDropped++; // a lost message: the engine resends what is not acked
          continue;
        }
        peer.busy = true;
        const send = () => this.send(f.to, f.items);
        const sending = this.o.trace ? this.o.trace("gossip.send", { "deltaset.peer": f.to, "deltaset.partitions": f.items.length }, send) : send();
        void sending.finally(() => (peer.busy = false));
      }
    } catch (err) {
      this.o.log.error("gossip tick failed", { err });
    } finally {
      this.ticking = false;
    }
  }

  private async send(to: string, items: ReturnType<AntiEntropyEngine<KeyedStates>["tick"]>[number]["items"]): Promise<void> {
    const client = await this.clientFor(to);
    if (client === undefined) return;
    const deltas: Array<{ payload: GossipFrame["payloads"][number]; size: number }> = [];
    const states: Array<{ partition: number; seq: number }> = [];
    for (const item of items) {
      if (item.kind === PayloadKind.STATE || item.payload === undefined) {
        states.push({ partition: item.partition, seq: item.seq });
        continue;
      }
      const keys = keyedToProto(item.payload);
      const size = keys.reduce((n, k) => n + k.key.length + (k.state?.payload.length ?? 0) + 16, 0);
      if (size > this.o.maxMessageBytes / 2) {
        // Too big for one message: the partition's full state (which includes it) streams instead.
        states.push({ partition: item.partition, seq: item.seq });
        continue;
      }
      deltas.push({ payload: { partition: item.partition, kind: PayloadKind.DELTA, seq: BigInt(item.seq), keys }, size });
    }
    try {
      // Deltas go in frames under the message size limit; a full state streams.
      let batch: GossipFrame["payloads"] = [];
      let batchBytes = 0;
      const flush = async () => {
        if (batch.length === 0) return;
        const reply = await this.exchange(client, {
          cluster: this.o.cluster,
          from: this.o.store.nodeId,
          frameId: BigInt(++this.frameId),
          payloads: batch,
          acks: [],
          partitions: this.o.partitions,
          boot: this.boot,
        });
        this.onReply(to, reply.boot, reply.acks);
        batch = [];
        batchBytes = 0;
      };
      for (const { payload, size } of deltas) {
        if (batchBytes + size > this.o.maxMessageBytes / 2) await flush();
        batch.push(payload);
        batchBytes += size;
      }
      await flush();
      if (states.length > 0) await this.pushStates(to, client, states);
    } catch (err) {
      this.counters.rpcErrors++;
      this.reportSendFailure(to, err);
    }
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
    const admitted = this.refusalLog.admit(`${to} ${e.code}`);
    if (admitted !== undefined) {
      this.o.log.warn("a peer refuses this node's gossip", { to, code: e.code, reason: (e.details ?? e.message ?? "").slice(0, 300), suppressedSinceLast: admitted.suppressed });
    }
  }

  /**
   * Acks from a peer. A new boot id means the peer restarted and may have lost what it acked:
   * its acks go back to 0 (full state next) and the acks of this reply, which promise only what
   * this frame carried, are ignored.
   */
  private onReply(from: string, boot: bigint, acks: ReadonlyArray<{ partition: number; seq: bigint }>): void {
    if (this.noticeBoot(from, boot)) return;
    this.engine.onAcks(from, acks.map((a) => ({ partition: a.partition, seq: Number(a.seq) })));
  }

  /** A peer's boot id, from its reply or its own frame; true when it restarted (acks reset). */
  private noticeBoot(peer: string, boot: bigint): boolean {
    if (!this.engine.noticeBoot(peer, boot)) return false;
    this.o.log.info("peer restarted: it gets full state", { peer });
    return true;
  }

  private exchange(client: GossipClient, frame: GossipFrame): Promise<GossipReply> {
    return new Promise((resolve, reject) =>
      client.exchange(frame, new grpc.Metadata(), { deadline: Date.now() + this.o.rpcTimeoutMs }, (err, res) => (err ? reject(err) : resolve(res))),
    );
  }

  /** Stream the full state of partitions in chunks (element order; context on a key's first chunk). */
  private async pushStates(to: string, client: GossipClient, parts: Array<{ partition: number; seq: number }>): Promise<void> {
    this.counters.stateStreamsSent++;
    let settle!: (err: grpc.ServiceError | null, res?: StateReply) => void;
    const done = new Promise<StateReply>((resolve, reject) => {
      settle = (err, res) => (err ? reject(err) : resolve(res!));
    });
    done.catch(() => {}); // observed below; a failure while still writing must not go unhandled
    const call = client.pushState(new grpc.Metadata(), { deadline: Date.now() + this.o.rpcTimeoutMs * 24 }, (err, res) => settle(err, res));
    // A stream the peer or the network broke never drains: the call's end (done) settles instead.
    const write = async (chunk: StateChunk) => {
      if (!call.write(chunk)) await Promise.race([once(call, "drain"), done]);
    };
    let first = true;
    const head = () => {
      const h = first
        ? { cluster: this.o.cluster, from: this.o.store.nodeId, partitions: this.o.partitions, boot: this.boot }
        : { cluster: "", from: "", partitions: 0, boot: 0n };
      first = false;
      return h;
    };
    try {
      for (const { partition, seq } of parts) {
        let bytes = 0;
        for await (const key of this.o.store.keys(partition)) {
          for await (const c of this.o.store.stateChunks(key, this.o.stateChunkEntries)) {
            const payload = Buffer.from(latticeFor(c.type).encode(c.slice as never));
            bytes += payload.length;
            await write({
              ...head(),
              partition,
              seq: BigInt(seq),
              key,
              type: c.type,
              context: c.ctx === undefined ? undefined : contextToProto(c.ctx),
              rangeStart: c.rangeStart,
              rangeEnd: c.rangeEnd,
              rangeOpen: c.rangeOpen,
              slice: { type: c.type, payload },
              keyDone: c.keyDone,
              partitionDone: false,
            });
          }
        }
        // The end-of-partition marker is what the receiver acknowledges; Algorithm 1 wants no ack.
        if (seq === 0) {
          this.engine.recordStateBytesSent(bytes);
          continue;
        }
        await write({
          ...head(),
          partition,
          seq: BigInt(seq),
          key: "",
          type: ObjectType.OBJECT_TYPE_UNSPECIFIED,
          context: undefined,
          rangeStart: Buffer.alloc(0),
          rangeEnd: Buffer.alloc(0),
          rangeOpen: true,
          slice: undefined,
          keyDone: false,
          partitionDone: true,
        });
        this.engine.recordStateBytesSent(bytes);
      }
      call.end();
      const res = await done;
      this.onReply(to, res.boot, res.acks);
    } catch (err) {
      call.cancel();
      throw err;
    }
  }

  // ------------------------------------------------------------ receiving

  private refuse(code: grpc.status, details: string, from: string): Partial<grpc.ServiceError> {
    this.counters.framesRejected++;
    this.o.log.warn("gossip frame refused", { from, reason: details });
    return { code, details, metadata: new grpc.Metadata() };
  }

  private checkPeer(cluster: string, from: string, partitions: number): Partial<grpc.ServiceError> | undefined {
    if (cluster !== this.o.cluster) return this.refuse(grpc.status.FAILED_PRECONDITION, `cluster "${cluster}" is not "${this.o.cluster}"`, from);
    if (partitions !== this.o.partitions) return this.refuse(grpc.status.FAILED_PRECONDITION, `partition count ${partitions} differs from ${this.o.partitions}`, from);
    if (!this.peers.has(from)) return this.refuse(grpc.status.PERMISSION_DENIED, `node "${from}" is not a known member`, from);
    return undefined;
  }

  /** Join one key's state into the store; returns the part that was new (per the RR contract). */
  private async joinKey(key: string, ks: KeyedState): Promise<KeyedState | undefined> {
    try {
      const r = await this.o.store.merge(key, ks.type, ks.state as AWSet | PNCounter);
      this.spreadSettled(key, r.settled);
      if (!r.changed) return undefined;
      return { type: ks.type, state: this.o.rr ? r.newPart : ks.state };
    } catch (err) {
      if (err instanceof TypeMismatchError) {
        this.counters.typeConflicts++;
        this.o.log.warn("key type conflict between nodes; key skipped", { key, reason: err.message });
        return undefined;
      }
      throw err;
    }
  }

  service(): GossipServer {
    return {
      exchange: (call, callback) => {
        const f = call.request;
        const bad = this.checkPeer(f.cluster, f.from, f.partitions);
        if (bad) return callback(bad);
        this.noticeBoot(f.from, f.boot);
        void (async () => {
          // Decode and validate everything before applying anything.
          const decoded: Array<{ partition: number; kind: PayloadKind; seq: number; keys: KeyedStates; bytes: number }> = [];
          for (const p of f.payloads) {
            if (p.partition >= this.o.partitions || (p.kind !== PayloadKind.DELTA && p.kind !== PayloadKind.STATE) || p.seq > BigInt(Number.MAX_SAFE_INTEGER)) {
              return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `payload for partition ${p.partition} is malformed`, f.from));
            }
            for (const k of p.keys) {
              if (partitionOf(k.key, this.o.partitions) !== p.partition) {
                return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `key "${k.key}" is not in partition ${p.partition}`, f.from));
              }
            }
            try {
              const keys = keyedFromProto(p.keys);
              decoded.push({ partition: p.partition, kind: p.kind, seq: Number(p.seq), keys, bytes: p.keys.reduce((n, k) => n + (k.state?.payload.length ?? 0), 0) });
            } catch (err) {
              return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `undecodable payload: ${(err as Error).message}`, f.from));
            }
          }
          const items: ReceivedItem<KeyedStates>[] = [];
          for (const d of decoded) {
            const fresh = new Map<string, KeyedState>();
            for (const [key, ks] of d.keys) {
              const part = await this.joinKey(key, ks);
              if (part !== undefined) fresh.set(key, part);
            }
            items.push({ partition: d.partition, kind: d.kind as ReceivedItem<KeyedStates>["kind"], seq: d.seq, fresh: fresh.size > 0 ? fresh : undefined, bytes: d.bytes });
          }
          const acks = this.engine.onFrame(f.from, items);
          this.engine.onAcks(f.from, f.acks.map((a) => ({ partition: a.partition, seq: Number(a.seq) })));
          callback(null, { from: this.o.store.nodeId, acks: acks.map(ackToProto), boot: this.boot });
        })().catch((err) => {
          this.o.log.error("applying a gossip frame failed", { from: f.from, err });
          callback({ code: grpc.status.UNAVAILABLE, details: "could not apply the frame; retry later", metadata: new grpc.Metadata() });
        });
      },

      pushState: (call, callback) => {
        void (async () => {
          this.counters.stateStreamsReceived++;
          let from = "";
          let chunks = 0;
          const acks: Ack[] = [];
          // Each key's chunks must follow the protocol: context first, ranges tiling in order, only
          // the last one open (KeyChunkSequence); a partition completes only after its keys did.
          const sequences = new Map<string, { partition: number; order: KeyChunkSequence }>();
          const fresh = new Map<number, Map<string, KeyedState>>();
          const freshElements = new Map<number, number>();
          // Other merges into a key wait while its chunks arrive (Store.beginTransfer).
          const holds = new Map<string, () => void>();
          try {
            for await (const c of call as AsyncIterable<StateChunk>) {
              if (chunks === 0) {
                const bad = this.checkPeer(c.cluster, c.from, c.partitions);
                if (bad) return callback(bad);
                from = c.from;
                this.noticeBoot(from, c.boot);
              }
              chunks++;
              if (c.partition >= this.o.partitions) return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `partition ${c.partition} out of range`, from));
              if (c.partitionDone) {
                const open = [...sequences].find(([, s]) => s.partition === c.partition);
                if (open !== undefined) {
                  this.counters.chunksRejected++;
                  return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `partition ${c.partition} ended before the last chunk of key "${open[0]}"`, from));
                }
                const items: ReceivedItem<KeyedStates>[] = [
                  { partition: c.partition, kind: PayloadKind.STATE, seq: Number(c.seq), fresh: fresh.get(c.partition), tooLarge: this.tooLargeToBuffer(freshElements.get(c.partition) ?? 0) },
                ];
                acks.push(...this.engine.onFrame(from, items));
                fresh.delete(c.partition);
                freshElements.delete(c.partition);
                continue;
              }
              if (partitionOf(c.key, this.o.partitions) !== c.partition || c.slice === undefined || c.slice.type !== c.type) {
                this.counters.chunksRejected++;
                return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `chunk for key "${c.key}" is malformed`, from));
              }
              let slice: AWSet | PNCounter;
              let ctx: CausalContext;
              try {
                let s = sequences.get(c.key);
                if (s === undefined) sequences.set(c.key, (s = { partition: c.partition, order: new KeyChunkSequence() }));
                ctx = s.order.accept({
                  rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined,
                  rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd),
                  rangeOpen: c.rangeOpen,
                  entries: new Map(),
                  context: c.context === undefined ? undefined : contextFromProto(c.context),
                  keyDone: c.keyDone,
                });
                if (c.context !== undefined && !holds.has(c.key)) holds.set(c.key, await this.o.store.beginTransfer(c.key));
                // Set slices carry no context of their own: their dots are checked against the key's.
                slice = c.type === ObjectType.AWSET ? decodeAWSetSlice(c.slice.payload, ctx) : (latticeFor(c.type).decode(c.slice.payload) as PNCounter);
              } catch (err) {
                this.counters.chunksRejected++;
                const what = err instanceof ChunkOrderError ? `chunks of key "${c.key}" out of order` : "undecodable chunk";
                return callback(this.refuse(grpc.status.INVALID_ARGUMENT, `${what}: ${(err as Error).message}`, from));
              }
              try {
                const parts: Array<AWSet | PNCounter> = [];
                const r = await this.o.store.applyChunk(c.key, { type: c.type, senderCtx: ctx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice });
                this.spreadSettled(c.key, r.settled);
                if (r.changed) parts.push(r.newPart as AWSet | PNCounter);
                if (c.keyDone) {
                  const f = await this.o.store.finishKey(c.key, c.type, ctx);
                  this.spreadSettled(c.key, f.settled);
                  if (f.changed) parts.push(f.newPart as AWSet | PNCounter);
                  sequences.delete(c.key);
                  holds.get(c.key)?.();
                  holds.delete(c.key);
                }
                this.counters.chunksApplied++;
                this.collectFresh(fresh, freshElements, c.partition, c.key, c.type, parts);
              } catch (err) {
                if (err instanceof TypeMismatchError) {
                  this.counters.typeConflicts++;
                  continue;
                }
                throw err;
              }
            }
            callback(null, { from: this.o.store.nodeId, acks: acks.map(ackToProto), chunks: BigInt(chunks), boot: this.boot });
          } finally {
            for (const release of holds.values()) release();
          }
        })().catch((err) => {
          this.o.log.warn("state stream failed", { err });
          callback({ code: grpc.status.UNAVAILABLE, details: "state stream failed; it will be retried", metadata: new grpc.Metadata() });
        });
      },
    };
  }

  /** A received state's new part of this many elements is forwarded by full state, not buffered. */
  private tooLargeToBuffer(elements: number): boolean {
    return elements > (this.o.maxBufferedStateElements ?? MAX_BUFFERED_STATE_ELEMENTS);
  }

  /** Gather the new parts of a received full state for the delta buffer, unless they grow too big. */
  private collectFresh(
    fresh: Map<number, Map<string, KeyedState>>,
    counts: Map<number, number>,
    partition: number,
    key: string,
    type: ObjectType,
    parts: Array<AWSet | PNCounter>,
  ): void {
    if (parts.length === 0) return;
    const before = counts.get(partition) ?? 0;
    const n = before + parts.reduce((s, p) => s + ("size" in p ? (p as AWSet).size : 1), 0);
    counts.set(partition, n);
    if (this.tooLargeToBuffer(n)) {
      // Too big to hold in memory: the engine forwards this partition by full state instead
      // (Algorithm 2 is transitive; the others must not depend on the sender surviving).
      fresh.delete(partition);
      if (!this.tooLargeToBuffer(before)) this.counters.freshPartsNotBuffered++;
      return;
    }
    const m = fresh.get(partition) ?? new Map<string, KeyedState>();
    const l = latticeFor(type);
    const cur = m.get(key);
    let state = cur === undefined ? l.clone(parts[0]!) : cur.state;
    for (const p of cur === undefined ? parts.slice(1) : parts) state = l.join(state, p);
    m.set(key, { type, state });
    fresh.set(partition, m);
  }
}

function ackToProto(a: Ack): { partition: number; seq: bigint } {
  return { partition: a.partition, seq: BigInt(a.seq) };
}
