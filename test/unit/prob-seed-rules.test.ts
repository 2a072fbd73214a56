// The seed's rules for the probabilistic half (test/bench/prob-seed-rules.ts): generations driven by
// the fill limits of Eq. 4 after inserts and unions, the three union strategies' merge zones
// (Current Generation leaves the local current generation alone), and the tombstone join.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Apbf } from "../../services/crdt/apbf.js";
import { UnionStrategy, paramsFor } from "../../services/crdt/apbf-params.js";
import { dotBytes } from "../../services/crdt/awset-prob-state.js";
import { elementKey } from "../../services/crdt/awset.js";
import { SeedProbHalf, fillLimit, neededShifts, seedInsert, seedUnion } from "../bench/prob-seed-rules.js";
import { runSim, seedConfig } from "../bench/prob-sim.js";

const STRATEGIES = [UnionStrategy.WholeFilter, UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration];
const item = (n: number) => dotBytes(BigInt(n) * 0x9e3779b97f4a7c15n % (1n << 64n));
const key = (n: number) => elementKey(dotBytes(BigInt(n)));

describe("seed rules: fill-driven generations", () => {
  for (const rule of ["fill", "insertions"] as const) {
    it(`an insert shifts exactly when slice 0 passes its limit, and active slices stay within theirs (${rule})`, () => {
      const f = Apbf.create(paramsFor(2, 1024, 5, UnionStrategy.CurrentGeneration));
      let shifts = 0;
      for (let n = 0; n < 3000; n++) {
        const before = Array.from({ length: f.k }, (_, i) => f.setBits(i));
        const s = seedInsert(f, item(n), rule);
        shifts += s;
        assert.equal(neededShifts(f, rule), 0, `after insert ${n}`);
        // An insert sets at most one bit per slice: it shifts only if some slice was at its limit.
        const atLimit = before.some((b, i) => b + 1 > fillLimit(f, i, rule));
        if (s > 0) assert.ok(atLimit, `shift at insert ${n} with no slice at its limit`);
        else assert.ok([0, 1].includes(f.setBits(0) - before[0]!), `insert ${n} set more than one bit of slice 0`);
      }
      // Generations of about the m/2k bits slice 0 may hold (collisions and the other slices'
      // limits make them a little shorter or longer).
      const perGeneration = 3000 / shifts;
      assert.ok(perGeneration > fillLimit(f, 0, "fill") * 0.6 && perGeneration < fillLimit(f, 0, "fill") * 1.4, `${perGeneration} insertions per generation`);
    });
  }

  it("the insertion-count reading is looser than the fill reading above slice 0", () => {
    const f = Apbf.create(paramsFor(2, 4096, 5, UnionStrategy.CurrentGeneration));
    assert.ok(Math.abs(fillLimit(f, 0, "insertions") - fillLimit(f, 0, "fill")) < 2);
    assert.ok(fillLimit(f, f.k - 1, "insertions") > fillLimit(f, f.k - 1, "fill") * 1.3);
  });
});

describe("seed rules: unions", () => {
  for (const strategy of [UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration]) {
    it(`the remote's current generation becomes present locally whatever the alignment (strategy ${strategy})`, () => {
      const p = paramsFor(2, 1024, 5, strategy);
      const local = Apbf.create(p);
      const remote = Apbf.create(p);
      for (let n = 0; n < 200; n++) seedInsert(local, item(n));
      for (let n = 1000; n < 1400; n++) seedInsert(remote, item(n));
      assert.notEqual(local.base, remote.base);
      seedUnion(local, remote);
      assert.equal(neededShifts(local), 0);
      assert.ok(local.query(item(1399)));
    });
  }

  it("Whole Filter: aligned filters that do not shift end with both sides' items", () => {
    const p = paramsFor(2, 1024, 5, UnionStrategy.WholeFilter);
    const local = Apbf.create(p);
    const remote = Apbf.create(p);
    for (let n = 0; n < 4; n++) seedInsert(local, item(n));
    for (let n = 100; n < 104; n++) seedInsert(remote, item(n));
    assert.equal(seedUnion(local, remote), 0);
    for (const n of [0, 1, 2, 3, 100, 101, 102, 103]) assert.ok(local.query(item(n)), `item ${n}`);
  });

  it("Current Generation with 'passOn' ORs the remote's current generation into the local copy as well", () => {
    const p = paramsFor(2, 1024, 5, UnionStrategy.CurrentGeneration);
    const local = Apbf.create(p);
    const remote = Apbf.create(p);
    seedInsert(remote, item(2));
    seedUnion(local, remote, "fill", "passOn");
    // Aligned fresh filters: the copies match slot for slot.
    assert.deepEqual(local.shadows, remote.shadows);
    const next = Apbf.create(p);
    seedUnion(next, local, "fill", "local");
    assert.ok(next.query(item(2)), "passed on from local's copy");
  });

  it("Current Generation ORs the remote's current generation into the local slices only", () => {
    const p = paramsFor(2, 1024, 5, UnionStrategy.CurrentGeneration);
    const local = Apbf.create(p);
    const remote = Apbf.create(p);
    seedInsert(local, item(1));
    seedInsert(remote, item(2));
    const shadowsBefore = local.shadows.slice();
    const bitsBefore = local.bits.slice();
    seedUnion(local, remote);
    assert.deepEqual(local.shadows, shadowsBefore);
    assert.notDeepEqual(local.bits, bitsBefore);
    assert.ok(local.query(item(2)));
  });

  it("an insertion writes every bit it maps to into the current generation ('all'), or only the bits it newly sets ('newBits')", () => {
    const p = paramsFor(2, 1024, 5, UnionStrategy.CurrentGeneration);
    const shadowHas = (f: Apbf, n: number) =>
      Array.from({ length: f.k }, (_, i) => {
        const pos = f.position(item(n), f.hashIndex[f.slot(i)]!);
        return (f.shadows[i * f.sliceBytes + (pos >>> 3)]! & (1 << (pos & 7))) !== 0;
      });
    for (const rule of ["all", "newBits"] as const) {
      const f = Apbf.create(p);
      // Bits of item 7 already set in every active slice by an older generation (a forced shift
      // clears the current generation and moves them up; re-inserting then finds them set).
      seedInsert(f, item(7), "fill", rule);
      f.shift(1);
      seedInsert(f, item(7), "fill", rule);
      const has = shadowHas(f, 7);
      // Logical 0 is the new, empty slice: the insertion sets that bit anew under both rules.
      assert.equal(has[0], true, rule);
      // Logical 1..k-1 held the bits already (the old 0..k-2): only 'all' copies them.
      assert.deepEqual(has.slice(1), Array(f.k - 1).fill(rule === "all"), rule);
      // Either way the slices themselves hold the item.
      assert.ok(f.query(item(7)));
    }
  });

  it("under 'newBits' a remote's current generation misses bits an older generation set, so a union may not carry an item", () => {
    const p = paramsFor(2, 1024, 5, UnionStrategy.CurrentGeneration);
    const carried = (rule: "all" | "newBits") => {
      const remote = Apbf.create(p);
      seedInsert(remote, item(9), "fill", rule);
      remote.shift(1);
      seedInsert(remote, item(9), "fill", rule);
      const local = Apbf.create(p);
      seedUnion(local, remote);
      return local.query(item(9));
    };
    assert.equal(carried("all"), true);
    assert.equal(carried("newBits"), false);
  });

  it("Active Slices leaves the local older slices alone; Whole Filter ORs every slot", () => {
    for (const strategy of [UnionStrategy.ActiveSlices, UnionStrategy.WholeFilter]) {
      const p = paramsFor(2, 1024, 5, strategy);
      const local = Apbf.create(p);
      const remote = Apbf.create(p);
      for (let n = 0; n < 2000; n++) seedInsert(remote, item(n)); // remote bits in older slices too
      const older = (f: Apbf) => f.bits.slice(f.slot(f.k) * f.sliceBytes, f.slot(f.k) * f.sliceBytes + f.sliceBytes);
      seedUnion(local, remote);
      const hasOld = older(local).some((b) => b !== 0);
      assert.equal(hasOld, strategy === UnionStrategy.WholeFilter, `strategy ${strategy}`);
    }
  });
});

describe("seed rules: the tombstone join", () => {
  const params = paramsFor(2, 1024, 5, UnionStrategy.CurrentGeneration);

  it("adopts the remote's dots unless the local tombstones report them, and drops what the remote removed", () => {
    const a = new SeedProbHalf(params);
    const b = new SeedProbHalf(params);
    a.add(key(1), 11n);
    a.add(key(2), 12n);
    b.join(a);
    assert.deepEqual([...b.values()].sort(), [key(1), key(2)].sort());
    b.remove(key(1));
    a.join(b);
    assert.deepEqual([...a.values()], [key(2)]);
    assert.ok(a.tombstones.query(dotBytes(11n)), "a dropped dot enters the local tombstones");
    // A stale third replica still holding dot 11 does not bring it back to a.
    const c = new SeedProbHalf(params);
    c.add(key(1), 11n);
    a.join(c);
    assert.ok(!a.hasValue(key(1)));
  });

  it("drops a dot the remote's tombstones report even if the remote holds it ('tombstone'), not under 'alg3'", () => {
    for (const rule of ["tombstone", "alg3"] as const) {
      const a = new SeedProbHalf(params, rule);
      const b = new SeedProbHalf(params, rule);
      a.add(key(1), 21n);
      b.join(a);
      seedInsert(b.tombstones, dotBytes(21n)); // b's filter now reports a dot b holds live (as a false positive would)
      a.join(b);
      assert.equal(a.hasValue(key(1)), rule === "alg3", rule);
    }
  });

  it("Current Generation passes a removal on one hop only: what a replica merged is not in its current generation", () => {
    const a = new SeedProbHalf(params);
    const b = new SeedProbHalf(params);
    const c = new SeedProbHalf(params);
    c.add(key(1), 41n); // c holds the value; b never did
    a.join(c);
    a.remove(key(1)); // the removal is in a's current generation
    b.join(a); // b merges a's current generation into its slices, not into its own current generation
    assert.ok(b.tombstones.query(dotBytes(41n)));
    c.join(b); // c asks b's filter, which reports it: the one hop works
    assert.ok(!c.hasValue(key(1)));
    const d = new SeedProbHalf(params);
    d.add(key(1), 41n); // a stale copy elsewhere
    const e = new SeedProbHalf(params);
    e.join(b); // e receives only b's current generation, which lacks the removal
    assert.ok(!e.tombstones.query(dotBytes(41n)));
    d.join(e);
    assert.ok(d.hasValue(key(1)), "the second hop does not carry the removal");
  });

  it("with 'passOn' a union writes the remote's copy into the local copy, so the second hop carries the removal too", () => {
    const passOn = (p: typeof params) => new SeedProbHalf(p, "tombstone", "fill", "all", "passOn");
    const a = passOn(params);
    const b = passOn(params);
    const c = passOn(params);
    c.add(key(1), 41n);
    a.join(c);
    a.remove(key(1));
    b.join(a); // b's copy now holds a's current generation as well as b's own insertions
    const e = passOn(params);
    e.join(b);
    assert.ok(e.tombstones.query(dotBytes(41n)), "the removal reached e through b's copy");
    const d = passOn(params);
    d.add(key(1), 41n); // a stale copy elsewhere
    d.join(e);
    assert.ok(!d.hasValue(key(1)), "the second hop carries the removal");
  });

  it("an add retires the value's old dots into the tombstones", () => {
    const a = new SeedProbHalf(params);
    a.add(key(1), 31n);
    a.add(key(1), 32n);
    assert.equal(a.size, 1);
    assert.ok(a.tombstones.query(dotBytes(31n)));
    assert.ok(!a.tombstones.query(dotBytes(32n)));
  });
});

describe("seed rules in the simulator", () => {
  it("give the same operation sequence as the type's rules, no dot redraws, and no new inconsistencies outside syncs", () => {
    const small = { replicas: 6, iterations: 1500, syncShare: 0.5, error: 2, load: "uniform" as const, seed: 11, strategy: UnionStrategy.ActiveSlices };
    const seed = runSim(seedConfig({ ...small }));
    const type = runSim(seedConfig({ ...small, rules: "type" }));
    assert.deepEqual([seed.syncs, seed.adds, seed.removes], [type.syncs, type.adds, type.removes]);
    assert.equal(seed.dotRedraws, 0);
    assert.equal(seed.newOutsideSyncs, 0);
  });
});
