// In-process simulation of a cluster that runs the node's own gossip code: each simulated node is
// a real Store (on an in-memory database) and a real GossipExchange (exchange.ts), the same receive
// path a node runs behind gRPC: frame checks, redundancy removal, chunked state transfer, the
// store's joins, acks after durable writes, durable sequence numbers and restarts. Only the wire
// differs: encoded GossipFrame / StateChunk / reply protobufs travel over a seeded lossy channel.
// Time advances in periods; in each period every node ticks once, then every message due before
// the next period is delivered (replies included, so an ack can return within its period).
// Deterministic for a seed: the only randomness is seeded, and every await is taken in order.
import { type AWSet, type CreateParams, type ObjectType, latticeFor, operationsFor, runOperation } from "../crdt/index.js";
import { ObjectType as OT } from "../gen/deltaset/v1/types.js";
import { ContextsReply, ContextsRequest, GossipFrame, GossipReply, StateChunk, StateReply } from "../gen/deltaset/v1/gossip.js";
import type { Logger } from "../common/logger.js";
import { type Random, seededRandom } from "../common/prng.js";
import { Store } from "../store/store.js";
import type { StoreDb } from "../store/db.js";
import type { Algorithm1Config, Algorithm2Config, AntiEntropyEngine } from "./engine.js";
import { GossipExchange, type TransportCounters } from "./exchange.js";
import type { KeyedStates } from "./keyed-states.js";
import type { Holdings } from "./catch-up.js";
import { type ChannelFaults, LossyChannel, NO_FAULTS } from "./lossy-channel.js";
import { partitionOf } from "./partition.js";
import type { Topology } from "./topology.js";

export interface SimulationOptions {
  topology: Topology;
  sync: Algorithm1Config | Algorithm2Config;
  partitions: number;
  seed: number;
  faults?: ChannelFaults;
  /** Length of a period in the channel's time unit (default 1000). */
  period?: number;
  cluster?: string;
  /** Elements per chunk of a full-state stream (default 16, so that simulations exercise chunking). */
  stateChunkEntries?: number;
  /** Largest message (default 4 MiB, as a node); larger deltas ship as full state. */
  maxMessageBytes?: number;
  /** A full-state stream ends after the partition that brings it to this many payload bytes (ExchangeOptions.stateStreamBytes; default no limit). */
  stateStreamBytes?: number;
  /** Ask the receiver what it holds before a full state and send only what it lacks (catch-up.ts; default true, as a node). */
  catchUpByContexts?: boolean;
  /** Most bytes of a Contexts answer (ExchangeOptions.contextsReplyBytes). */
  contextsReplyBytes?: number;
  /** Settle announcements after this much quiet time, in the channel's time unit (ExchangeOptions.settleMs; default off). */
  settleMs?: number;
  /** A key still changing this long after its first unannounced change is announced anyway (ExchangeOptions.settleMaxWaitMs). */
  settleMaxWaitMs?: number;
}

// `resets` is not on the wire: it is what the sender's RPC callback remembers of the send (the
// peer's reset count when it was planned; Exchange.onReply), carried to the reply as a closure would.
export type SimMessage =
  | { kind: "frame"; bytes: Uint8Array; resets: number }
  | { kind: "reply"; bytes: Uint8Array; resets: number }
  | { kind: "state"; chunks: Uint8Array[]; resets: number }
  | { kind: "state-reply"; bytes: Uint8Array; resets: number };

/** Bytes put on the wire, counted when sent (lost messages count too). */
export interface TrafficStats {
  /** Delta frames and state streams sent. */
  frames: number;
  /** State streams sent (counted in frames too). */
  stateStreams: number;
  /** Contexts requests and answers (catch-up by contexts). */
  contextsBytes: number;
  replies: number;
  /** Encoded frames and state chunks. */
  frameBytes: number;
  replyBytes: number;
  /** Encoded payload bytes (the keys of delta frames; the slices of state chunks) by kind. */
  deltaPayloadBytes: number;
  statePayloadBytes: number;
  malformed: number;
}

interface SimNode {
  id: string;
  store: Store;
  x: GossipExchange;
  /** The node's "disk": survives a restart, lost with a wipe. */
  db: StoreDb;
  /** Starts of the node so far: each start mints under a new replica id, as a node process does (store/open-store.ts). */
  incarnation: number;
}

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };

export class GossipSimulation {
  readonly channel: LossyChannel<SimMessage>;
  readonly traffic: TrafficStats = {
    frames: 0,
    stateStreams: 0,
    contextsBytes: 0,
    replies: 0,
    frameBytes: 0,
    replyBytes: 0,
    deltaPayloadBytes: 0,
    statePayloadBytes: 0,
    malformed: 0,
  };
  private readonly nodes = new Map<string, SimNode>();
  private readonly ids: string[];
  private readonly random: Random;
  private readonly period: number;
  private now = 0;
  private rounds = 0;

  private constructor(private readonly opts: SimulationOptions) {
    this.random = seededRandom(opts.seed);
    this.channel = new LossyChannel(seededRandom(opts.seed ^ 0x5bd1e995), opts.faults ?? NO_FAULTS);
    this.period = opts.period ?? 1000;
    this.ids = [...opts.topology.keys()].sort();
  }

  static async create(opts: SimulationOptions): Promise<GossipSimulation> {
    const sim = new GossipSimulation(opts);
    for (const id of sim.ids) {
      const n = await sim.startNode(id, undefined, 0);
      sim.nodes.set(id, n);
    }
    return sim;
  }

  /** Open a node's store (new, or its surviving database) and start its exchange, as a node process does. */
  private async startNode(id: string, db: StoreDb | undefined, incarnation: number): Promise<SimNode> {
    const store = await Store.open({
      dir: "memory",
      db,
      nodeId: id,
      replicaId: `${id}~${incarnation}`,
      partitions: this.opts.partitions,
      partitionOf,
      sync: "buffered",
    });
    const x = await GossipExchange.create(
      {
        store,
        log: quiet,
        cluster: this.opts.cluster ?? "sim",
        partitions: this.opts.partitions,
        sync: this.opts.sync,
        stateChunkEntries: this.opts.stateChunkEntries ?? 16,
        stateStreamBytes: this.opts.stateStreamBytes,
        contextsReplyBytes: this.opts.contextsReplyBytes,
        maxMessageBytes: this.opts.maxMessageBytes ?? 4 * 1024 * 1024,
        boot: this.newBoot(),
        random: seededRandom((this.random() * 2 ** 32) >>> 0),
        settleMs: this.opts.settleMs,
        settleMaxWaitMs: this.opts.settleMaxWaitMs,
        clock: () => this.now,
      },
      (peer) => this.nodes.has(peer),
    );
    x.engine.setNeighbours(this.opts.topology.get(id) ?? []);
    return { id, store, x, db: store.db, incarnation };
  }

  /** A seeded 64-bit draw (boot ids; the anonymous dots of operate()). */
  private random64(): bigint {
    return (BigInt(Math.floor(this.random() * 2 ** 32)) << 32n) | BigInt(Math.floor(this.random() * 2 ** 32));
  }

  private newBoot(): bigint {
    return this.random64() | 1n;
  }

  get nodeIds(): readonly string[] {
    return this.ids;
  }

  get round(): number {
    return this.rounds;
  }

  get time(): number {
    return this.now;
  }

  engine(id: string): AntiEntropyEngine<KeyedStates> {
    return this.node(id).x.engine;
  }

  /** A node's exchange (the transport half a node process runs). */
  exchange(id: string): GossipExchange {
    return this.node(id).x;
  }

  /** A node's current boot id (a new one at every restart). */
  bootOf(id: string): bigint {
    return this.node(id).x.boot;
  }

  /** A node's transport counters (chunks applied, frames refused...), as a node's metrics report them. */
  transport(id: string): TransportCounters {
    return this.node(id).x.counters;
  }

  /** A node's store (to read or check what it holds). */
  store(id: string): Store {
    return this.node(id).store;
  }

  setFaults(f: ChannelFaults): void {
    this.channel.setFaults(f);
  }

  setNeighbours(id: string, neighbours: readonly string[]): void {
    this.node(id).x.engine.setNeighbours(neighbours);
  }

  /** Close every node's store. */
  async close(): Promise<void> {
    for (const n of this.nodes.values()) await n.store.close();
  }

  // ------------------------------------------------------------------ operations

  /** Add at a node, as its Replica service does: the store's add, then the delta to the exchange. */
  async add(id: string, key: string, elements: readonly Uint8Array[]): Promise<AWSet> {
    const n = this.node(id);
    const r = await n.store.add(key, [...elements]);
    n.x.local(key, OT.AWSET, r.delta);
    return r.delta;
  }

  async remove(id: string, key: string, elements: readonly Uint8Array[]): Promise<AWSet> {
    const n = this.node(id);
    const r = await n.store.remove(key, [...elements]);
    if (!r.delta.ctx.isEmpty()) n.x.local(key, OT.AWSET, r.delta);
    return r.delta;
  }

  /** Apply a delta mutator of any type at a node: X ⊔= d in the store, then d to the exchange. Returns d. */
  async mutate<S>(id: string, key: string, type: ObjectType, deltaOf: (current: S) => S): Promise<S> {
    const n = this.node(id);
    const delta = deltaOf(await this.stateOf<S>(id, key, type));
    await n.store.merge(key, type, delta);
    n.x.local(key, type, delta);
    return delta;
  }

  /**
   * An Add or Remove on a key of a type stored whole (a filter), as the Replica service runs it
   * (crdt/operations.ts runOperation); the delta goes to the exchange. Returns how many elements changed.
   */
  async operate(
    id: string,
    key: string,
    type: ObjectType,
    op: { kind: "add"; elements: readonly Uint8Array[]; params?: CreateParams } | { kind: "remove"; elements: readonly Uint8Array[] },
  ): Promise<number> {
    const n = this.node(id);
    const ops = operationsFor(type);
    if (ops === undefined) throw new RangeError(`type ${type} has no client operations`);
    const env = { replica: n.store.replicaId, random: this.random, randomId: () => this.random64() };
    const r = await n.store.update(
      key,
      type,
      (current) => {
        const o = runOperation(ops, current, op.kind === "add" ? { ...op, params: op.params ?? {} } : op, env);
        return { state: o.state, delta: o.delta, result: o.changed };
      },
      { mustExist: op.kind === "remove" },
    );
    if (r.delta !== undefined) n.x.local(key, type, r.delta);
    return r.result;
  }

  // ------------------------------------------------------------------ time

  /** One period: every node ticks, then messages due before the next period are delivered. */
  async step(): Promise<void> {
    const t = this.now;
    for (const id of this.ids) await this.tickNode(this.node(id), t);
    const end = t + this.period;
    for (let env = this.channel.popBefore(end); env !== undefined; env = this.channel.popBefore(end)) {
      const to = this.nodes.get(env.to);
      if (to !== undefined) await this.deliver(to, env.from, env.msg, env.deliverAt);
    }
    this.now = end;
    this.rounds++;
  }

  /** Run periods until every replica holds the same state, at most maxRounds. Returns rounds run, or -1. */
  async runUntilConverged(maxRounds: number): Promise<number> {
    for (let i = 0; i < maxRounds; i++) {
      if (await this.converged()) return i;
      await this.step();
    }
    return (await this.converged()) ? maxRounds : -1;
  }

  /**
   * Crash and restart a node: what its store made durable survives (every acknowledged write),
   * the engine's buffer and ack map are lost, messages in flight to it are dropped, and it comes
   * back under a new boot id with its sequence numbers moved past the durable ones, exactly as a
   * node process restarts. With wipe, the data is lost too (the node returns empty under the same id).
   */
  async restart(id: string, opts: { wipe?: boolean } = {}): Promise<void> {
    const n = this.node(id);
    this.channel.dropTo(id);
    await n.store.close();
    const wipe = opts.wipe === true;
    this.nodes.set(id, await this.startNode(id, wipe ? undefined : n.db, n.incarnation + 1));
  }

  /**
   * A node drops its local copy of partition p, as the hand-off does once the partition's owners
   * acknowledged it (gossip/hand-off.ts: a new replica id, the drop noted for peers, then each
   * key's records removed); the simulation keeps exchanging p with it, as when it owns p again.
   */
  async dropPartition(id: string, p: number): Promise<number> {
    const n = this.node(id);
    const keys: string[] = [];
    for await (const k of n.store.keys(p)) keys.push(k);
    if (keys.length === 0) return 0;
    await n.store.rotateReplicaId();
    n.x.engine.noteDropped(p);
    for (const k of keys) await n.store.dropLocalCopy(k);
    return keys.length;
  }

  private async tickNode(n: SimNode, t: number): Promise<void> {
    await n.x.announceSettled(t);
    for (const out of await n.x.tick(t)) {
      const resets = out.resets;
      for (const frame of out.frames) {
        const bytes = GossipFrame.encode(frame).finish();
        this.traffic.frames++;
        this.traffic.frameBytes += bytes.length;
        for (const p of frame.payloads) for (const k of p.keys) this.traffic.deltaPayloadBytes += k.state?.payload.length ?? 0;
        this.channel.send(t, n.id, out.to, { kind: "frame", bytes, resets });
      }
      // One message per stream: a stream that reached the byte budget leaves the rest to the next.
      const holdingsOf = this.opts.catchUpByContexts === false ? undefined : (p: number, after?: string) => this.contexts(n, out.to, p, after);
      for (let rest = out.states; rest.length > 0; ) {
        const chunks: Uint8Array[] = [];
        const stream = n.x.stateStream(rest, holdingsOf, () => n.x.engine.resetsOf(out.to) === resets);
        let next = await stream.next();
        for (; !next.done; next = await stream.next()) {
          const bytes = StateChunk.encode(next.value).finish();
          chunks.push(bytes);
          this.traffic.frameBytes += bytes.length;
          this.traffic.statePayloadBytes += next.value.slice?.payload.length ?? 0;
        }
        rest = rest.slice(next.value);
        if (chunks.length > 0) {
          this.traffic.frames++;
          this.traffic.stateStreams++;
        }
        // Sent even without chunks, as a real stream is opened: its end ends the sender's claims.
        this.channel.send(t, n.id, out.to, { kind: "state", chunks, resets });
        // As NodeGossip.pushStates: the peer's acks were reset meanwhile (a Contexts answer told
        // of its restart), so the rest is planned again next period.
        if (n.x.engine.resetsOf(out.to) !== resets) {
          n.x.engine.statesNotSent(rest.map((st) => st.partition));
          break;
        }
      }
    }
  }

  /** Gossip/Contexts, as a call answered at once (encoded both ways, counted in traffic). */
  private async contexts(n: SimNode, to: string, partition: number, startAfter?: string): Promise<Holdings | undefined> {
    const req = ContextsRequest.encode(n.x.contextsRequest(partition, startAfter)).finish();
    const a = await this.node(to).x.answerContexts(ContextsRequest.decode(req));
    if ("refused" in a) return undefined;
    const reply = ContextsReply.encode(a.reply).finish();
    this.traffic.contextsBytes += req.length + reply.length;
    return n.x.holdingsFrom(to, ContextsReply.decode(reply));
  }

  private async deliver(n: SimNode, from: string, msg: SimMessage, at: number): Promise<void> {
    switch (msg.kind) {
      case "frame": {
        const frame = this.decode(() => GossipFrame.decode(msg.bytes));
        if (frame === undefined) return;
        const a = await n.x.receiveFrame(frame);
        if ("refused" in a) return;
        this.reply(at, n.id, from, "reply", GossipReply.encode(a.reply).finish(), msg.resets);
        return;
      }
      case "state": {
        const chunks = this.decode(() => msg.chunks.map((b) => StateChunk.decode(b)));
        if (chunks === undefined) return;
        const a = await n.x.receiveStateStream(chunks, from);
        if ("refused" in a) return;
        this.reply(at, n.id, from, "state-reply", StateReply.encode(a.reply).finish(), msg.resets);
        return;
      }
      case "reply": {
        const r = this.decode(() => GossipReply.decode(msg.bytes));
        if (r !== undefined) n.x.onReply(from, r.boot, r.acks, r.dropped, msg.resets, r.leaving);
        return;
      }
      case "state-reply": {
        const r = this.decode(() => StateReply.decode(msg.bytes));
        if (r !== undefined) n.x.onReply(from, r.boot, r.acks, r.dropped, msg.resets);
        return;
      }
    }
  }

  private reply(at: number, from: string, to: string, kind: "reply" | "state-reply", bytes: Uint8Array, resets: number): void {
    this.traffic.replies++;
    this.traffic.replyBytes += bytes.length;
    this.channel.send(at, from, to, { kind, bytes, resets });
  }

  private decode<T>(fn: () => T): T | undefined {
    try {
      return fn();
    } catch {
      this.traffic.malformed++;
      return undefined;
    }
  }

  // ------------------------------------------------------------------ inspection

  /** The state of a key at a node (⊥ when absent). */
  async stateOf<S>(id: string, key: string, type: ObjectType = OT.AWSET): Promise<S> {
    const s = await this.node(id).store.readState(key);
    return (s?.state as S | undefined) ?? (latticeFor(type).bottom() as S);
  }

  /** Elements of an AWSET key at a node, as latin1 strings, sorted. */
  async elementsOf(id: string, key: string): Promise<string[]> {
    return (await this.stateOf<AWSet>(id, key)).sortedKeys();
  }

  async hasElement(id: string, key: string, element: Uint8Array): Promise<boolean> {
    return (await this.node(id).store.contains(key, [element]))[0]!;
  }

  /** Keys held anywhere. */
  async keys(): Promise<string[]> {
    const out = new Set<string>();
    for (const n of this.nodes.values()) {
      for (let p = 0; p < this.opts.partitions; p++) for await (const k of n.store.keys(p)) out.add(k);
    }
    return [...out].sort();
  }

  /** Every replica holds the same state (type, elements and context) for every key. */
  async converged(): Promise<boolean> {
    for (const key of await this.keys()) {
      let first: { type: ObjectType; state: unknown } | undefined;
      for (const id of this.ids) {
        const s = await this.node(id).store.readState(key);
        if (s === undefined) return false;
        if (first === undefined) first = s;
        else if (s.type !== first.type || !latticeFor(s.type).equals(s.state, first.state)) return false;
      }
    }
    return true;
  }

  /** The partition of a key (as every node computes it). */
  partitionOf(key: string): number {
    return partitionOf(key, this.opts.partitions);
  }

  private node(id: string): SimNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new RangeError(`no node ${id}`);
    return n;
  }
}
