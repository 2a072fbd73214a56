// Valid frames for every method of the three deltaset services, encoded with the generated code:
// the material the mutators start from. Keys are short "fz-" names, so no mutant can name the
// fuzzer's control keys (see control.ts). Peer frames name the fuzzer's fake member as sender and
// carry only the addresses the caller allows (see address-guard.ts).
import { type Random, pick, randomInt } from "../../services/common/prng.ts";
import { ContextsRequest, GossipFrame, GossipService, HandOverRequest, PayloadKind, StateChunk } from "../../services/gen/deltaset/v1/gossip.ts";
import { JoinRequest, LeaveRequest, MemberState, MembersRequest, MembershipService, PingReqRequest, PingRequest, WatchRequest } from "../../services/gen/deltaset/v1/membership.ts";
import { AddRequest, ExportChunk, ExportRequest, IncrementRequest, MergeRequest, QueryRequest, RemoveRequest, ReplicaService, ScanRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { AWSetState, type CausalContext, CounterState, EncodedState, ObjectType } from "../../services/gen/deltaset/v1/types.ts";
import { partitionOf } from "../../services/gossip/partition.ts";

export type CallKind = "unary" | "clientStream" | "serverStream" | "bidiStream";

export interface MethodSeeds {
  path: string;
  kind: CallKind;
  /** A Gossip or Membership protocol call: signed with the cluster key when the run has one. */
  peer: boolean;
  /** Valid request frames (for a client stream: chunks, sent one to three per call). */
  seeds: Buffer[];
}

export interface SeedContext {
  /** The fake member's id (the sender of peer frames) and address. */
  peerId: string;
  peerAddress: string;
  /** An address where nothing listens (for members that must not answer). */
  deadAddress: string;
  cluster: string;
  partitions: number;
  random: Random;
}

const enc = <T>(fns: { encode(m: T): { finish(): Uint8Array } }, m: T) => Buffer.from(fns.encode(m).finish());
const U64_MAX = (1n << 64n) - 1n;
const I64_MAX = (1n << 63n) - 1n;

function key(random: Random, prefix = "fz"): string {
  return `${prefix}-${randomInt(random, 50)}`;
}

function elements(random: Random): Buffer[] {
  return Array.from({ length: randomInt(random, 5) }, () => Buffer.from(`e${randomInt(random, 100)}`));
}

function texts(random: Random): string[] {
  return Array.from({ length: randomInt(random, 4) }, () => pick(random, ["apple", "pear", "ü✓", "", "x".repeat(40)]));
}

function context(random: Random): CausalContext {
  const replicas = ["fz-r1", "fz-r2"].slice(0, 1 + randomInt(random, 2));
  return {
    vv: replicas.map((replica) => ({ replica, counter: BigInt(1 + randomInt(random, 20)) })),
    cloud: random() < 0.3 ? [{ replica: "fz-r3", ranges: [{ first: 5n, last: 7n }] }] : [],
  };
}

function awsetState(random: Random): EncodedState {
  const n = randomInt(random, 4);
  const entries = Array.from({ length: n }, (_, i) => ({ element: Buffer.from(`m${i}`), dots: [{ replica: "fz-r1", counter: BigInt(i + 1), ttlMs: 0n }] }));
  const ctx: CausalContext = { vv: [{ replica: "fz-r1", counter: BigInt(n + randomInt(random, 3)) }], cloud: [] };
  return { type: ObjectType.AWSET, payload: enc(AWSetState, { entries, context: ctx }) };
}

function counterState(random: Random): EncodedState {
  const entries = [{ dot: { replica: "fz-r1", counter: 3n, ttlMs: 0n }, positive: pick(random, [1n, 100n, I64_MAX]), negative: pick(random, [0n, 7n]) }];
  return { type: ObjectType.COUNTER, payload: enc(CounterState, { entries, context: { vv: [{ replica: "fz-r1", counter: 3n }], cloud: [] } }) };
}

function state(random: Random): EncodedState {
  return random() < 0.6 ? awsetState(random) : counterState(random);
}

/** A membership update: about a ghost (any state) or about the fake member itself (alive). */
function member(ctx: SeedContext, random: Random) {
  const ghost = random() < 0.7;
  return {
    nodeId: ghost ? `fz-ghost-${randomInt(random, 5)}` : ctx.peerId,
    address: ghost && random() < 0.5 ? ctx.deadAddress : ctx.peerAddress,
    state: ghost ? pick(random, [MemberState.ALIVE, MemberState.SUSPECT, MemberState.DEAD]) : MemberState.ALIVE,
    incarnation: BigInt(randomInt(random, 3)),
    sinceUnixMs: BigInt(Date.now()),
  };
}

const N = 24;
function many<T>(f: () => T): T[] {
  return Array.from({ length: N }, f);
}

/** Seeds for every method; deterministic for the context's Random. */
export function seedFrames(ctx: SeedContext): MethodSeeds[] {
  const r = ctx.random;
  const common = { cluster: ctx.cluster, partitions: ctx.partitions };
  const gossipFrame = () => {
    const k = key(r);
    return enc(GossipFrame, {
      ...common,
      from: ctx.peerId,
      frameId: BigInt(randomInt(r, 1000)),
      payloads: [{ partition: partitionOf(k, ctx.partitions), kind: pick(r, [PayloadKind.DELTA, PayloadKind.STATE]), seq: BigInt(1 + randomInt(r, 10)), keys: [{ key: k, state: state(r) }] }],
      acks: random() ? [{ partition: randomInt(r, ctx.partitions), seq: BigInt(randomInt(r, 5)) }] : [],
      boot: 42n,
      dropped: random() ? [{ partition: randomInt(r, ctx.partitions), count: BigInt(randomInt(r, 3)) }] : [],
      leaving: random(),
      mac: Buffer.alloc(0),
    });
    function random() {
      return r() < 0.5;
    }
  };
  const stateChunk = () => {
    const k = key(r);
    const s = awsetState(r);
    return enc(StateChunk, {
      ...common,
      mac: Buffer.alloc(0),
      from: ctx.peerId,
      partition: partitionOf(k, ctx.partitions),
      seq: BigInt(1 + randomInt(r, 10)),
      key: k,
      type: ObjectType.AWSET,
      context: { vv: [{ replica: "fz-r1", counter: 5n }], cloud: [] },
      rangeStart: Buffer.from(r() < 0.5 ? "" : "m"),
      rangeEnd: Buffer.from("z"),
      rangeOpen: r() < 0.5,
      slice: s,
      keyDone: r() < 0.5,
      partitionDone: r() < 0.3,
      boot: 42n,
      delta: r() < 0.3,
      removed: r() < 0.2 ? { vv: [{ replica: "fz-r1", counter: 3n }], cloud: [] } : undefined,
      sinceBoot: r() < 0.5 ? 0n : 42n,
      sinceDrops: 0n,
      continued: r() < 0.2,
    });
  };
  const exportChunk = () => {
    // A slice is a set's entries without a context (the context travels on the first chunk).
    const slice = { type: ObjectType.AWSET, payload: enc(AWSetState, { ...AWSetState.decode(awsetState(r).payload), context: undefined }) };
    const open = r() < 0.6;
    return enc(ExportChunk, {
      key: r() < 0.8 ? key(r) : "",
      type: ObjectType.AWSET,
      context: r() < 0.8 ? { vv: [{ replica: "fz-r1", counter: BigInt(20 + randomInt(r, 3)) }], cloud: [] } : undefined,
      rangeStart: Buffer.from(r() < 0.7 ? "" : "m"),
      rangeEnd: Buffer.from(open ? "" : "z"),
      rangeOpen: open,
      slice,
      last: open,
      removed: open && r() < 0.3 ? context(r) : undefined,
      delta: r() < 0.5,
      nextSince: undefined,
      continued: r() < 0.2,
      exportedAtMs: open ? 1_700_000_000_000n : 0n,
    });
  };
  return [
    {
      path: ReplicaService.export.path,
      kind: "serverStream",
      peer: false,
      seeds: many(() => enc(ExportRequest, { key: key(r), maxEntries: pick(r, [0, 1, 3, 100_000]), maxBytes: pick(r, [0, 1, 64, 1 << 30]), since: r() < 0.5 ? context(r) : undefined })),
    },
    { path: ReplicaService.import.path, kind: "clientStream", peer: false, seeds: many(exportChunk) },
    { path: ReplicaService.add.path, kind: "unary", peer: false, seeds: many(() => enc(AddRequest, { key: key(r), elements: elements(r), texts: texts(r) })) },
    { path: ReplicaService.remove.path, kind: "unary", peer: false, seeds: many(() => enc(RemoveRequest, { key: key(r), elements: elements(r), texts: texts(r), context: r() < 0.5 ? context(r) : undefined })) },
    {
      path: ReplicaService.query.path,
      kind: "unary",
      peer: false,
      seeds: many(() => enc(QueryRequest, { key: key(r), elements: elements(r), texts: texts(r), pageSize: pick(r, [0, 1, 10, 100_000]), pageToken: Buffer.alloc(r() < 0.2 ? 12 : 0, 7), withText: r() < 0.5 })),
    },
    { path: ReplicaService.scan.path, kind: "serverStream", peer: false, seeds: many(() => enc(ScanRequest, { key: key(r), chunkSize: pick(r, [0, 1, 3, 1000]), startAfter: Buffer.from(r() < 0.5 ? "" : "e5"), withText: r() < 0.5 })) },
    { path: ReplicaService.merge.path, kind: "unary", peer: false, seeds: many(() => enc(MergeRequest, { key: key(r), state: state(r) })) },
    {
      path: ReplicaService.increment.path,
      kind: "unary",
      peer: false,
      seeds: many(() => enc(IncrementRequest, { key: key(r, "fz-c"), amount: pick(r, [1n, -1n, 1000n, I64_MAX, -I64_MAX - 1n]), requestId: r() < 0.5 ? "" : `fz-req-${randomInt(r, 20)}` })),
    },
    { path: GossipService.exchange.path, kind: "unary", peer: true, seeds: many(gossipFrame) },
    { path: GossipService.exchangeStream.path, kind: "bidiStream", peer: true, seeds: many(gossipFrame) },
    { path: GossipService.pushState.path, kind: "clientStream", peer: true, seeds: many(stateChunk) },
    {
      path: GossipService.contexts.path,
      kind: "unary",
      peer: true,
      seeds: many(() => enc(ContextsRequest, { cluster: ctx.cluster, from: ctx.peerId, partitions: ctx.partitions, boot: 42n, partition: randomInt(r, ctx.partitions + 2), startAfter: r() < 0.5 ? "" : key(r) })),
    },
    {
      path: GossipService.handOver.path,
      kind: "unary",
      peer: true,
      seeds: many(() =>
        enc(HandOverRequest, {
          cluster: ctx.cluster,
          from: ctx.peerId,
          partitions: ctx.partitions,
          removes: Array.from({ length: 1 + randomInt(r, 3) }, () => ({ key: key(r), element: Buffer.from(`e${randomInt(r, 100)}`), unseen: r() < 0.8 ? context(r) : undefined })),
        }),
      ),
    },
    { path: MembershipService.join.path, kind: "unary", peer: true, seeds: many(() => enc(JoinRequest, { cluster: ctx.cluster, self: { ...member(ctx, r), nodeId: ctx.peerId, address: ctx.peerAddress, state: MemberState.ALIVE } })) },
    { path: MembershipService.leave.path, kind: "unary", peer: true, seeds: many(() => enc(LeaveRequest, { cluster: ctx.cluster, nodeId: `fz-ghost-${randomInt(r, 5)}`, incarnation: pick(r, [0n, 1n, U64_MAX]) })) },
    {
      path: MembershipService.ping.path,
      kind: "unary",
      peer: true,
      seeds: many(() => enc(PingRequest, { cluster: ctx.cluster, from: ctx.peerId, seq: BigInt(randomInt(r, 100)), target: r() < 0.5 ? "" : "fz-ghost-1", updates: Array.from({ length: randomInt(r, 3) }, () => member(ctx, r)) })),
    },
    {
      path: MembershipService.pingReq.path,
      kind: "unary",
      peer: true,
      seeds: many(() =>
        enc(PingReqRequest, { cluster: ctx.cluster, from: ctx.peerId, seq: BigInt(randomInt(r, 100)), target: "fz-ghost-2", targetAddress: pick(r, [ctx.deadAddress, ctx.peerAddress]), timeoutMs: pick(r, [1, 50, 200]), updates: [] }),
      ),
    },
    { path: MembershipService.members.path, kind: "unary", peer: false, seeds: many(() => enc(MembersRequest, { includeDeparted: r() < 0.5 })) },
    { path: MembershipService.watch.path, kind: "serverStream", peer: false, seeds: many(() => enc(WatchRequest, { includeCurrent: r() < 0.5 })) },
  ];
}
