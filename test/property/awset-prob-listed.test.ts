// Property tests of AWSET_PROB deltas that list their removed dots (awset-prob-state.ts, field
// `removed`). A delta's filter that took more than a generation of removes reports other dots at
// about its false-positive rate; joins of a listed delta ask the list instead, so they drop the
// dots it removed and no other. Filters here are tiny (k = 2, l = 3, m = 64: about 22 insertions
// a generation), so a filter-answered join would drop live dots in most runs.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { UnionStrategy } from "../../services/crdt/apbf.js";
import { checkParams } from "../../services/crdt/apbf-params.js";
import { AWSetProb, type ProbDot, dotBytes, decodeAWSetProb, encodeAWSetProb, makeAWSetProbLattice } from "../../services/crdt/awset-prob.js";
import { DecodeError } from "../../services/crdt/errors.js";
import { SplitMix64 } from "../helpers/splitmix64.js";

const RUNS = 150;
const el = (n: number): Uint8Array => Buffer.from(`e${n}`);
const STRATEGIES = [UnionStrategy.WholeFilter, UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration];

function freshDot(s: AWSetProb, rng: SplitMix64): ProbDot {
  let d = rng.next();
  while (!s.isFreshDot(d)) d = rng.next();
  return d;
}

const storeOf = (s: AWSetProb) =>
  JSON.stringify(
    [...s.entries.entries()].map(([k, d]) => [k, [...d].sort((a, b) => (a < b ? -1 : 1)).map(String)]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1)),
  );

/** A replica's state after random adds and removes of elements 0..universe-1 (its filter shifts). */
function history(L: ReturnType<typeof makeAWSetProbLattice>, rng: SplitMix64, ops: number, universe: number, from?: AWSetProb): AWSetProb {
  const s = from?.clone() ?? L.bottom();
  for (let i = 0; i < ops; i++) {
    const e = el(Number(rng.next() % BigInt(universe)));
    s.joinInPlace(rng.next() % 3n === 0n ? s.removeDelta(e) : s.addDelta(e, freshDot(s, rng)));
  }
  return s;
}

for (const strategy of STRATEGIES) {
  const L = makeAWSetProbLattice(checkParams({ k: 2, l: 3, m: 64, strategy }));

  describe(`AWSET_PROB listed deltas, strategy ${strategy}`, () => {
    it("a remove delta drops the dots it removed and no other, however full its filter", () =>
      fc.assert(
        fc.property(fc.integer(), fc.integer({ min: 10, max: 120 }), fc.integer({ min: 20, max: 200 }), fc.boolean(), (seed, kept, churn, sawAdds) => {
          const rng = new SplitMix64(seed);
          // Two replicas that share `kept` elements; q then adds a burst and removes it at once.
          const r = L.bottom();
          for (let i = 0; i < kept; i++) r.joinInPlace(r.addDelta(el(i), freshDot(r, rng)));
          const q = r.clone();
          const burst = Array.from({ length: churn }, (_, i) => el(10_000 + i));
          let adds: AWSetProb | undefined;
          for (const e of burst) {
            const d = q.addDelta(e, freshDot(q, rng));
            q.joinInPlace(d);
            if (adds === undefined) adds = d.clone();
            else adds.joinGroupInPlace(d);
          }
          if (sawAdds) r.joinInPlace(adds!);
          const removes = q.clone();
          let rm = L.bottom();
          for (const e of burst) {
            const d = removes.removeDelta(e);
            removes.joinInPlace(d);
            if (rm.isBottom()) rm = d.clone();
            else rm.joinGroupInPlace(d);
          }
          assert.equal(rm.removed?.size, churn, "the group lists every removed dot");
          const before = r.clone();
          r.joinInPlace(rm);
          for (let i = 0; i < kept; i++) assert.ok(r.has(el(i)), `kept element ${i} dropped`);
          assert.equal(r.size, kept, "every removed element is gone");
          // Dropped: exactly the listed dots r held.
          for (const dots of before.entries.values()) for (const d of dots) assert.equal(r.holds(d), !rm.removed!.has(d));
        }),
        { numRuns: RUNS },
      ));

    it("the joined store is the same both ways, with a listed delta on either side, and a delta joined twice leaves the same store", () =>
      fc.assert(
        fc.property(fc.integer(), fc.integer({ min: 0, max: 60 }), fc.integer({ min: 1, max: 40 }), (seed, ops, deltaOps) => {
          const rng = new SplitMix64(seed);
          const base = history(L, rng, ops, 12);
          const a = history(L, rng, Math.floor(ops / 2), 12, base);
          // A delta-group of another replica's operations on the shared base.
          const b = base.clone();
          let group: AWSetProb | undefined;
          for (let i = 0; i < deltaOps; i++) {
            const e = el(Number(rng.next() % 12n));
            const d = rng.next() % 2n === 0n ? b.removeDelta(e) : b.addDelta(e, freshDot(b, rng));
            b.joinInPlace(d);
            if (group === undefined) group = d.clone();
            else group.joinGroupInPlace(d);
          }
          assert.ok(group!.removed !== undefined);
          assert.equal(storeOf(L.join(a, group!)), storeOf(L.join(group!, a)));
          // Delivered twice: the same store (a filter can take a union twice when it shifted between).
          const once = L.join(a, group!);
          assert.equal(storeOf(L.join(once, group!)), storeOf(once));
          assert.ok(L.equals(L.join(group!, group!), group!));
        }),
        { numRuns: RUNS },
      ));

    it("the new part of a join gives a copy of the state before the same state, and drops at a third replica only what the join dropped", () =>
      fc.assert(
        fc.property(fc.integer(), fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 60 }), fc.integer({ min: 1, max: 30 }), (seed, opsX, opsY, opsZ) => {
          const rng = new SplitMix64(seed);
          const base = history(L, rng, 20, 16);
          const x = history(L, rng, opsX, 16, base);
          const y = history(L, rng, opsY, 16, base);
          const z = history(L, rng, opsZ, 16, base);
          const after = x.clone();
          const { newPart } = L.joinInPlaceWithNewPart!(after, y);
          // A whole state whose filter reports one of its own live dots is passed on whole (the
          // lattice's difference): what follows is for the others.
          fc.pre([...y.entries.values()].every((dots) => [...dots].every((d) => !y.tombstones.query(dotBytes(d)))));
          const copy = x.clone();
          copy.joinInPlace(newPart);
          assert.equal(storeOf(copy), storeOf(after));
          assert.ok(copy.tombstones.equals(after.tombstones), "the same filter");
          // z's own adds, which neither x nor y ever saw, are not dropped by y's false positives
          // passed on in the part.
          const zOnly = [...z.entries.values()].flatMap((dots) => [...dots]).filter((d) => !base.holds(d) && !x.holds(d) && !y.holds(d));
          const third = z.clone();
          third.joinInPlace(newPart);
          for (const d of zOnly) assert.ok(third.holds(d), `z's own dot ${d} dropped`);
        }),
        { numRuns: RUNS },
      ));
  });
}

describe("AWSET_PROB listed deltas on the wire", () => {
  const L = makeAWSetProbLattice(checkParams({ k: 2, l: 3, m: 64, strategy: UnionStrategy.CurrentGeneration }));

  it("a state encodes as version 1, a listed delta as version 2, and both round-trip with their list", () =>
    fc.assert(
      fc.property(fc.integer(), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 30 }), (seed, ops, removes) => {
        const rng = new SplitMix64(seed);
        const s = history(L, rng, ops + 5, 20);
        const bytes = encodeAWSetProb(s);
        assert.equal(bytes[0], 1);
        assert.equal(decodeAWSetProb(bytes).removed, undefined);
        let group: AWSetProb | undefined;
        for (let i = 0; i < removes; i++) {
          const d = s.removeDelta(el(i % 20));
          s.joinInPlace(d);
          if (group === undefined) group = d.clone();
          else group.joinGroupInPlace(d);
        }
        const enc = encodeAWSetProb(group!);
        assert.equal(enc[0], 2);
        assert.equal(enc.length, L.encodedSize(group!));
        const back = decodeAWSetProb(enc);
        assert.ok(back.equals(group!));
        assert.deepEqual([...back.removed!].sort(), [...group!.removed!].sort());
        assert.deepEqual(encodeAWSetProb(back), enc, "canonical");
      }),
      { numRuns: RUNS },
    ));

  it("refuses a list out of order, a listed dot that is also live, and a truncated list", () => {
    const rng = new SplitMix64(5);
    const s = L.bottom();
    for (let i = 0; i < 3; i++) s.joinInPlace(s.addDelta(el(i), freshDot(s, rng)));
    const live = [...s.entries.values()][0]!.values().next().value as ProbDot;
    const withList = (list: ProbDot[]) => {
      const plain = encodeAWSetProb(AWSetProb.fromParts(s.entries, s.tombstones, new Set()));
      const tail = new Uint8Array(4 + 8 * list.length);
      const v = new DataView(tail.buffer);
      v.setUint32(0, list.length, true);
      list.forEach((d, i) => v.setBigUint64(4 + 8 * i, d, true));
      return Uint8Array.from([...plain.subarray(0, plain.length - 4), ...tail]);
    };
    assert.equal(decodeAWSetProb(withList([3n, 9n])).removed?.size, 2, "a hand-built list decodes");
    for (const [what, bytes] of [
      ["unsorted", withList([9n, 3n])],
      ["duplicate", withList([3n, 3n])],
      ["also live", withList([live])],
      ["truncated", withList([3n, 9n]).subarray(0, -4)],
    ] as const) {
      assert.throws(() => decodeAWSetProb(bytes), DecodeError, what);
    }
  });
});
