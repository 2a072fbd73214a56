// In-process simulation of a cluster: real engines, real lattices, real wire encoding
// (GossipFrame / GossipReply protobufs), over a seeded lossy channel. Time advances in periods;
// in each period every node ticks once, then every message due before the next period is
// delivered (replies included, so an ack can return within the period that sent its frame).
import { AWSet, type ObjectType, latticeFor } from "../crdt/index.js";
import { ObjectType as OT } from "../gen/deltaset/v1/types.js";
import { GossipFrame, GossipReply, type PartitionPayload, PayloadKind } from "../gen/deltaset/v1/gossip.js";
import {
  type Ack,
  type Algorithm1Config,
  type Algorithm2Config,
  AntiEntropyEngine,
  type ReceivedItem,
} from "./engine.js";
import {
  type KeyedState,
  type KeyedStates,
  joinKeyedInto,
  keyedFromProto,
  keyedStatesOps,
  keyedToProto,
  protoKeysSize,
  receivedPart,
} from "./keyed-states.js";
import { persistMovedSeqs, seqsAfterRestart } from "./durable-seq.js";
import { type ChannelFaults, LossyChannel, NO_FAULTS } from "./lossy-channel.js";
import type { PayloadOps } from "./payload.js";
import { partitionOf } from "./partition.js";
import { type Random, seededRandom } from "../common/prng.js";
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
}

export type SimMessage = { kind: "frame"; bytes: Uint8Array } | { kind: "reply"; bytes: Uint8Array };

/** Bytes put on the wire, counted when sent (lost messages count too). */
export interface TrafficStats {
  frames: number;
  replies: number;
  frameBytes: number;
  replyBytes: number;
  /** Encoded payload bytes (the keys of PartitionPayloads) by kind. */
  deltaPayloadBytes: number;
  statePayloadBytes: number;
  malformed: number;
}

interface SimNode {
  id: string;
  engine: AntiEntropyEngine<KeyedStates>;
  /** X, per partition: the durable state. */
  state: Map<string, KeyedState>[];
  /** The durable seq of each partition, persisted when the node's policy persists it. */
  durableSeqs: number[];
  frameId: bigint;
  /** Drawn at each (re)start, as a node process draws its boot id. */
  boot: bigint;
}

export class GossipSimulation {
  readonly channel: LossyChannel<SimMessage>;
  readonly traffic: TrafficStats = {
    frames: 0,
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
  private readonly rr: boolean;
  private readonly cluster: string;
  private now = 0;
  private rounds = 0;

  constructor(private readonly opts: SimulationOptions) {
    this.random = seededRandom(opts.seed);
    this.channel = new LossyChannel(seededRandom(opts.seed ^ 0x5bd1e995), opts.faults ?? NO_FAULTS);
    this.period = opts.period ?? 1000;
    this.rr = opts.sync.algorithm === 2 && opts.sync.rr;
    this.cluster = opts.cluster ?? "sim";
    this.ids = [...opts.topology.keys()].sort();
    for (const id of this.ids) {
      const durableSeqs = new Array<number>(opts.partitions).fill(0);
      const n: SimNode = {
        id,
        engine: this.newEngine(id, durableSeqs),
        state: Array.from({ length: opts.partitions }, () => new Map()),
        durableSeqs,
        frameId: 0n,
        boot: this.newBoot(),
      };
      this.nodes.set(id, n);
      this.startEngine(n);
    }
  }

  // Payloads are immutable, so each one is encoded at most once: the same bytes give the
  // engine its sizes and the frames their content. Received payloads keep the bytes they came in.
  private readonly encoded = new WeakMap<KeyedStates, PartitionPayload["keys"]>();
  private readonly ops: PayloadOps<KeyedStates> = {
    ...keyedStatesOps,
    sizeBytes: (p) => protoKeysSize(this.encodedOf(p)),
  };

  private encodedOf(p: KeyedStates): PartitionPayload["keys"] {
    let keys = this.encoded.get(p);
    if (keys === undefined) {
      keys = keyedToProto(p);
      this.encoded.set(p, keys);
    }
    return keys;
  }

  private newBoot(): bigint {
    return (BigInt(Math.floor(this.random() * 2 ** 32)) << 32n) | BigInt(Math.floor(this.random() * 2 ** 32)) | 1n;
  }

  /** Start (or restart) a node's engine the way a node process does: past its persisted seqs. */
  private startEngine(n: SimNode): void {
    const seqs = seqsAfterRestart(new Map(n.durableSeqs.map((c, p) => [p, c])), this.opts.partitions);
    n.durableSeqs = seqs.slice();
    n.engine = this.newEngine(n.id, seqs);
  }

  private newEngine(id: string, seqs: number[]): AntiEntropyEngine<KeyedStates> {
    const sync = this.opts.sync.algorithm === 2 ? { ...this.opts.sync, initialSeqs: seqs.slice() } : this.opts.sync;
    return new AntiEntropyEngine<KeyedStates>({
      self: id,
      ops: this.ops,
      random: seededRandom((this.random() * 2 ** 32) >>> 0),
      sync,
      partitions: this.opts.partitions,
      neighbours: this.opts.topology.get(id) ?? [],
    });
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
    return this.node(id).engine;
  }

  setFaults(f: ChannelFaults): void {
    this.channel.setFaults(f);
  }

  setNeighbours(id: string, neighbours: readonly string[]): void {
    this.node(id).engine.setNeighbours(neighbours);
  }

  // ------------------------------------------------------------------ operations

  /** Apply a delta mutator at a node: X ⊔= d, then hand d to the engine. Returns d. */
  mutate<S>(id: string, key: string, type: ObjectType, deltaOf: (current: S) => S): S {
    const n = this.node(id);
    const p = partitionOf(key, this.opts.partitions);
    const cur = (n.state[p]!.get(key)?.state as S | undefined) ?? (latticeFor(type).bottom() as S);
    const delta = deltaOf(cur);
    const payload: KeyedStates = new Map([[key, { type, state: delta }]]);
    joinKeyedInto(n.state[p]!, payload);
    n.engine.local(p, payload);
    return delta;
  }

  add(id: string, key: string, elements: readonly Uint8Array[]): AWSet {
    return this.mutate<AWSet>(id, key, OT.AWSET, (s) => s.addDelta(id, elements));
  }

  remove(id: string, key: string, elements: readonly Uint8Array[]): AWSet {
    return this.mutate<AWSet>(id, key, OT.AWSET, (s) => s.removeDelta(elements));
  }

  // ------------------------------------------------------------------ time

  /** One period: every node ticks, then messages due before the next period are delivered. */
  step(): void {
    const t = this.now;
    for (const id of this.ids) this.tickNode(this.node(id), t);
    const end = t + this.period;
    for (let env = this.channel.popBefore(end); env !== undefined; env = this.channel.popBefore(end)) {
      const to = this.nodes.get(env.to);
      if (to === undefined) continue;
      if (env.msg.kind === "frame") this.onFrame(to, env.from, env.msg.bytes, env.deliverAt);
      else this.onReply(to, env.from, env.msg.bytes);
    }
    this.now = end;
    this.rounds++;
  }

  /** Run periods until every replica holds the same state, at most maxRounds. Returns rounds run, or -1. */
  runUntilConverged(maxRounds: number): number {
    for (let i = 0; i < maxRounds; i++) {
      if (this.converged()) return i;
      this.step();
    }
    return this.converged() ? maxRounds : -1;
  }

  /**
   * Crash and restart a node: its durable state (X and the seqs its policy persisted so far)
   * survives, the engine's volatile buffer and ack map are lost, messages in flight to it are
   * dropped, and it comes back under a new boot id. With wipe, the data directory is lost too
   * (the node returns empty under the same id).
   */
  restart(id: string, opts: { wipe?: boolean } = {}): void {
    const n = this.node(id);
    this.channel.dropTo(id);
    if (opts.wipe === true) {
      n.state = Array.from({ length: this.opts.partitions }, () => new Map());
      n.durableSeqs = new Array<number>(this.opts.partitions).fill(0);
    }
    n.boot = this.newBoot();
    this.startEngine(n);
  }

  private tickNode(n: SimNode, t: number): void {
    // The node's policy: moved seqs are persisted before the tick's frames leave.
    persistMovedSeqs(n.engine, { persistSeqs: (m) => m.forEach((c, p) => (n.durableSeqs[p] = c)) });
    const frames = n.engine.tick(t);
    const stateCache = new Map<number, PartitionPayload["keys"]>();
    for (const f of frames) {
      const payloads: PartitionPayload[] = [];
      for (const item of f.items) {
        let keys: PartitionPayload["keys"];
        if (item.kind === PayloadKind.STATE) {
          // X = ⊥: Algorithm 1 wants no ack, so nothing to ship; Algorithm 2 still ships the
          // empty state (as a node streams a bare end-of-partition marker) so it gets acked.
          if (n.state[item.partition]!.size === 0 && item.seq === 0) continue;
          keys = stateCache.get(item.partition) ?? keyedToProto(n.state[item.partition]!);
          stateCache.set(item.partition, keys);
        } else {
          keys = this.encodedOf(item.payload!);
        }
        const bytes = payloadBytes(keys);
        if (item.kind === PayloadKind.STATE) {
          this.traffic.statePayloadBytes += bytes;
          n.engine.recordStateBytesSent(bytes);
        } else {
          this.traffic.deltaPayloadBytes += bytes;
        }
        payloads.push({ partition: item.partition, kind: item.kind, seq: BigInt(item.seq), keys });
      }
      if (payloads.length === 0) continue;
      const frame: GossipFrame = {
        cluster: this.cluster,
        from: n.id,
        frameId: ++n.frameId,
        payloads,
        acks: [],
        partitions: this.opts.partitions,
        boot: n.boot,
      };
      const bytes = GossipFrame.encode(frame).finish();
      this.traffic.frames++;
      this.traffic.frameBytes += bytes.length;
      this.channel.send(t, n.id, f.to, { kind: "frame", bytes });
    }
  }

  private onFrame(n: SimNode, from: string, bytes: Uint8Array, at: number): void {
    let frame: GossipFrame;
    const items: ReceivedItem<KeyedStates>[] = [];
    const decoded: Array<{ partition: number; received: KeyedStates }> = [];
    try {
      frame = GossipFrame.decode(bytes);
      if (frame.partitions !== this.opts.partitions) throw new RangeError("partition count differs");
      for (const pl of frame.payloads) {
        if (pl.partition >= this.opts.partitions) throw new RangeError("partition out of range");
        const received = keyedFromProto(pl.keys);
        this.encoded.set(received, pl.keys);
        decoded.push({ partition: pl.partition, received });
      }
    } catch {
      this.traffic.malformed++;
      return;
    }
    n.engine.noticeBoot(from, frame.boot);
    for (const [i, pl] of frame.payloads.entries()) {
      const { partition, received } = decoded[i]!;
      const x = n.state[partition]!;
      // RR: Δ(d, X) must be computed before the join, against X as it was. Without RR the join's
      // own "changed" answer tells whether d ⋢ X, which saves an order test.
      let fresh: KeyedStates | undefined;
      if (this.rr) {
        fresh = receivedPart(received, x, true);
        joinKeyedInto(x, received);
      } else {
        fresh = joinKeyedInto(x, received) ? received : undefined;
      }
      items.push({ partition, kind: pl.kind as ReceivedItem<KeyedStates>["kind"], seq: Number(pl.seq), fresh, bytes: payloadBytes(pl.keys) });
    }
    const acks = n.engine.onFrame(from, items);
    if (acks.length === 0) return;
    const reply = GossipReply.encode({ from: n.id, acks: acks.map((a) => ({ partition: a.partition, seq: BigInt(a.seq) })), boot: n.boot }).finish();
    this.traffic.replies++;
    this.traffic.replyBytes += reply.length;
    this.channel.send(at, n.id, from, { kind: "reply", bytes: reply });
  }

  private onReply(n: SimNode, from: string, bytes: Uint8Array): void {
    let reply: GossipReply;
    try {
      reply = GossipReply.decode(bytes);
    } catch {
      this.traffic.malformed++;
      return;
    }
    // A reply from a restarted peer promises only what the frame carried: reset, ignore its acks.
    if (n.engine.noticeBoot(from, reply.boot)) return;
    const acks: Ack[] = reply.acks.map((a) => ({ partition: a.partition, seq: Number(a.seq) }));
    n.engine.onAcks(from, acks);
  }

  // ------------------------------------------------------------------ inspection

  /** The state of a key at a node (⊥ when absent). */
  stateOf<S>(id: string, key: string, type: ObjectType = OT.AWSET): S {
    const p = partitionOf(key, this.opts.partitions);
    return (this.node(id).state[p]!.get(key)?.state as S | undefined) ?? (latticeFor(type).bottom() as S);
  }

  /** Elements of an AWSET key at a node, as latin1 strings, sorted. */
  elementsOf(id: string, key: string): string[] {
    return this.stateOf<AWSet>(id, key).sortedKeys();
  }

  hasElement(id: string, key: string, element: Uint8Array): boolean {
    return this.stateOf<AWSet>(id, key).has(element);
  }

  /** Keys held anywhere. */
  keys(): string[] {
    const out = new Set<string>();
    for (const n of this.nodes.values()) for (const part of n.state) for (const k of part.keys()) out.add(k);
    return [...out].sort();
  }

  /** Every replica holds the same state for every key. */
  converged(): boolean {
    const [first, ...rest] = this.ids.map((id) => this.node(id));
    if (first === undefined) return true;
    for (let p = 0; p < this.opts.partitions; p++) {
      for (const other of rest) if (!samePartition(first.state[p]!, other.state[p]!)) return false;
    }
    return true;
  }

  private node(id: string): SimNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new RangeError(`no node ${id}`);
    return n;
  }
}

const payloadBytes = protoKeysSize;

function samePartition(a: Map<string, KeyedState>, b: Map<string, KeyedState>): boolean {
  const keys = new Set([...a.keys(), ...b.keys()]);
  for (const k of keys) {
    const x = a.get(k);
    const y = b.get(k);
    const type = (x ?? y)!.type;
    const l = latticeFor(type);
    const xs = x?.state ?? l.bottom();
    const ys = y?.state ?? l.bottom();
    if ((x !== undefined && y !== undefined && x.type !== y.type) || !l.equals(xs, ys)) return false;
  }
  return true;
}
