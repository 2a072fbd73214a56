// Property tests of the three APBF union strategies: exactly the laws apbf-union.ts claims, on
// small filters (k=3, l=4) whose histories mix insertions, shifts and earlier unions.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Apbf, UnionStrategy } from "../../services/crdt/apbf.js";
import { YOUNG_GENERATIONS, union, unionInPlace } from "../../services/crdt/apbf-union.js";
import { encodeApbf } from "../../services/crdt/apbf-codec.js";

const { WholeFilter, ActiveSlices, CurrentGeneration } = UnionStrategy;
const STRATEGIES = [WholeFilter, ActiveSlices, CurrentGeneration] as const;
const RUNS = 200;

function item(id: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setUint32(0, id, true);
  return out;
}

/** A filter's history: initial shifts, then insertions of ids from a shared universe. */
interface History {
  shifts: number;
  ids: number[];
}

const history = (maxIds: number) =>
  fc.record({ shifts: fc.nat(9), ids: fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: maxIds, size: "max" }) });

interface Built {
  f: Apbf;
  /** Ids inserted since the last shift (the current generation), when no union happened. */
  current: number[];
  all: number[];
}

function build(s: UnionStrategy, h: History, m = 64): Built {
  const f = Apbf.create({ k: 3, l: 4, m, strategy: s });
  f.shift(h.shifts);
  let current: number[] = [];
  for (const id of h.ids) {
    f.insert(item(id));
    current.push(id);
    if (f.count === 0) current = [];
  }
  return { f, current, all: h.ids };
}

/** An arbitrary filter: a history, optionally joined with a second one (so states after unions occur too). */
const filter = (s: UnionStrategy) =>
  fc.tuple(history(60), fc.option(history(60), { nil: undefined })).map(([h1, h2]) => {
    const a = build(s, h1);
    if (h2 !== undefined) unionInPlace(a.f, build(s, h2).f);
    return a;
  });

for (const s of STRATEGIES) {
  describe(`APBF union, strategy ${s}`, () => {
    it("is idempotent: x ⊔ x = x", () =>
      fc.assert(
        fc.property(filter(s), ({ f }) => {
          assert.ok(union(f, f).equals(f));
          assert.ok(union(f, f.clone()).equals(f));
        }),
        { numRuns: RUNS },
      ));

    it("says it changed the filter exactly when its encoding changed (a state log records only the unions that did)", () =>
      fc.assert(
        // The remote: any filter, or a fresh one holding a few of local's own ids (a refusal
        // reply: its bits are often all in local's slices already, its shadows not).
        fc.property(filter(s), fc.oneof(filter(s), fc.array(fc.nat(60), { minLength: 1, maxLength: 4 })), ({ f, all }, remote) => {
          const g = Array.isArray(remote) ? build(s, { shifts: 0, ids: remote.map((i) => all[i % Math.max(1, all.length)] ?? i) }).f : remote.f;
          const before = Buffer.from(encodeApbf(f));
          const { changed } = unionInPlace(f, g);
          assert.equal(changed, !Buffer.from(encodeApbf(f)).equals(before));
        }),
        { numRuns: RUNS },
      ));

    it("has the empty filter as identity: ⊥ ⊔ x = x = x ⊔ ⊥", () =>
      fc.assert(
        fc.property(filter(s), ({ f }) => {
          const empty = Apbf.create(f.params);
          // Filters with no bit set differ only in alignment; those count as ⊥ too.
          const same = (r: Apbf) => r.equals(f) || (f.isEmpty() && r.isEmpty());
          assert.ok(same(union(empty, f)));
          assert.ok(same(union(f, empty)));
        }),
        { numRuns: RUNS },
      ));

    it("without a shift: (x ⊔ y) ⊔ y = x ⊔ y, and x's members stay members", () => {
      let unshifted = 0;
      fc.assert(
        fc.property(filter(s), filter(s), (x, y) => {
          const r = x.f.clone();
          const out = unionInPlace(r, y.f);
          if (out.shifts > 0) return;
          unshifted++;
          assert.ok(union(r, y.f).equals(r));
          for (const id of x.all) if (x.f.query(item(id))) assert.ok(r.query(item(id)), `lost ${id}`);
        }),
        { numRuns: RUNS },
      );
      // Both kinds of case occur: the law is checked on enough unshifted unions to mean something.
      assert.ok(unshifted >= RUNS / 10 && unshifted < RUNS, `${unshifted} of ${RUNS} cases without a shift`);
    });

    if (s !== WholeFilter) {
      it("brings every element of the remote's current generation (shifts <= l)", () =>
        fc.assert(
          fc.property(filter(s), history(60), (x, hy) => {
            const y = build(s, hy);
            const r = x.f.clone();
            const out = unionInPlace(r, y.f);
            if (out.shifts > r.l) return;
            for (const id of y.current) assert.ok(r.query(item(id)), `remote's current ${id} missing`);
          }),
          { numRuns: RUNS },
        ));

      it("is not commutative: the older local slices stay local", () => {
        // x has many generations; y is fresh with one element. x ⊔ y keeps x's old elements,
        // y ⊔ x receives only x's active slices (or current generation).
        const x = build(s, { shifts: 0, ids: Array.from({ length: 60 }, (_, i) => i) });
        const y = build(s, { shifts: 0, ids: [1000] });
        const xy = union(x.f, y.f);
        const yx = union(y.f, x.f);
        assert.ok(xy.query(item(0)), "x ⊔ y keeps x's oldest generation");
        assert.ok(!yx.query(item(0)), "y ⊔ x does not receive it");
      });
    }
  });
}

for (const s of [ActiveSlices, CurrentGeneration]) describe(`APBF union, strategy ${s}, from a young remote (a delta-group that shifted on its way)`, () => {
  // y: a fresh filter that took 1-4 generations of insertions (g = 14 here), as a gossip group
  // joining several deltas does. When its bits lie within its YOUNG_GENERATIONS newest, every element
  // it still reports must reach the local filter, not only its current generation's: a receiver
  // that missed an older generation's tombstone adopts the add when it comes (a remove undone).
  it("brings every element the remote reports, whatever its generation", () => {
    let young = 0;
    fc.assert(
      fc.property(filter(s), fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 15, maxLength: 50 }), (x, ids) => {
        const y = build(s, { shifts: 0, ids });
        const last = y.f.lastSetSlice();
        if (last < y.f.k || last >= y.f.k - 1 + YOUNG_GENERATIONS) return;
        young++;
        const r = x.f.clone();
        const out = unionInPlace(r, y.f);
        if (last + out.shifts >= r.n) return; // shifted past the window: forgetting is allowed
        for (const id of ids) if (y.f.query(item(id))) assert.ok(r.query(item(id)), `remote's ${id} missing after the union`);
      }),
      { numRuns: RUNS },
    );
    assert.ok(young >= RUNS / 4, `only ${young} of ${RUNS} remotes were young and shifted`);
  });
});

describe("APBF union, Whole Filter on aligned filters (same base), no shift", () => {
  // m = 512 gives g = 118: three filters of at most 30 insertions never fill a generation.
  const aligned = fc.nat(9).chain((shifts) =>
    fc.tuple(
      ...[0, 1, 2].map(() => fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 30, size: "max" }).map((ids) => build(WholeFilter, { shifts, ids }, 512))),
    ),
  );

  it("is commutative in bits and query answers", () => {
    let checked = 0;
    fc.assert(
      fc.property(aligned, ([x, y]) => {
        const xy = x!.f.clone();
        const yx = y!.f.clone();
        if (unionInPlace(xy, y!.f).shifts + unionInPlace(yx, x!.f).shifts > 0) return;
        checked++;
        assert.deepEqual(xy.bits, yx.bits);
        assert.equal(xy.base, yx.base);
        for (let id = 0; id <= 300; id++) assert.equal(xy.query(item(id)), yx.query(item(id)));
      }),
      { numRuns: RUNS },
    );
    assert.ok(checked > RUNS / 2, `only ${checked} unshifted cases`);
  });

  it("is associative in bits", () => {
    let checked = 0;
    fc.assert(
      fc.property(aligned, ([x, y, z]) => {
        const left = x!.f.clone();
        const s1 = unionInPlace(left, y!.f).shifts + unionInPlace(left, z!.f).shifts;
        const yz = y!.f.clone();
        const right = x!.f.clone();
        const s2 = unionInPlace(yz, z!.f).shifts + unionInPlace(right, yz).shifts;
        if (s1 + s2 > 0) return;
        checked++;
        assert.deepEqual(left.bits, right.bits);
      }),
      { numRuns: RUNS },
    );
    assert.ok(checked > RUNS / 2, `only ${checked} unshifted cases`);
  });
});

describe("APBF querier", () => {
  it("answers every item as query does, for filters with empty and full slices", () => {
    let reported = 0;
    fc.assert(
      fc.property(fc.constantFrom(...STRATEGIES).chain((s) => filter(s)), history(60), ({ f, all }, probes) => {
        const q = f.querier();
        for (const id of [...all, ...probes.ids]) {
          const expected = f.query(item(id));
          if (expected) reported++;
          assert.equal(q(item(id)), expected, `item ${id}`);
        }
      }),
      { numRuns: RUNS },
    );
    assert.ok(reported > 0, "some items were reported");
  });
});
