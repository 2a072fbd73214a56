// A filter key's retry filter received from a peer (Merge, gossip, a full-state stream) is taken as
// a counter's is (store/received-retry-ids.ts): a filter dated beyond the clock-skew bound from this
// node's clock is reported, one within it is not, and epochs this node has already forgotten are
// not joined back in; the filter's elements join whatever the clocks.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { CausalContext, type ClientOperations, type FilterSiblings, ObjectType, type Orcf, type SkewReport, operationsFor, retryFilterParams, seededRandom } from "../../services/crdt/index.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-filter-retry-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(root, `d${n++}`);
const P = 10_000;
const params = retryFilterParams({ idsPerPeriod: 100, falsePositiveRate: 0.001, periodMs: P, pastEpochs: 2 });
const T0 = 1_700_000_000_000;
const ops = operationsFor(ObjectType.ORCF)! as ClientOperations<FilterSiblings<Orcf>>;

function open(dir: string, clock: () => number, onSkew?: (r: SkewReport) => void): Promise<Store> {
  return Store.open({ dir, partitions: 8, partitionOf: () => 3, sync: "fsync", clock, clockSkewBoundMs: 1000, onClockSkew: (e) => onSkew?.(e.report) });
}

/** A peer's ORCF key after an Add of element with request id at the peer's clock now (each from a peer of its own). */
function peerState(element: string, id: string, now: number): FilterSiblings<Orcf> {
  const s = ops.create({ capacity: 100 });
  const env = { replica: `peer-${id}`, random: seededRandom(1), randomId: () => 1n };
  assert.equal(ops.addOnce!(s, [Buffer.from(element)], env, { id, now, params, explicit: false }).duplicate, false);
  return s;
}

const present = async (s: Store, key: string, element: string) => {
  const w = await s.wholeState(key);
  return ops.contains(w!.state as FilterSiblings<Orcf>, [Buffer.from(element)])[0];
};

describe("a filter key's received retry filter in the store", () => {
  it("reports a filter whose sender's clock is beyond the bound (Merge and a full-state chunk), and not one within it", async () => {
    const reports: SkewReport[] = [];
    const a = await open(fresh(), () => T0, (r) => reports.push(r));
    await a.merge("k", ObjectType.ORCF, peerState("near", "n", T0 + 500));
    assert.equal(reports.length, 0);
    await a.merge("k", ObjectType.ORCF, peerState("ahead", "f", T0 + 5 * P));
    assert.equal(reports.length, 1);
    assert.equal(reports[0]!.direction, "ahead");
    assert.ok(reports[0]!.minSkewMs > 1000);
    assert.deepEqual(a.stats().clockSkewReports, { ahead: 1, behind: 0 });
    assert.equal(await present(a, "k", "ahead"), true, "the filter part joins whatever the clocks");

    // A full-state stream's chunk of another key, from a clock behind ours.
    const empty = Buffer.alloc(0);
    await a.applyChunk("c", { type: ObjectType.ORCF, senderCtx: new CausalContext(), rangeStart: empty, rangeEnd: empty, rangeOpen: true, slice: peerState("late", "b", T0 - 2 * P) });
    assert.deepEqual(a.stats().clockSkewReports, { ahead: 1, behind: 1 });
    assert.equal(await present(a, "c", "late"), true);
    await a.close();
  });

  it("does not join back epochs this node has forgotten, nor report them", async () => {
    const a = await open(fresh(), () => T0 + 10 * P);
    await a.merge("k", ObjectType.ORCF, peerState("old", "o", T0));
    assert.equal(await present(a, "k", "old"), true);
    const w = (await a.wholeState("k"))!.state as FilterSiblings<Orcf>;
    assert.equal(w.retry.epochs.size, 0);
    assert.deepEqual(a.stats().clockSkewReports, { ahead: 0, behind: 0 });
    await a.close();
  });
});
