// Join-semilattice laws, order, join-decomposition, difference and codec round trip, checked for
// every lattice through the Lattice interface on reachable states (see universe.ts).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, AWSetLattice, CounterLattice, type Lattice, retryFilterParams } from "../../services/crdt/index.js";
import { RUNS, awUniverse, counterUniverse, pickFrom, withPicks, type Universe } from "./universe.js";
import { awsetProblems, counterProblems } from "./invariants.js";
import { assertDecodedOwnsItsBytes } from "./owned-bytes.ts";

function laws<S>(L: Lattice<S>, universe: fc.Arbitrary<Universe<S>>, problems: (s: S) => string[]): void {
  const eq = (a: S, b: S) => L.equals(a, b);
  const joinAll = (xs: S[]) => xs.reduce((acc, x) => L.join(acc, x), L.bottom());
  const run = (p: fc.IPropertyWithHooks<unknown>) => fc.assert(p, { numRuns: RUNS });
  const three = withPicks(universe, 3);

  describe(`${L.name} lattice`, () => {
    it("join is associative", () =>
      run(
        fc.property(three, ([u, [i, j, k]]) => {
          const [a, b, c] = [pickFrom(u, i!), pickFrom(u, j!), pickFrom(u, k!)];
          assert.ok(eq(L.join(L.join(a, b), c), L.join(a, L.join(b, c))));
        }),
      ));

    it("join is commutative", () =>
      run(
        fc.property(three, ([u, [i, j]]) => {
          const [a, b] = [pickFrom(u, i!), pickFrom(u, j!)];
          assert.ok(eq(L.join(a, b), L.join(b, a)));
        }),
      ));

    it("join is idempotent and bottom is its identity", () =>
      run(
        fc.property(three, ([u, [i]]) => {
          const a = pickFrom(u, i!);
          assert.ok(eq(L.join(a, a), a));
          assert.ok(L.isBottom(L.bottom()));
          assert.ok(eq(L.join(a, L.bottom()), a));
          assert.ok(eq(L.join(L.bottom(), a), a));
        }),
      ));

    it("joinInPlace equals join, reports change correctly, keeps invariants, leaves the argument alone", () =>
      run(
        fc.property(three, ([u, [i, j]]) => {
          const [a, b] = [pickFrom(u, i!), pickFrom(u, j!)];
          const bBytes = L.encode(b);
          const target = L.clone(a);
          const changed = L.joinInPlace(target, b);
          const expected = L.join(a, b);
          assert.ok(eq(target, expected));
          assert.equal(changed, !eq(a, expected));
          assert.deepEqual(problems(target), []);
          assert.deepEqual(Buffer.from(L.encode(b)), Buffer.from(bBytes));
          assert.ok(eq(a, L.decode(L.encode(a))), "clone must not share mutable state with the original");
        }),
      ));

    it("a state decoded from a Buffer owns its memory (the input overwritten, or a sibling decode joined into, leaves it as it was)", () =>
      run(
        fc.property(three, ([u, [i, j]]) => {
          assertDecodedOwnsItsBytes(L, pickFrom(u, i!), pickFrom(u, j!));
        }),
      ));

    it("leq agrees with join, is reflexive and antisymmetric", () =>
      run(
        fc.property(three, ([u, [i, j]]) => {
          const [a, b] = [pickFrom(u, i!), pickFrom(u, j!)];
          assert.equal(L.leq(a, b), eq(L.join(a, b), b));
          assert.ok(L.leq(a, a));
          assert.ok(L.leq(a, L.join(a, b)));
          assert.ok(L.leq(L.bottom(), a));
          if (L.leq(a, b) && L.leq(b, a)) assert.ok(eq(a, b));
        }),
      ));

    it("decompose joins back, has no redundant part, and every part is a single dot", () =>
      run(
        fc.property(three, ([u, [i]]) => {
          const s = pickFrom(u, i!);
          const parts = L.decompose(s);
          assert.ok(eq(joinAll(parts), s));
          for (let x = 0; x < parts.length; x++) {
            const p = parts[x]!;
            assert.equal(L.context(p).dotCount(), 1, "an irreducible carries one dot in its context");
            assert.ok(!L.isBottom(p));
            assert.ok(L.leq(p, s));
            const others = parts.filter((_, y) => y !== x);
            assert.ok(!eq(joinAll(others), s), `part ${x} is redundant`);
          }
        }),
      ));

    it("difference(a, b) is the join of a's irreducibles not below b, and b ⊔ Δ(a,b) = b ⊔ a", () =>
      run(
        fc.property(three, ([u, [i, j]]) => {
          const [a, b] = [pickFrom(u, i!), pickFrom(u, j!)];
          const delta = L.difference(a, b);
          const expected = joinAll(L.decompose(a).filter((p) => !L.leq(p, b)));
          assert.ok(eq(delta, expected));
          assert.ok(eq(L.join(b, delta), L.join(b, a)));
          assert.ok(L.leq(delta, a));
          assert.deepEqual(problems(delta), []);
          if (L.leq(a, b)) assert.ok(L.isBottom(delta));
        }),
      ));

    it("decode(encode(s)) equals s, and encoding is canonical", () =>
      run(
        fc.property(three, ([u, [i]]) => {
          const s = pickFrom(u, i!);
          const bytes = L.encode(s);
          const back = L.decode(bytes);
          assert.ok(eq(back, s));
          assert.deepEqual(problems(back), []);
          assert.deepEqual(Buffer.from(L.encode(back)), Buffer.from(bytes));
        }),
      ));

    it("every state in the pool satisfies the invariants", () =>
      run(
        fc.property(universe, (u) => {
          for (const s of u.pool) assert.deepEqual(problems(s), []);
        }),
      ));
  });
}

laws(AWSetLattice, awUniverse, awsetProblems);
laws(CounterLattice, counterUniverse, counterProblems);

describe("AWSET optimized join", () => {
  it("joinInPlace agrees with the generic DotMap<DotSet> join (AWSet.referenceJoin)", () =>
    fc.assert(
      fc.property(withPicks(awUniverse, 2), ([u, [i, j]]) => {
        const [a, b] = [pickFrom(u, i!), pickFrom(u, j!)];
        const fast = a.clone();
        fast.joinInPlace(b);
        const reference = AWSet.referenceJoin(a, b);
        assert.ok(fast.equals(reference));
        assert.deepEqual(fast.sortedKeys(), reference.sortedKeys());
      }),
      { numRuns: RUNS },
    ));
});

describe("COUNTER with a retry filter dense enough to be encoded as bitmaps", () => {
  it("owns its memory when decoded from a Buffer (the join that made a store's cached counter change a delta it had handed out)", () => {
    const params = retryFilterParams({ idsPerPeriod: 8, falsePositiveRate: 0.05, periodMs: 1000, pastEpochs: 2 });
    const grow = (s: ReturnType<typeof CounterLattice.bottom>, replica: string, ids: string[]) => {
      for (const id of ids) CounterLattice.joinInPlace(s, s.retryIncrementDelta(replica, 1n, id, 10_000, params, false).delta!);
      return s;
    };
    const a = grow(CounterLattice.bottom(), "c1~1", ["id-1", "id-2", "id-3", "id-4"]);
    const b = grow(CounterLattice.clone(a), "c0~1", ["id-0", "id-5"]);
    assertDecodedOwnsItsBytes(CounterLattice, a, b);
  });
});
