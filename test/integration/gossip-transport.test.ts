// The gossip transport of a real node refuses frames from another cluster, from unknown peers and
// malformed frames (counted and logged, never fatal), applies and acknowledges valid ones, and
// applies a chunked full-state push from a member.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, AWSetLattice, ObjectType, contextToProto } from "../../services/crdt/index.ts";
import { GossipClient, type GossipFrame, PayloadKind, StateChunk, type StateReply } from "../../services/gen/deltaset/v1/gossip.ts";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { sumSamples } from "../../services/chaos/eval/counters.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-gossip-"));
let node: NodeProcess;
let gossip: GossipClient;
const P = 64;
const b = (s: string) => Buffer.from(s);

function frame(over: Partial<GossipFrame>): GossipFrame {
  return { cluster: "deltaset", from: "fake", frameId: 1n, payloads: [], acks: [], partitions: P, boot: 0n, dropped: [], mac: Buffer.alloc(0), ...over } as GossipFrame;
}

/** Chunk `i` of a key's state stream; the first carries the stream's head and the key's context. */
function stateChunk(i: number, key: string, ctx: AWSet["ctx"], over: Partial<StateChunk>): StateChunk {
  const sender = i === 0 ? { cluster: "deltaset", from: "fake", partitions: P, context: contextToProto(ctx) } : {};
  const emptySlice = { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(AWSet.fromParts(new Map(), AWSet.bottom().ctx))) };
  return StateChunk.fromPartial({ ...sender, partition: partitionOf(key, P), key, type: ObjectType.AWSET, slice: emptySlice, ...over });
}

/** Send a whole state stream; resolves with the node's answer. */
function pushState(chunks: StateChunk[]): Promise<StateReply> {
  return new Promise<StateReply>((resolve, reject) => {
    const c = gossip.pushState((err, res) => (err ? reject(err) : resolve(res)));
    for (const ch of chunks) c.write(ch);
    c.end();
  });
}

const METRICS = "127.0.0.81:7482";

function exchange(f: GossipFrame) {
  return new Promise<{ acks: Array<{ partition: number; seq: bigint }> }>((resolve, reject) =>
    gossip.exchange(f, (err, res) => (err ? reject(err) : resolve(res))),
  );
}

async function rejects(p: Promise<unknown>, code: grpc.status, msg: RegExp) {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, code, `${grpc.status[e.code]}: ${e.details}`);
    assert.match(e.details, msg);
    return true;
  });
}

before(async () => {
  // A long probe interval keeps the fake member below alive for the length of the test.
  node = await startNodeProcess(["--listen", "127.0.0.81:7481", "--metrics-listen", METRICS, "--node-id", "g1", "--data-dir", join(dir, "g1"), "--probe-interval-ms", "30000", "--probe-timeout-ms", "10000"]);
  gossip = new GossipClient(node.address, grpc.credentials.createInsecure());
  // Join as member "fake" (nobody listens at its address; the node would notice only much later).
  const m = membershipClient(node.address);
  await call(m, m.join, { cluster: "deltaset", self: { nodeId: "fake", address: "127.0.0.82:1", state: MemberState.ALIVE, incarnation: 1n, sinceUnixMs: 0n } });
  m.close();
});

after(async () => {
  gossip?.close();
  await node?.kill();
  rmSync(dir, { recursive: true, force: true });
});

describe("gossip transport", () => {
  it("refuses another cluster, another partition count and unknown peers", async () => {
    await rejects(exchange(frame({ cluster: "other" })), grpc.status.FAILED_PRECONDITION, /cluster "other"/);
    await rejects(exchange(frame({ partitions: 8 })), grpc.status.FAILED_PRECONDITION, /partition count 8/);
    await rejects(exchange(frame({ from: "stranger" })), grpc.status.PERMISSION_DENIED, /not a known member/);
  });

  it("refuses malformed payloads without applying any part of the frame", async () => {
    const good = AWSet.bottom().add("fake~1", [b("ok")]);
    const key = "gk";
    const p = partitionOf(key, P);
    const goodItem = { partition: p, kind: PayloadKind.DELTA, seq: 1n, keys: [{ key, state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(good)) } }] };
    await rejects(exchange(frame({ payloads: [goodItem, { ...goodItem, partition: (p + 1) % P }] })), grpc.status.INVALID_ARGUMENT, /not in partition/);
    await rejects(exchange(frame({ payloads: [goodItem, { ...goodItem, partition: 999 }] })), grpc.status.INVALID_ARGUMENT, /malformed/);
    const r = replicaClient(node.address);
    const q = await call(r, r.query, { key, elements: [b("ok")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
    r.close();
    assert.equal(q.presence[0]!.present, false, "part of a refused frame was applied");
  });

  it("leaves out a key that does not decode, applies the rest, and leaves its partition unacked", async () => {
    const key = "gk-beside";
    const p = partitionOf(key, P);
    const good = AWSet.bottom().add("fake~1", [b("beside")]);
    const goodItem = { partition: p, kind: PayloadKind.DELTA, seq: 1n, keys: [{ key, state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(good)) } }] };
    const garbage = { partition: p, kind: PayloadKind.DELTA, seq: 2n, keys: [{ key, state: { type: ObjectType.AWSET, payload: Buffer.from([1, 2, 3, 4, 5]) } }] };
    const reply = await exchange(frame({ payloads: [goodItem, garbage] }));
    assert.deepEqual(reply.acks, [], "a partition with a key left out was acknowledged");
    const r = replicaClient(node.address);
    const q = await call(r, r.query, { key, elements: [b("beside")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
    r.close();
    assert.equal(q.presence[0]!.present, true, "the frame's decodable key was not applied");
    const metrics = await (await fetch(`http://${METRICS}/metrics`)).text();
    assert.ok(sumSamples(metrics, "deltaset_gossip_transport_events_total", { event: "undecodable_states" }) >= 1, "the key left out was not counted");
    assert.match(node.logs(), /does not decode on this node; key skipped/);
  });

  it("applies and acknowledges a valid delta frame", async () => {
    const key = "gk";
    const p = partitionOf(key, P);
    const d = AWSet.bottom().add("fake~1", [b("ok")]);
    const reply = await exchange(frame({ payloads: [{ partition: p, kind: PayloadKind.DELTA, seq: 7n, keys: [{ key, state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(d)) } }] }] }));
    assert.deepEqual(reply.acks, [{ partition: p, seq: 7n }]);
    const r = replicaClient(node.address);
    const q = await call(r, r.query, { key, elements: [b("ok")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
    r.close();
    assert.equal(q.presence[0]!.present, true);
  });

  it("applies a chunked full-state push and acknowledges the partition", async () => {
    const key = "pushed";
    const p = partitionOf(key, P);
    const state = AWSet.bottom().add("fake~1", ["a", "b", "c", "d", "e"].map(b));
    const sorted = state.sortedKeys();
    const chunks: StateChunk[] = [0, 2, 4].map((start, i) => {
      const keys = sorted.slice(start, start + 2);
      const slice = AWSet.fromParts(new Map(keys.map((k) => [k, state.entries.get(k)!])), AWSet.bottom().ctx);
      const last = i === 2;
      return stateChunk(i, key, state.ctx, {
        seq: 3n,
        // Ranges tile the element space: each starts just after the previous one's end.
        rangeStart: i === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from(sorted[start - 1]!, "latin1"), Buffer.from([0])]),
        rangeEnd: Buffer.from(keys.at(-1)!, "latin1"),
        rangeOpen: last,
        slice: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(slice)) },
        keyDone: last,
      });
    });
    chunks.push({ ...chunks[2]!, key: "", slice: undefined, context: undefined, keyDone: false, partitionDone: true });
    const reply = await pushState(chunks);
    assert.deepEqual(reply.acks, [{ partition: p, seq: 3n }]);
    const r = replicaClient(node.address);
    const q = await call(r, r.query, { key, elements: [], texts: [], pageSize: 10, pageToken: Buffer.alloc(0), withText: true });
    r.close();
    assert.deepEqual(q.members.map((m) => m.text), ["a", "b", "c", "d", "e"]);
  });

  it("refuses chunks out of protocol order: a gap between ranges, a partition ended mid-key", async () => {
    const key = "gappy";
    const state = AWSet.bottom().add("fake~1", ["a", "b"].map(b));
    const chunk = (i: number, over: Partial<StateChunk>) => stateChunk(i, key, state.ctx, { seq: 4n, rangeEnd: Buffer.from("a", "latin1"), ...over });
    // The second range starts at "b", not just after "a": elements in between would be left unchecked.
    await rejects(pushState([chunk(0, {}), chunk(1, { rangeStart: Buffer.from("b", "latin1"), rangeOpen: true, keyDone: true })]), grpc.status.INVALID_ARGUMENT, /out of order/);
    // The partition's end arrives before the key's last chunk: acking it would claim a state not received.
    await rejects(pushState([chunk(0, {}), chunk(1, { key: "", slice: undefined, partitionDone: true })]), grpc.status.INVALID_ARGUMENT, /ended before the last chunk/);
  });

  it("counted and logged every refusal, and still serves", async () => {
    const refusals = node.logs().split("\n").filter((l) => l.includes('"msg":"gossip frame refused"'));
    assert.ok(refusals.length >= 6, `${refusals.length} refusals logged`);
    const r = replicaClient(node.address);
    assert.equal((await call(r, r.add, { key: "after", elements: [b("x")], texts: [] })).added, 1);
    r.close();
  });
});
