// Property tests of AWSET_PROB (awset-prob-state.ts, awset-prob.ts).
//
// Exact: on histories too small for a filter to shift or to give a false positive in practice,
// the probabilistic set is observably the deterministic add-wins set (the repository's AWSet is
// the oracle: same operations, same syncs), so no add is lost and no remove undone; join is
// idempotent; the store of a ⊔ b equals that of b ⊔ a; decompose and difference meet the Lattice
// contract. Probabilistic: adds lost to false positives, measured on a filled filter with a
// seeded generator and compared with the filter's estimatedFp.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet } from "../../services/crdt/awset.js";
import { Apbf, UnionStrategy } from "../../services/crdt/apbf.js";
import { paramsFor } from "../../services/crdt/apbf-params.js";
import { AWSetProb, AWSetProbLattice, type ProbDot, dotBytes, makeAWSetProbLattice } from "../../services/crdt/awset-prob.js";
import { SplitMix64 } from "../helpers/splitmix64.js";
import { assertDecodedOwnsItsBytes } from "./owned-bytes.ts";

const RUNS = 300;
const REPLICAS = 3;
const el = (n: number): Uint8Array => Uint8Array.of(n);

type Op = { t: "add"; r: number; e: number } | { t: "rm"; r: number; e: number } | { t: "sync"; from: number; to: number };

// Syncs weigh double: chains of syncs are what carry removals to replicas that never held the dot.
const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant("add" as const), r: fc.nat(REPLICAS - 1), e: fc.nat(3) }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant("rm" as const), r: fc.nat(REPLICAS - 1), e: fc.nat(3) }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant("sync" as const), from: fc.nat(REPLICAS - 1), to: fc.nat(REPLICAS - 1) }), weight: 2 },
);

/** At most 30 operations: fewer removals than a generation (g = 48), fill far from any FP. */
const script = fc.record({ seed: fc.integer(), ops: fc.array(op, { minLength: 5, maxLength: 30, size: "max" }) });

interface Run {
  prob: AWSetProb[];
  oracle: AWSet[];
}

function replay(L: typeof AWSetProbLattice, s: { seed: number; ops: Op[] }): Run {
  return replayFrom(Array.from({ length: REPLICAS }, () => L.bottom()), s);
}

/** The script from given starting states; created: replicas whose own add created their key. */
function replayFrom(prob: AWSetProb[], s: { seed: number; ops: Op[] }): Run & { created: Set<number> } {
  const rng = new SplitMix64(s.seed);
  const oracle = Array.from({ length: REPLICAS }, () => AWSet.bottom());
  const names = ["a", "b", "c"];
  const created = new Set<number>();
  for (const o of s.ops) {
    if (o.t === "add") {
      if (prob[o.r]!.isBottom()) created.add(o.r);
      let dot = rng.next();
      while (!prob[o.r]!.isFreshDot(dot)) dot = rng.next();
      prob[o.r]!.joinInPlace(prob[o.r]!.addDelta(el(o.e), dot));
      oracle[o.r]!.joinInPlace(oracle[o.r]!.addDelta(names[o.r]!, [el(o.e)]));
    } else if (o.t === "rm") {
      prob[o.r]!.joinInPlace(prob[o.r]!.removeDelta(el(o.e)));
      oracle[o.r]!.joinInPlace(oracle[o.r]!.removeDelta([el(o.e)]));
    } else {
      prob[o.to]!.joinInPlace(prob[o.from]!);
      oracle[o.to]!.joinInPlace(oracle[o.from]!);
    }
  }
  return { prob, oracle, created };
}

const elementsOf = (s: AWSetProb | AWSet) => s.elements().map((b) => b.toString("hex"));
const storeOf = (s: AWSetProb) =>
  [...s.entries.entries()].map(([k, d]) => [k, [...d].sort((a, b) => (a < b ? -1 : 1))] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));

const STRATEGIES = [UnionStrategy.WholeFilter, UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration] as const;

for (const strategy of STRATEGIES) {
  const L = makeAWSetProbLattice(paramsFor(2, 4096, 5, strategy));

  describe(`AWSET_PROB exact properties, strategy ${strategy}`, () => {
    it("matches the deterministic add-wins set while nothing is forgotten (no lost add, no undone remove)", () =>
      fc.assert(
        fc.property(script, (s) => {
          const { prob, oracle } = replay(L, s);
          for (let r = 0; r < REPLICAS; r++) {
            assert.deepEqual(elementsOf(prob[r]!), elementsOf(oracle[r]!), `replica ${r}`);
            assert.equal(prob[r]!.dotCount(), oracle[r]!.dotCount(), `replica ${r}: one live dot per oracle dot`);
          }
        }),
        { numRuns: RUNS },
      ));

    it("join is idempotent, and the joined store is the same both ways", () =>
      fc.assert(
        fc.property(script, fc.nat(REPLICAS - 1), fc.nat(REPLICAS - 1), (s, i, j) => {
          const { prob } = replay(L, s);
          const [a, b] = [prob[i]!, prob[j]!];
          assert.ok(L.equals(L.join(a, a), a));
          assert.ok(L.equals(L.join(a, L.clone(a)), a));
          assert.deepEqual(storeOf(L.join(a, b)), storeOf(L.join(b, a)));
          // A dot both sides hold survives.
          const ab = L.join(a, b);
          for (const dots of a.entries.values()) for (const d of dots) if (b.holds(d)) assert.ok(ab.holds(d));
        }),
        { numRuns: RUNS },
      ));

    it("reads digest: the same for a ⊔ b and b ⊔ a, equal exactly when the live stores are equal", () =>
      fc.assert(
        fc.property(script, fc.nat(REPLICAS - 1), fc.nat(REPLICAS - 1), (s, i, j) => {
          const { prob } = replay(L, s);
          const [a, b] = [prob[i]!, prob[j]!];
          const digest = (x: AWSetProb) => Buffer.from(L.readsDigest!(x)).toString("hex");
          assert.equal(digest(L.join(a, b)), digest(L.join(b, a)));
          const text = (x: AWSetProb) => JSON.stringify(storeOf(x), (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
          assert.equal(digest(a) === digest(b), text(a) === text(b));
          assert.equal(digest(L.decode(L.encode(a))), digest(a));
        }),
        { numRuns: RUNS },
      ));

    it("has bottom as identity, and a ⊑ a ⊔ b, b ⊑ a ⊔ b (no filter shifts in these histories)", () =>
      fc.assert(
        fc.property(script, fc.nat(REPLICAS - 1), fc.nat(REPLICAS - 1), (s, i, j) => {
          const { prob } = replay(L, s);
          const [a, b] = [prob[i]!, prob[j]!];
          assert.ok(L.isBottom(L.bottom()));
          const same = (x: AWSetProb) => L.equals(x, a) || (a.isBottom() && x.isBottom());
          assert.ok(same(L.join(L.bottom(), a)));
          assert.ok(same(L.join(a, L.bottom())));
          assert.ok(L.leq(L.bottom(), a));
          assert.ok(L.leq(a, a));
          const ab = L.join(a, b);
          assert.ok(L.leq(a, ab));
          assert.ok(L.leq(b, ab));
        }),
        { numRuns: 80 },
      ));

    it("decomposes into states that join back exactly, none redundant; difference rebuilds the join", () =>
      fc.assert(
        fc.property(script, fc.nat(REPLICAS - 1), fc.nat(REPLICAS - 1), (s, i, j) => {
          const { prob } = replay(L, s);
          const [a, b] = [prob[i]!, prob[j]!];
          const parts = L.decompose(a);
          const joinAll = (xs: AWSetProb[]) => xs.reduce((acc, x) => L.join(acc, x), L.bottom());
          const back = joinAll(parts);
          assert.ok(L.equals(back, a) || (a.isBottom() && back.isBottom()));
          assert.ok(L.equals(joinAll([...parts].reverse()), back), "order of the parts does not matter");
          for (let p = 0; p < parts.length; p++) {
            const without = joinAll(parts.filter((_, q) => q !== p));
            assert.ok(!L.equals(without, a), `part ${p} is redundant`);
          }
          assert.ok(L.equals(L.join(b, L.difference(a, b)), L.join(b, a)), "b ⊔ Δ(a, b) = b ⊔ a");
          // The join that finds its new part on the way: the same state, and a part that rebuilds it.
          const target = L.clone(b);
          const { changed, newPart } = L.joinInPlaceWithNewPart!(target, a);
          const expected = L.join(b, a);
          assert.deepEqual(L.encode(target), L.encode(expected), "same state as joinInPlace");
          assert.equal(changed, !L.equals(expected, b), "changed exactly when the join changed b");
          assert.deepEqual(L.encode(L.join(b, newPart)), L.encode(expected), "b ⊔ newPart = b ⊔ a");
          assert.equal(L.context(a).isEmpty(), true);
        }),
        { numRuns: 60 },
      ));

    it("round-trips through the codec, with encodedSize equal to the encoding's length", () =>
      fc.assert(
        fc.property(script, (s) => {
          for (const x of replay(L, s).prob) {
            const bytes = L.encode(x);
            assert.equal(bytes.length, L.encodedSize(x));
            assert.ok(L.equals(L.decode(bytes), x));
          }
        }),
        { numRuns: 60 },
      ));

    it("a state decoded from a Buffer owns its memory (the input overwritten, or a sibling decode joined into, leaves it as it was)", () =>
      fc.assert(
        fc.property(script, (s) => {
          const states = replay(L, s).prob;
          states.forEach((x, i) => assertDecodedOwnsItsBytes(L, x, states[(i + 1) % states.length]!));
        }),
        { numRuns: 60 },
      ));
  });
}

describe("AWSET_PROB keys created with different filter shapes", () => {
  // Three small shapes; C is the greatest (most bytes), then B.
  const SHAPES = [
    { k: 4, l: 6, m: 128, strategy: UnionStrategy.CurrentGeneration },
    { k: 4, l: 6, m: 192, strategy: UnionStrategy.ActiveSlices },
    { k: 5, l: 8, m: 256, strategy: UnionStrategy.WholeFilter },
  ] as const;
  const shapeOf = (x: AWSetProb) => ({ k: x.params.k, l: x.params.l, m: x.params.m, strategy: x.params.strategy });

  it("converge to the greatest shape among the created keys, with the same store, losing no add", () =>
    fc.assert(
      fc.property(script, (s) => {
        // Replica r creates its key with shape r (its first add), then the script runs.
        const { prob, oracle, created } = replayFrom(SHAPES.map((p) => AWSetProb.bottom(p)), s);
        // Then every replica syncs with every other, three rounds.
        for (let round = 0; round < 3; round++) {
          for (let i = 0; i < REPLICAS; i++) for (let j = 0; j < REPLICAS; j++) if (i !== j) prob[j]!.joinInPlace(prob[i]!);
          for (let i = 0; i < REPLICAS; i++) for (let j = 0; j < REPLICAS; j++) if (i !== j) oracle[j]!.joinInPlace(oracle[i]!);
        }
        if (created.size === 0) return;
        const greatest = SHAPES[Math.max(...created)]!;
        for (let r = 0; r < REPLICAS; r++) {
          if (prob[r]!.isBottom()) continue; // nothing ever reached it (every op a removal of nothing)
          assert.deepEqual(shapeOf(prob[r]!), greatest, `replica ${r}'s shape`);
          assert.deepEqual(storeOf(prob[r]!), storeOf(prob[0]!), `replica ${r}'s store`);
          // Adds are never lost: every element the exact set holds is here (removes known only to
          // a dropped filter may come back, so the converse is not claimed).
          for (const e of elementsOf(oracle[r]!)) assert.ok(elementsOf(prob[r]!).includes(e), `replica ${r} lost ${e}`);
        }
      }),
      { numRuns: RUNS },
    ));

  it("keeps the greater filter whichever side it is on; ⊥ of any shape is an identity", () => {
    const small = AWSetProb.bottom(SHAPES[0]);
    const big = AWSetProb.bottom(SHAPES[2]);
    small.joinInPlace(small.addDelta(el(1), 11n));
    small.joinInPlace(small.removeDelta(el(1)));
    small.joinInPlace(small.addDelta(el(2), 12n));
    big.joinInPlace(big.addDelta(el(3), 13n));
    const a = small.clone();
    a.joinInPlace(big);
    const b = big.clone();
    b.joinInPlace(small);
    assert.deepEqual(shapeOf(a), SHAPES[2]);
    assert.deepEqual(shapeOf(b), SHAPES[2]);
    assert.deepEqual(storeOf(a), storeOf(b));
    assert.deepEqual(elementsOf(a), ["02", "03"]);
    const fresh = AWSetProb.bottom(SHAPES[1]);
    assert.equal(fresh.joinInPlace(a), true);
    assert.ok(fresh.equals(a), "⊥ adopts the other side whole");
    assert.equal(a.clone().joinInPlace(AWSetProb.bottom(SHAPES[1])), false);
    assert.ok(AWSetProb.bottom(SHAPES[0]).equals(AWSetProb.bottom(SHAPES[1])));
  });
});

describe("AWSET_PROB probabilistic behaviour (error 2, capacity 4096, level 5, seeded)", () => {
  it("loses concurrent adds only to false positives, at the rate the remote's filter estimates", () => {
    const params = paramsFor(2, 4096, 5, UnionStrategy.CurrentGeneration);
    const rng = new SplitMix64(2024);
    // B removed 4096 dots (a filled window, the state B reaches by 4096 removals); A holds 20 000
    // fresh dots B never saw: every loss is a false positive of B's filter.
    const filter = Apbf.create(params);
    for (let i = 0; i < 4096; i++) filter.insert(dotBytes(rng.next()));
    const b = AWSetProb.fromParts(new Map(), filter);
    const entries = new Map<string, Set<ProbDot>>();
    const N = 20_000;
    for (let i = 0; i < N; i++) entries.set(`e${i}`, new Set([rng.next()]));
    const a = AWSetProb.fromParts(entries, Apbf.create(params));

    const ab = AWSetProbLattice.join(a, b);
    const ba = AWSetProbLattice.join(b, a);
    const lost = N - ab.dotCount();
    assert.equal(N - ba.dotCount(), lost, "the same adds are lost whichever side joins");
    const fp = b.tombstones.estimatedFp();
    const sigma = Math.sqrt(N * fp * (1 - fp));
    console.log(`# lost adds ${lost} of ${N} (${(lost / N).toFixed(5)}), expected ${(N * fp).toFixed(1)} (FP estimate ${fp.toFixed(5)})`);
    assert.ok(Math.abs(lost - N * fp) <= 4 * sigma, `lost ${lost}, expected ${N * fp} ± ${4 * sigma}`);
  });
});
