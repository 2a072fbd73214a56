// Filter keys (seed 001's GBF, GCF, ORCF and scalable series) on real nodes: created by their first
// Add with parameters, queried as "maybe present" or absent with their fill, replicated by gossip
// to every node, and refused clearly where a type lacks an operation or runs out of room.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { TestCluster } from "../helpers/test-cluster.ts";
import { filterCalls, filterParams } from "../helpers/filter-calls.ts";
import { expectRefused } from "../helpers/grpc-status.ts";
import { eventually } from "../helpers/eventually.ts";
import { call } from "../../services/client/rpc.ts";
import { runCli } from "../helpers/node-process.ts";
import { AWSetProb, AWSetProbLattice, DEFAULT_AWSET_PROB_PARAMS, GbfLattice, apbfParamsFor, ObjectType, gbfParams, Gbf } from "../../services/crdt/index.ts";
import { UnionStrategy } from "../../services/gen/deltaset/v1/types.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-filters-"));
const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.0.19${i}:769${i}`), ["--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--gossip-interval-ms", "100"], "f");
before(() => c.startAll());
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const b = (s: string) => Buffer.from(s);
const params = filterParams;
const { add, remove, query } = filterCalls(c);


describe("filter keys on a 3-node cluster", () => {
  it("a GBF is created by its first Add, answers maybe-present or absent with its fill, and reaches every node", async () => {
    const elements = Array.from({ length: 200 }, (_, i) => `e${i}`);
    const r = await add(0, "seen", elements, ObjectType.GBF, params({ capacity: 1000n, falsePositiveRate: 0.01 }));
    assert.equal(r.added, 200);
    const again = await add(0, "seen", ["e0", "new-one"]);
    assert.equal(again.added, 1, "e0 was already (maybe) present; the key keeps its type without --type");
    for (const i of [0, 1, 2]) {
      const q = await eventually(`node ${i} has the filter`, () => query(i, "seen", ["e0", "e199", "new-one"]), (q) => q.presence.every((p) => p.present), 15_000);
      assert.equal(q.type, ObjectType.GBF);
      assert.equal(q.probabilistic, true);
      assert.ok(q.filter !== undefined);
      assert.ok(Math.abs(Number(q.filter.estimatedCount) - 201) < 20, `estimated count ${q.filter.estimatedCount}`);
      assert.ok(q.filter.estimatedFalsePositiveRate > 0 && q.filter.estimatedFalsePositiveRate < 0.01);
      assert.ok(JSON.parse(q.filter.parameters).bits > 0);
    }
    // Elements never added: absent, but for false positives near the estimated rate.
    const probes = Array.from({ length: 2000 }, (_, i) => `never-${i}`);
    const q = await query(1, "seen", probes);
    const fp = q.presence.filter((p) => p.present).length / probes.length;
    assert.ok(fp < 0.02, `false-positive rate ${fp}`);
  });

  it("refuses what a type lacks: Remove on a GBF, listing a filter, another type on the key, a counter via Add", async () => {
    await add(0, "grow", ["x"], ObjectType.GBF);
    await expectRefused(remove(0, "grow", ["x"]), status.FAILED_PRECONDITION, /GBF, which cannot remove.*ORCF/);
    await expectRefused(query(0, "grow", []), status.FAILED_PRECONDITION, /cannot list its elements/);
    await expectRefused(add(0, "grow", ["y"], ObjectType.ORCF), status.FAILED_PRECONDITION, /key "grow" is of type GBF, not ORCF; use another key/);
    await expectRefused(add(0, "grow", ["y"], ObjectType.COUNTER), status.FAILED_PRECONDITION, /GBF/);
    await expectRefused(add(0, "fresh-counter", ["y"], ObjectType.COUNTER), status.FAILED_PRECONDITION, /created by Increment/);
    await expectRefused(add(0, "huge", ["y"], ObjectType.GBF, params({ capacity: 100_000_000n })), status.RESOURCE_EXHAUSTED, /a GBF of \d+ bytes; the limit is 16777216 \(--max-filter-bytes\)/);
    await expectRefused(add(0, "huge", ["y"], ObjectType.GBF, params({ capacity: 10_000_000_000n })), status.INVALID_ARGUMENT, /above the 2\^32 a GBF can have/);
    await expectRefused(add(0, "bad", ["y"], ObjectType.GBF, params({ falsePositiveRate: 0.7 })), status.INVALID_ARGUMENT, /false_positive_rate/);
    // Rates a type cannot reach are refused, not built at a higher rate than asked.
    await expectRefused(add(0, "bad", ["y"], ObjectType.GCF, params({ falsePositiveRate: 1e-12 })), status.INVALID_ARGUMENT, /needs 43-bit fingerprints with buckets of 4; a cuckoo filter's are at most 32 bits/);
    await expectRefused(add(0, "bad", ["y"], ObjectType.SCORCF, params({ falsePositiveRate: 1e-9 })), status.INVALID_ARGUMENT, /needs 34-bit fingerprints/);
    await expectRefused(add(0, "bad", ["y"], ObjectType.GBF, params({ falsePositiveRate: 1e-30, capacity: 10n })), status.INVALID_ARGUMENT, /needs 100 hash functions; a Bloom filter has at most 64/);
    // A type the protocol does not have is a bad argument, not a state of the key.
    await expectRefused(add(0, "bad", ["y"], 99 as ObjectType), status.INVALID_ARGUMENT, /type 99 is not an object type: leave it unset \(AWSET\), or name one of AWSET, AWSET_PROB, GBF/);
    assert.equal((await query(0, "bad", ["y"])).presence[0]!.present, false, "nothing was created");
    assert.deepEqual((await query(0, "grow", ["x"])).presence.map((p) => p.present), [true], "the key is unchanged");
  });

  it("an ORCF removes observed adds, on every node", async () => {
    await add(0, "o", ["a", "b"], ObjectType.ORCF, params({ capacity: 100n }));
    await eventually("node 2 has a", () => query(2, "o", ["a"]), (q) => q.presence[0]!.present, 15_000);
    const r = await remove(2, "o", ["a"]);
    assert.equal(r.removed, 1);
    for (const i of [0, 1, 2]) {
      await eventually(`a removed on node ${i}`, () => query(i, "o", ["a", "b"]), (q) => !q.presence[0]!.present && q.presence[1]!.present, 15_000);
    }
  });

  it("an ORCF counts copies, as the README says: an element added twice needs two Removes, the first answering removed 0", async () => {
    await add(0, "twice", ["x", "y"], ObjectType.ORCF, params({ capacity: 100n }));
    await add(0, "twice", ["x"]); // a retried Add stores another copy
    const first = await remove(0, "twice", ["x"]);
    assert.equal(first.removed, 0, "one copy of x is left");
    assert.equal((await query(0, "twice", ["x"])).presence[0]!.present, true);
    const second = await remove(0, "twice", ["x"]);
    assert.equal(second.removed, 1);
    const q = await query(0, "twice", ["x", "y"]);
    assert.deepEqual(q.presence.map((p) => p.present), [false, true]);
  });

  it("a filter large enough to be kept as a base and a log takes deltas from every node", async () => {
    for (let i = 0; i < 12_000; i += 1000) {
      await add(0, "big", Array.from({ length: 1000 }, (_, j) => `big-${i + j}`), ObjectType.ORCF, params({ capacity: 40_000n }));
    }
    await eventually("node 2 has the large ORCF", () => query(2, "big", ["big-0", "big-11999"]), (q) => q.presence.every((p) => p.present), 30_000);
    for (let i = 0; i < 10; i++) await add(2, "big", [`from-2-${i}`]);
    await remove(2, "big", ["big-7"]);
    for (const i of [0, 1]) {
      await eventually(`node ${i} has node 2's changes`, () => query(i, "big", ["from-2-0", "from-2-9", "big-8"]), (q) => q.presence.every((p) => p.present), 30_000);
    }
  });

  it("a probabilistic set large enough to be kept as a base and a log takes adds and removes from every node", async () => {
    for (let i = 0; i < 12_000; i += 1000) await add(0, "bigp", Array.from({ length: 1000 }, (_, j) => `bigp-${i + j}`), ObjectType.AWSET_PROB);
    await eventually("node 2 has the large AWSET_PROB", () => query(2, "bigp", ["bigp-0", "bigp-11999"]), (q) => q.presence.every((p) => p.present), 30_000);
    for (let i = 0; i < 10; i++) await add(2, "bigp", [`from-2-${i}`]);
    await remove(2, "bigp", ["bigp-7"]);
    for (const i of [0, 1]) {
      await eventually(`node ${i} has node 2's changes`, () => query(i, "bigp", ["from-2-0", "from-2-9", "bigp-8", "bigp-7"]), (q) => q.presence.map((p) => p.present).join() === "true,true,true,false", 30_000);
    }
  });

  it("a full cuckoo filter answers RESOURCE_EXHAUSTED and changes nothing; its scalable series grows instead", async () => {
    const many = Array.from({ length: 400 }, (_, i) => `v${i}`);
    await add(0, "small", ["first"], ObjectType.GCF, params({ capacity: 8n, bucketSize: 2 }));
    await expectRefused(add(0, "small", many), status.RESOURCE_EXHAUSTED, /full.*larger capacity.*ScGCF/);
    const q = await query(0, "small", ["first", "v399"]);
    assert.deepEqual(q.presence.map((p) => p.present), [true, false], "nothing of the refused Add was kept");
    assert.equal(Number(q.filter!.estimatedCount), 1);
    const s = await add(0, "series", many, ObjectType.SCGCF, params({ capacity: 64n }));
    assert.equal(s.added, 400);
    const qs = await query(0, "series", ["v0", "v399"]);
    assert.ok(qs.presence.every((p) => p.present));
    assert.ok(JSON.parse(qs.filter!.parameters).capacity === 64);
  });

  it("Merge joins an encoded filter of the key's parameters into it, and keeps one of other parameters beside it (up to 4)", async () => {
    await add(0, "m", ["local"], ObjectType.GBF, params({ bits: 4096n, hashes: 4 }));
    const same = Gbf.empty(gbfParams(4096, 4));
    same.addInPlace(b("merged"));
    const r = await c.replica(1, (c1) => call(c1, c1.merge, { key: "m", state: { type: ObjectType.GBF, payload: Buffer.from(GbfLattice.encode(same)) } }));
    assert.equal(r.changed, true);
    for (const i of [0, 1, 2]) {
      await eventually(`node ${i} has both`, () => query(i, "m", ["local", "merged"]), (q) => q.presence.every((p) => p.present), 15_000);
    }
    // A filter of other parameters (another cluster's copy of the key, say) is kept as a sibling:
    // the key answers for both, and later adds go to the larger.
    const mergeOther = (bits: number, element: string) => {
      const other = Gbf.empty(gbfParams(bits, 4));
      other.addInPlace(b(element));
      return c.replica(0, (c0) => call(c0, c0.merge, { key: "m", state: { type: ObjectType.GBF, payload: Buffer.from(GbfLattice.encode(other)) } }));
    };
    assert.equal((await mergeOther(8192, "x")).changed, true);
    await eventually("node 2 answers for both filters", () => query(2, "m", ["local", "merged", "x"]), (q) => q.presence.every((p) => p.present), 15_000);
    const shape = JSON.parse((await query(2, "m", ["x"])).filter!.parameters);
    assert.deepEqual([shape.bits, shape.concurrentlyCreated.map((p: { bits: number }) => p.bits)], [8192, [4096]]);
    assert.equal((await mergeOther(16384, "y")).changed, true);
    assert.equal((await mergeOther(32768, "z")).changed, true);
    await expectRefused(mergeOther(65536, "w"), status.FAILED_PRECONDITION, /a GBF key created with 5 different parameter sets at once; a key keeps at most 4; nothing was changed/);
    assert.deepEqual((await query(0, "m", ["local", "x", "y", "z"])).presence.map((p) => p.present), [true, true, true, true]);
  });
});

describe("AWSET_PROB keys on a 3-node cluster", () => {
  it("add, list, scan, remove and merge, replicated to every node", async () => {
    const r = await add(0, "prob", ["apple", "pear", "kiwi"], ObjectType.AWSET_PROB);
    assert.equal(r.added, 3);
    const list = (i: number) => c.replica(i, (c1) => call(c1, c1.query, { key: "prob", elements: [], texts: [], pageSize: 2, pageToken: Buffer.alloc(0), withText: true }));
    for (const i of [0, 1, 2]) {
      const q = await eventually(`node ${i} lists prob`, () => list(i), (q) => q.size === 3n, 15_000);
      assert.equal(q.type, ObjectType.AWSET_PROB);
      assert.deepEqual(q.members.map((m) => m.text), ["apple", "kiwi"], "first page of 2, in element order");
      assert.ok(q.nextPageToken.length > 0);
      assert.ok(q.filter !== undefined && JSON.parse(q.filter.parameters).k > 0);
    }
    // A context cannot name its anonymous adds: refused, nothing removed.
    const withContext = c.replica(1, (c1) => call(c1, c1.remove, { key: "prob", elements: [Buffer.from("pear")], texts: [], context: { vv: [{ replica: "n1", counter: 1n }], cloud: [] } }));
    await expectRefused(withContext, status.INVALID_ARGUMENT, /AWSET_PROB, whose removes take no context/);
    const removed = await remove(1, "prob", ["pear"]);
    assert.equal(removed.removed, 1);
    for (const i of [0, 1, 2]) await eventually(`pear gone on node ${i}`, () => query(i, "prob", ["pear", "apple"]), (q) => !q.presence[0]!.present && q.presence[1]!.present, 15_000);
    // Scan streams the members like a set's.
    const scanned: string[] = [];
    await c.replica(2, async (c2) => {
      for await (const ch of c2.scan({ key: "prob", chunkSize: 1, startAfter: Buffer.alloc(0), withText: true }) as AsyncIterable<{ members: Array<{ text: string }> }>) scanned.push(...ch.members.map((m) => m.text));
    });
    assert.deepEqual(scanned, ["apple", "kiwi"]);
    // Merge joins a state made elsewhere (another cluster, an offline client) with its own random dot.
    const outside = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
    outside.joinInPlace(outside.addDelta(b("plum"), 0x1234_5678_9abc_def0n));
    const m = await c.replica(0, (c0) => call(c0, c0.merge, { key: "prob", state: { type: ObjectType.AWSET_PROB, payload: Buffer.from(AWSetProbLattice.encode(outside)) } }));
    assert.equal(m.changed, true);
    assert.equal(m.size, 3n, "the members after the merge: apple, kiwi, plum");
    for (const i of [0, 1, 2]) await eventually(`plum on node ${i}`, () => query(i, "prob", ["plum", "apple"]), (q) => q.presence.every((p) => p.present), 15_000);
  });

  it("a key's first Add chooses its tombstone filter (strategy, error, level); every node reports the same shape", async () => {
    const p = params({ capacity: 1000n, falsePositiveRate: 0.001, level: 3, unionStrategy: UnionStrategy.UNION_STRATEGY_ACTIVE_SLICES });
    await add(1, "prob-shaped", ["a", "b"], ObjectType.AWSET_PROB, p);
    await eventually("node 2 has the key", () => query(2, "prob-shaped", ["a"]), (q) => q.presence[0]!.present, 15_000);
    // A later Add naming other parameters keeps the key's (as for the filter types).
    await add(2, "prob-shaped", ["c"], ObjectType.AWSET_PROB, params({ unionStrategy: UnionStrategy.UNION_STRATEGY_WHOLE_FILTER }));
    await eventually("node 0 has every add", () => query(0, "prob-shaped", ["a", "b", "c"]), (q) => q.presence.every((x) => x.present), 15_000);
    assert.equal((await remove(0, "prob-shaped", ["a"])).removed, 1);
    const want = apbfParamsFor(3, 1000, 3, 1); // error 3 (0.001), capacity 1000, level 3, Active Slices
    for (const i of [0, 1, 2]) {
      const q = await eventually(`node ${i} converged`, () => query(i, "prob-shaped", ["a", "b", "c"]), (q) => !q.presence[0]!.present && q.presence[1]!.present && q.presence[2]!.present, 15_000);
      const shape = JSON.parse(q.filter!.parameters);
      assert.deepEqual([shape.k, shape.l, shape.m, shape.strategy], [want.k, want.l, want.m, "ActiveSlices"], `node ${i}`);
    }
    await expectRefused(add(0, "prob-bad", ["x"], ObjectType.AWSET_PROB, params({ level: 9 })), status.INVALID_ARGUMENT, /level 9/);
    await expectRefused(add(0, "prob-bad", ["x"], ObjectType.AWSET_PROB, params({ ageSlices: 10 })), status.INVALID_ARGUMENT, /needs hashes/);
  });

  it("two nodes creating one key at once with different filters converge on one filter, keeping both adds", async () => {
    await Promise.all([
      add(0, "prob-race", ["x"], ObjectType.AWSET_PROB, params({ unionStrategy: UnionStrategy.UNION_STRATEGY_WHOLE_FILTER })),
      add(1, "prob-race", ["y"], ObjectType.AWSET_PROB, params({ falsePositiveRate: 0.1, level: 2 })),
    ]);
    for (const i of [0, 1, 2]) await eventually(`node ${i} has both`, () => query(i, "prob-race", ["x", "y"]), (q) => q.presence.every((x) => x.present), 15_000);
    await eventually("one filter shape everywhere", async () => Promise.all([0, 1, 2].map(async (i) => (await query(i, "prob-race", [])).filter!.parameters)), (ps) => new Set(ps).size === 1, 15_000);
  });

  it("the CLI creates a key with --strategy and --level and shows its filter", async () => {
    const add = await runCli(["add", "prob-cli", "x", "y", "--type", "awset-prob", "--strategy", "whole-filter", "--level", "2", "--fpr", "0.1", "--addr", c.addresses[0]!]);
    assert.equal(add.code, 0, add.stderr);
    const q = await runCli(["query", "prob-cli", "--json", "--addr", c.addresses[0]!]);
    const shown = JSON.parse(q.stdout);
    assert.deepEqual([shown.filter.parameters.k, shown.filter.parameters.l, shown.filter.parameters.strategy], [6, 14, "WholeFilter"]);
    const human = await runCli(["query", "prob-cli", "--addr", c.addresses[0]!]);
    assert.match(human.stdout, /prob-cli \(AWSET_PROB, 2 member\(s\), tombstone filter .*"WholeFilter"/);
    const bad = await runCli(["add", "prob-cli2", "x", "--type", "awset-prob", "--strategy", "newest", "--addr", c.addresses[0]!]);
    assert.match(bad.stderr, /--strategy newest: one of whole-filter, active-slices, current-generation/);
  });
});

// Full-state gossip ships a key stored whole as its stored body (no decode, no encode at the
// sender): the receiver must still read the sender's exact state.
describe("keys stored whole under full-state gossip", () => {
  const fsDir = mkdtempSync(join(tmpdir(), "deltaset-filters-state-"));
  const fc2 = new TestCluster(fsDir, [1, 2].map((i) => `127.0.0.18${i}:778${i}`), ["--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--gossip-interval-ms", "100", "--gossip-algorithm", "alg1", "--gossip-choose", "state"], "s");
  before(() => fc2.startAll());
  after(async () => {
    await fc2.close();
    rmSync(fsDir, { recursive: true, force: true });
  });
  const q = (i: number, key: string, elements: string[]) =>
    fc2.replica(i, (r) => call(r, r.query, { key, elements: elements.map(b), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));

  it("an ORCF's adds and removes and an AWSET_PROB's adds reach the other node", async () => {
    await fc2.replica(0, (r) => call(r, r.add, { key: "o", elements: ["a", "b", "c"].map(b), texts: [], type: ObjectType.ORCF, params: params({ capacity: 1000n }) }));
    await fc2.replica(0, (r) => call(r, r.remove, { key: "o", elements: [b("a")], texts: [] }));
    await fc2.replica(1, (r) => call(r, r.add, { key: "p", elements: [b("x"), b("y")], texts: [], type: ObjectType.AWSET_PROB }));
    await eventually("node 1 reads the ORCF", () => q(1, "o", ["a", "b", "c"]), (r) => r.presence.map((p) => p.present).join() === "false,true,true", 15_000);
    await eventually("node 0 reads the AWSET_PROB", () => q(0, "p", ["x", "y", "z"]), (r) => r.presence.map((p) => p.present).join() === "true,true,false", 15_000);
  });

  it("a filter large enough to be kept as a base and a log reaches the other node, with the changes after it", async () => {
    const big = (from: number) => Array.from({ length: 1000 }, (_, i) => b(`big-${from + i}`));
    for (let i = 0; i < 12_000; i += 1000) {
      await fc2.replica(0, (r) => call(r, r.add, { key: "big", elements: big(i), texts: [], type: ObjectType.ORCF, params: params({ capacity: 40_000n }) }, { timeoutMs: 30_000 }));
    }
    await eventually("node 1 reads the large ORCF", () => q(1, "big", ["big-0", "big-5999", "big-11999"]), (r) => r.presence.every((p) => p.present), 30_000);
    // Node 1 now holds the key: its adds join into its copy and travel back.
    for (let i = 0; i < 20; i++) await fc2.replica(1, (r) => call(r, r.add, { key: "big", elements: [b(`late-${i}`)], texts: [] }));
    await eventually("node 0 reads node 1's adds", () => q(0, "big", ["late-0", "late-19", "big-11999"]), (r) => r.presence.every((p) => p.present), 30_000);
  });

  it("a probabilistic set kept as a base and a log reaches the other node, with the adds and removes after it", async () => {
    const big = (from: number) => Array.from({ length: 1000 }, (_, i) => b(`bigp-${from + i}`));
    for (let i = 0; i < 12_000; i += 1000) {
      await fc2.replica(0, (r) => call(r, r.add, { key: "bigp", elements: big(i), texts: [], type: ObjectType.AWSET_PROB }, { timeoutMs: 30_000 }));
    }
    await eventually("node 1 reads the large AWSET_PROB", () => q(1, "bigp", ["bigp-0", "bigp-5999", "bigp-11999"]), (r) => r.presence.every((p) => p.present), 30_000);
    for (let i = 0; i < 20; i++) await fc2.replica(1, (r) => call(r, r.add, { key: "bigp", elements: [b(`late-${i}`)], texts: [] }));
    await fc2.replica(1, (r) => call(r, r.remove, { key: "bigp", elements: [b("bigp-3")], texts: [] }));
    await eventually("node 0 reads node 1's changes", () => q(0, "bigp", ["late-0", "late-19", "bigp-11999", "bigp-3"]), (r) => r.presence.map((p) => p.present).join() === "true,true,true,false", 30_000);
  });
});
