// Delta mutators: every m^δ is an inflation (X ⊑ X ⊔ m^δ(X)) and X ⊔ m^δ(X) equals the full
// mutator m(X), which the kernel writes separately so that this is a real cross-check.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSetLattice as AW, CounterLattice as PN, type CausalContext } from "../../services/crdt/index.js";
import {
  ELEMENT_DOMAIN,
  REPLICA_IDS,
  RUNS,
  awUniverse,
  counterUniverse,
  el,
  pickFrom,
  withPicks,
} from "./universe.js";
import { awsetProblems, counterProblems } from "./invariants.js";

const run = (p: fc.IPropertyWithHooks<unknown>) => fc.assert(p, { numRuns: RUNS });
const els = fc.array(fc.integer({ min: 0, max: ELEMENT_DOMAIN - 1 }), { maxLength: 4 });
const replica = fc.constantFrom(...REPLICA_IDS);
const aw2 = withPicks(awUniverse, 2);

describe("AWSET delta mutators", () => {
  it("addDelta is an inflation, X ⊔ addDelta(X) = add(X), and the elements are then present", () =>
    run(
      fc.property(aw2, replica, els, ([u, [i]], r, xs) => {
        const x = pickFrom(u, i!);
        const before = Buffer.from(AW.encode(x));
        const delta = x.addDelta(r, xs.map(el));
        const joined = AW.join(x, delta);
        assert.ok(AW.leq(x, joined));
        assert.ok(AW.equals(joined, x.add(r, xs.map(el))));
        for (const n of xs) assert.ok(joined.has(el(n)));
        assert.equal(delta.size, new Set(xs).size, "one entry per distinct element");
        assert.equal(delta.dotCount(), new Set(xs).size, "one new dot per distinct element");
        assert.deepEqual(awsetProblems(delta), []);
        assert.deepEqual(awsetProblems(joined), []);
        assert.deepEqual(Buffer.from(AW.encode(x)), before, "mutators are pure");
      }),
    ));

  it("removeDelta is an inflation and X ⊔ removeDelta(X) = remove(X), with and without an observed context", () =>
    run(
      fc.property(aw2, els, fc.boolean(), ([u, [i, j]], xs, withCtx) => {
        const x = pickFrom(u, i!);
        const observed: CausalContext | undefined = withCtx ? pickFrom(u, j!).ctx : undefined;
        const before = Buffer.from(AW.encode(x));
        const delta = x.removeDelta(xs.map(el), observed);
        const joined = AW.join(x, delta);
        assert.ok(AW.leq(x, joined));
        assert.ok(AW.equals(joined, x.remove(xs.map(el), observed)));
        assert.equal(delta.size, 0, "a remove delta carries no live entries");
        for (const n of xs) {
          const left = joined.dotsOf(el(n));
          // What survives is exactly the dots the observed context did not cover.
          assert.deepEqual(left, x.dotsOf(el(n)).filter((d) => observed !== undefined && !observed.containsDot(d)));
        }
        assert.deepEqual(awsetProblems(joined), []);
        assert.deepEqual(Buffer.from(AW.encode(x)), before, "mutators are pure");
      }),
    ));

  it("clearDelta is an inflation and X ⊔ clearDelta(X) = clear(X), with and without an observed context", () =>
    run(
      fc.property(aw2, fc.boolean(), ([u, [i, j]], withCtx) => {
        const x = pickFrom(u, i!);
        const observed = withCtx ? pickFrom(u, j!).ctx : undefined;
        const delta = x.clearDelta(observed);
        const joined = AW.join(x, delta);
        assert.ok(AW.leq(x, joined));
        assert.ok(AW.equals(joined, x.clear(observed)));
        if (observed === undefined) assert.equal(joined.size, 0);
        assert.ok(joined.ctx.equals(x.ctx), "a clear at the source adds nothing to its context");
        assert.deepEqual(awsetProblems(joined), []);
      }),
    ));
});

describe("COUNTER delta mutators", () => {
  it("incrementDelta is an inflation, X ⊔ incrementDelta(X) = increment(X), and the value moves by the amount", () =>
    run(
      fc.property(withPicks(counterUniverse, 1), replica, fc.bigInt({ min: -1000n, max: 1000n }), ([u, [i]], r, n) => {
        const x = pickFrom(u, i!);
        const delta = x.incrementDelta(r, n);
        const joined = PN.join(x, delta);
        assert.ok(PN.leq(x, joined));
        assert.ok(!PN.equals(x, joined), "every increment is a strict inflation (a new dot)");
        assert.ok(PN.equals(joined, x.increment(r, n)));
        assert.equal(joined.value(), x.value() + n);
        assert.equal(delta.entries.size, 1);
        assert.deepEqual(counterProblems(joined), []);
      }),
    ));
});
