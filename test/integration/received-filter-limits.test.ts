// --max-filter-bytes bounds what a node takes from outside as well as what an Add creates: a Merge,
// an import or a peer's gossip carrying a filter larger than the limit is refused before anything
// of that size is allocated. Filters encode sparsely, so a few bytes may declare hundreds of
// megabytes (a GBF of 2^32 bits, a GCF of 2^28 buckets), and a counter's retry filter allocates
// each epoch it lists whole: without the bound, a Merge of some kilobytes took gigabytes.
// Two real nodes with different limits: the one with the smaller skips the other's large key,
// counts it, and keeps taking the rest of its gossip.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { sumSamples } from "../../services/chaos/eval/counters.ts";
import { call } from "../../services/client/rpc.ts";
import { writeVarint } from "../../services/common/varint.ts";
import {
  AWSetProb,
  AWSetProbLattice,
  CounterLattice,
  Gbf,
  GbfLattice,
  Gcf,
  GcfLattice,
  HASH_FAMILY,
  ObjectType,
  PNCounter,
  ScGbf,
  ScGbfLattice,
  UnionStrategy,
  cuckooParams,
  gbfParams,
  gbfSubParams,
  seriesParams,
} from "../../services/crdt/index.ts";
import { CounterState } from "../../services/gen/deltaset/v1/types.ts";
import { eventually } from "../helpers/eventually.ts";
import { expectRefused, statusOf } from "../helpers/grpc-status.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { filterParams } from "../helpers/filter-calls.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-filter-limits-"));
const HOSTS = ["127.0.10.1", "127.0.10.2"];
const METRICS = HOSTS.map((h) => `${h}:7942`);
const LIMITS = [4 * 1024 * 1024, 1024 * 1024];
const c = new TestCluster(dir, HOSTS.map((h) => `${h}:7941`), ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--log-level", "error"], "fl");
// Node 1 also takes states of at most 4 MiB in all (--max-state-bytes).
before(() => Promise.all([0, 1].map((i) => c.start(i, ["--max-filter-bytes", String(LIMITS[i]), "--metrics-listen", METRICS[i]!, ...(i === 1 ? ["--max-state-bytes", String(4 * LIMITS[1]!)] : [])]))));
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const b = (s: string) => Buffer.from(s);
const merge = (i: number, key: string, type: ObjectType, payload: Uint8Array) =>
  c.replica(i, (r) => call(r, r.merge, { key, state: { type, payload: Buffer.from(payload) } }));
const query = (i: number, key: string, elements: string[]) =>
  c.replica(i, (r) => call(r, r.query, { key, elements: elements.map(b), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));
const params = filterParams;
const oversized = async (i: number) => sumSamples(await (await fetch(`http://${METRICS[i]}/metrics`)).text(), "deltaset_gossip_transport_events_total", { event: "oversized_states" });

/** A retry filter in its wire form: the given parameters and one set bit in each of `epochs` epochs. */
function retryFilterBytes(m: number, pastEpochs: number, epochs: number): Uint8Array {
  const out = new Uint8Array(64 + epochs * 4);
  let at = 0;
  out[at++] = 1; // codec version
  out[at++] = 1; // parameters follow
  for (const v of [HASH_FAMILY, m, 1, 60_000, pastEpochs, epochs]) at = writeVarint(out, at, v);
  for (let e = 0; e < epochs; e++) {
    at = writeVarint(out, at, e === 0 ? 1000 : 0); // the first epoch, then gaps of none
    out[at++] = 0; // sparse
    at = writeVarint(out, at, 1); // one bit...
    at = writeVarint(out, at, 0); // ...at index 0
  }
  return out.subarray(0, at);
}

/** A counter's state whose retry filter is `filter` (its canonical encoding, as Merge takes it). */
function counterWith(filter: Uint8Array): Uint8Array {
  const msg = CounterState.decode(CounterLattice.encode(PNCounter.bottom()));
  return CounterState.encode({ ...msg, retryFilter: Buffer.from(filter) }).finish();
}

describe("--max-filter-bytes bounds received states", () => {
  it("Merge refuses filters above the limit (RESOURCE_EXHAUSTED), whatever few bytes declare them, and the node keeps serving", async () => {
    const gbf = Gbf.empty(gbfParams(2 ** 32 - 8, 1));
    gbf.addInPlace(b("x"));
    const gcf = Gcf.empty(cuckooParams(2 ** 28, 8));
    gcf.addInPlace(b("x"), Math.random);
    const series = ScGbf.empty(seriesParams(2_000_000, 0.01));
    series.addInPlace(b("x"));
    // Sub-filters are allocated as they fill: 20 of them, each within the filter limit, one bit
    // each (a few hundred bytes in all), declare some 8 MB together.
    const sp = seriesParams(200_000, 0.01);
    const manySubs = new ScGbf(sp, Array.from({ length: 20 }, (_, i) => Gbf.fromIndexes(gbfSubParams(sp, i), [i])));
    const prob = AWSetProb.bottom({ k: 8, l: 8, m: 1 << 20, strategy: UnionStrategy.WholeFilter });
    prob.joinInPlace(prob.addDelta(b("x"), 7n));
    const cases: Array<[string, ObjectType, Uint8Array, RegExp]> = [
      ["GBF of 2^32 bits", ObjectType.GBF, GbfLattice.encode(gbf), /a GBF of 536870911 bytes is larger than this node accepts \(1048576 bytes/],
      ["GCF of 2^28 buckets", ObjectType.GCF, GcfLattice.encode(gcf), /a GCF of 1073741824 bytes is larger than this node accepts/],
      ["series whose first sub-filter is 2.4 MB", ObjectType.SCGBF, ScGbfLattice.encode(series), /a ScGBF whose first sub-filter of \d+ bytes is larger/],
      ["series of 20 sub-filters", ObjectType.SCGBF, ScGbfLattice.encode(manySubs), /a ScGBF of 20 sub-filters of \d+ bytes is larger than this node accepts \(4194304 bytes; see --max-state-bytes\)/],
      ["awset-prob with a 2 MiB tombstone filter", ObjectType.AWSET_PROB, AWSetProbLattice.encode(prob), /an APBF of 2097152 bytes is larger/],
      // (4096 + 2) epochs of 2 MiB: 8.6 GB in 30 bytes.
      ["retry filter whose window is 8 GB", ObjectType.COUNTER, counterWith(retryFilterBytes(2 ** 24, 4096, 1)), /a retry filter of 8594128896 bytes is larger/],
      // A 384 KiB window (fine), listing 5000 epochs of 128 KiB each: 655 MB in 20 kB.
      ["retry filter listing 5000 epochs", ObjectType.COUNTER, counterWith(retryFilterBytes(2 ** 20, 1, 5000)), /a retry filter of 5000 epochs of 655360000 bytes is larger than this node accepts \(1048576 bytes/],
    ];
    for (const [what, type, payload, text] of cases) {
      assert.ok(payload.length < 32_000, `${what}: ${payload.length} bytes`);
      await expectRefused(merge(1, `big-${type}`, type, payload), status.RESOURCE_EXHAUSTED, text);
      const q = await query(1, `big-${type}`, ["x"]);
      assert.equal(q.presence[0]!.present, false, `${what}: nothing was stored`);
    }
    // The same kinds within the limit are taken.
    const small = Gbf.empty(gbfParams(8 * 1024 * 8, 3));
    small.addInPlace(b("x"));
    assert.equal((await merge(1, "small-gbf", ObjectType.GBF, GbfLattice.encode(small))).changed, true);
    assert.equal((await merge(1, "small-counter", ObjectType.COUNTER, counterWith(retryFilterBytes(2 ** 20, 1, 3)))).changed, true);
    assert.equal((await query(1, "small-gbf", ["x"])).presence[0]!.present, true);
    // An empty series makes a key with no filter yet: it answers absent (it answered INTERNAL).
    await merge(1, "empty-series", ObjectType.SCGBF, ScGbfLattice.encode(ScGbf.empty(seriesParams(100, 0.01))));
    assert.equal((await query(1, "empty-series", ["x"])).presence[0]!.present, false);
  });

  it("a node with a smaller limit skips a peer's larger filter key, counts it, and takes the rest of the peer's gossip", async () => {
    // 2 MiB: within node 0's 4 MiB, above node 1's 1 MiB.
    const r = await c.replica(0, (r0) => call(r0, r0.add, { key: "wide", elements: [b("w")], texts: [], type: ObjectType.GBF, params: params({ bits: BigInt(16 * 1024 * 1024), hashes: 3 }) }));
    assert.equal(r.added, 1);
    await c.replica(0, (r0) => call(r0, r0.add, { key: "after-wide", elements: [b("a")], texts: [] }));
    await eventually("node 1 has the set written after the wide filter", () => query(1, "after-wide", ["a"]), (q) => q.presence[0]!.present, 15_000);
    await eventually("node 1 counted the skipped key", () => oversized(1), (n) => n >= 1, 15_000);
    assert.equal((await query(1, "wide", ["w"])).presence[0]!.present, false, "node 1 holds nothing of the key it skipped");
    assert.equal(await oversized(0), 0);
  });

  it("an awset-prob set stops growing at --max-state-bytes (RESOURCE_EXHAUSTED), where its peers would stop taking it", async () => {
    const one = new TestCluster(dir, ["127.0.10.7:7941"], ["--log-level", "error", "--max-filter-bytes", String(256 * 1024), "--max-state-bytes", String(1024 * 1024)], "st");
    try {
      await one.start(0);
      const batch = (i: number) => Array.from({ length: 10 }, (_, j) => b(`${i}-${j}-`.padEnd(20_000, "x")));
      const addBatch = (i: number) => one.replica(0, (r) => call(r, r.add, { key: "grows", elements: batch(i), texts: [], type: ObjectType.AWSET_PROB }));
      let i = 0;
      while (i < 10) {
        const s = await statusOf(addBatch(i));
        if (s.code !== 0) {
          assert.equal(s.code, status.RESOURCE_EXHAUSTED, s.details);
          assert.match(s.details, /key "grows" \(AWSET_PROB\) holds about \d+ bytes; with these 200000 bytes of elements it would pass 1048576 \(--max-state-bytes\)/);
          break;
        }
        i++;
      }
      // 200 kB a batch against 1 MiB: the fifth or sixth is refused, and what came before stays.
      assert.ok(i >= 4 && i <= 5, `refused at batch ${i}`);
      const q = await one.replica(0, (r) => call(r, r.query, { key: "grows", elements: batch(0).slice(0, 1), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));
      assert.equal(q.presence[0]!.present, true);
      // An AWSET has no such bound.
      assert.equal((await one.replica(0, (r) => call(r, r.add, { key: "plain", elements: batch(0), texts: [] }))).added, 10);

      // A scalable filter grows a sub-filter each time one fills: not past the bound either. At a
      // rate of 1e-15 a sub-filter of 5000 elements takes some 45 kB, so about 20 of them reach 1 MiB.
      const series = (from: number) => Array.from({ length: 10_000 }, (_, j) => b(`s${from + j}`));
      let refused: { code: number; details: string } | undefined;
      for (let k = 0; k < 20 && refused === undefined; k++) {
        const s = await statusOf(one.replica(0, (r) => call(r, r.add, { key: "series", elements: series(k * 10_000), texts: [], type: ObjectType.SCGBF, params: params({ capacity: 5000n, falsePositiveRate: 1e-15 }) })));
        if (s.code !== 0) refused = s;
      }
      assert.ok(refused !== undefined, "the series grew past 1 MiB");
      assert.equal(refused.code, status.RESOURCE_EXHAUSTED, refused.details);
      assert.match(refused.details, /key "series" \(SCGBF\) would take \d+ bytes with another sub-filter, past 1048576 \(--max-state-bytes\)/);
      assert.equal((await one.replica(0, (r) => call(r, r.query, { key: "series", elements: [b("s0")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }))).presence[0]!.present, true);
    } finally {
      await one.close();
    }
  });
});
