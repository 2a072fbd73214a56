// Unit tests of AWSET_PROB: mutator semantics, the forgetting window, dots, the codec's validation
// and the Lattice object's configuration checks.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Apbf, UnionStrategy } from "../../services/crdt/apbf.js";
import { paramsFor } from "../../services/crdt/apbf-params.js";
import { apbfStateEncodedSize } from "../../services/crdt/apbf-codec.js";
import {
  AWSetProb,
  AWSetProbLattice as L,
  DEFAULT_AWSET_PROB_PARAMS,
  decodeAWSetProb,
  dotBytes,
  encodeAWSetProb,
  makeAWSetProbLattice,
  toDot,
} from "../../services/crdt/awset-prob.js";
import { DecodeError, TombstonesSaturatedError } from "../../services/crdt/errors.js";
import { ObjectType } from "../../services/crdt/lattice.js";
import { SplitMix64 } from "../helpers/splitmix64.js";

const el = (n: number): Uint8Array => Uint8Array.of(n);

function apply(s: AWSetProb, delta: AWSetProb): AWSetProb {
  s.joinInPlace(delta);
  return s;
}

describe("AWSET_PROB mutators", () => {
  it("adds, removes and re-adds; an add retires the element's older dots", () => {
    const s = L.bottom();
    apply(s, s.addDelta(el(1), 10n));
    assert.ok(s.has(el(1)));
    assert.deepEqual(s.dotsOf(el(1)), [10n]);
    apply(s, s.addDelta(el(1), 11n));
    assert.deepEqual(s.dotsOf(el(1)), [11n], "the old dot became a tombstone");
    assert.ok(s.tombstones.query(dotBytes(10n)));
    assert.ok(!s.tombstones.query(dotBytes(11n)), "live dots stay out of the filter");
    apply(s, s.removeDelta(el(1)));
    assert.ok(!s.has(el(1)));
    apply(s, s.addDelta(el(1), 12n));
    assert.deepEqual(s.elements(), [Buffer.from([1])]);
    apply(s, s.addDelta(el(2), 13n));
    apply(s, s.clearDelta());
    assert.equal(s.size, 0);
    assert.ok(!s.isBottom(), "the removals are remembered");
  });

  it("add wins over a concurrent remove, both ways", () => {
    const a = L.bottom();
    apply(a, a.addDelta(el(7), 1n));
    const b = L.clone(a);
    apply(a, a.removeDelta(el(7)));
    apply(b, b.addDelta(el(7), 2n)); // concurrent re-add at b
    for (const x of [L.join(a, b), L.join(b, a)]) {
      assert.ok(x.has(el(7)));
      assert.deepEqual(x.dotsOf(el(7)), [2n]);
    }
  });

  it("a replica that never held a removed dot learns the removal through the filter union", () => {
    const [a, b, c] = [L.bottom(), L.bottom(), L.bottom()];
    apply(a, a.addDelta(el(1), 5n));
    b.joinInPlace(a);
    apply(a, a.removeDelta(el(1)));
    c.joinInPlace(a); // c never held dot 5
    c.joinInPlace(b); // b still does
    assert.ok(!c.has(el(1)));
  });

  it("a replica learns every remove of a delta-group whose filter shifted on its way, before it sees the adds", () => {
    // A node's gossip joins the deltas a neighbour has not acknowledged into one group; with more
    // removes than a generation holds (48 here), the group's filter shifts. The receiver has not
    // yet got the first add: it must still refuse that add when it arrives, not keep the element.
    const a = L.bottom();
    const n = 60;
    for (let i = 0; i < n; i++) apply(a, a.addDelta(el(i), BigInt(1000 + i)));
    const group = L.clone(a.removeDelta(el(0)));
    for (let i = 1; i < n; i++) L.joinGroupInPlace!(group, a.removeDelta(el(i)));
    assert.ok(group.tombstones.base !== 0, "the group's filter shifted (the case under test)");
    const c = L.bottom();
    apply(c, c.addDelta(el(200), 7n)); // c's filter is not empty: it unions, not adopts
    apply(c, c.removeDelta(el(200)));
    c.joinInPlace(group);
    for (let i = 0; i < n; i++) {
      c.joinInPlace(L.bottom().addDelta(el(i), BigInt(1000 + i))); // the add as it left a

      assert.ok(!c.has(el(i)), `element ${i}: its remove was lost on the way`);
    }
  });

  it("takes dots as bigints or 8 bytes and tells which are fresh", () => {
    const bytes = Uint8Array.of(1, 0, 0, 0, 0, 0, 0, 0x80);
    assert.equal(toDot(bytes), (1n << 63n) + 1n);
    assert.deepEqual(dotBytes(toDot(bytes)), bytes);
    assert.throws(() => toDot(-1n), RangeError);
    assert.throws(() => toDot(1n << 64n), RangeError);
    assert.throws(() => toDot(new Uint8Array(7)), RangeError);
    const s = L.bottom();
    apply(s, s.addDelta(el(1), 1n));
    apply(s, s.addDelta(el(1), 2n));
    assert.equal(s.isFreshDot(2n), false, "live");
    assert.equal(s.isFreshDot(1n), false, "tombstoned");
    assert.equal(s.isFreshDot(3n), true);
  });

  it("joins a state whose filter has another shape: ⊥ adopts it, a smaller filter gives way to it", () => {
    const other = AWSetProb.bottom(paramsFor(3, 4096, 5, UnionStrategy.CurrentGeneration));
    apply(other, other.addDelta(el(1), 1n));
    const s = L.bottom();
    assert.equal(s.joinInPlace(other), true);
    assert.ok(s.equals(other));
    const small = L.bottom();
    apply(small, small.addDelta(el(2), 2n));
    apply(small, small.removeDelta(el(2)));
    apply(small, small.addDelta(el(3), 3n));
    small.joinInPlace(other);
    assert.deepEqual(small.params, other.params, "error 3's filter is the greater");
    assert.deepEqual(small.elements().map((b) => b[0]), [1, 3]);
  });
});

describe("AWSET_PROB forgetting window", () => {
  it("a stale replica cannot undo a remove inside the window, and can once it is forgotten", () => {
    const P = { k: 3, l: 4, m: 512, strategy: UnionStrategy.CurrentGeneration } as const; // g = 118
    const Ls = makeAWSetProbLattice(P);
    const rng = new SplitMix64(77);
    const r = Ls.bottom();
    const N = 50;
    for (let i = 0; i < N; i++) apply(r, r.addDelta(Uint8Array.of(1, i), rng.next()));
    const stale = Ls.clone(r);
    for (let i = 0; i < N; i++) apply(r, r.removeDelta(Uint8Array.of(1, i)));
    const g = r.tombstones.g;
    // Churn on other elements: each add+remove puts one dot in the filter.
    const churn = (times: number) => {
      for (let i = 0; i < times; i++) {
        const e = Uint8Array.of(2, i & 0xff, i >> 8);
        apply(r, r.addDelta(e, rng.next()));
        apply(r, r.removeDelta(e));
      }
    };
    // The N removals plus this churn stay within l·g - 1 insertions: at most l shifts.
    churn(P.l * g - 1 - N);
    assert.equal(Ls.join(r, stale).size, 0, "no removed element comes back inside the window");
    assert.equal(Ls.join(stale, r).size, 0);
    // k more generations push every slice the removals used out of the filter.
    churn(P.k * g + 1);
    const back = Ls.join(r, stale).size;
    const fp = r.tombstones.estimatedFp();
    assert.ok(back >= N * (1 - fp) - 4 * Math.sqrt(N * fp) - 1, `${back} of ${N} forgotten removals undone (FP ${fp})`);
  });
});

describe("AWSET_PROB codec and Lattice object", () => {
  function sample(): AWSetProb {
    const s = L.bottom();
    apply(s, s.addDelta(el(3), 30n));
    apply(s, s.addDelta(el(1), 10n));
    apply(s, s.addDelta(el(1), 11n));
    apply(s, s.addDelta(el(2), 20n));
    return L.join(s, (() => { const t = L.clone(s); apply(t, t.addDelta(el(2), 21n)); return t; })());
  }

  it("has the AWSET_PROB type, the seed's default filter and an empty causal context", () => {
    assert.equal(L.type, ObjectType.AWSET_PROB);
    assert.deepEqual(DEFAULT_AWSET_PROB_PARAMS, { k: 12, l: 88, m: 832, strategy: UnionStrategy.CurrentGeneration });
    assert.ok(L.context(sample()).isEmpty());
    assert.equal(L.size!(sample()), 3);
  });

  it("orders states: a state with an element the other never saw is not below it", () => {
    const a = sample();
    const b = L.bottom();
    assert.ok(!L.leq(a, b));
    assert.ok(L.leq(b, a));
  });

  it("round-trips canonically and rejects malformed input", () => {
    const s = sample();
    const bytes = encodeAWSetProb(s);
    assert.ok(decodeAWSetProb(bytes).equals(s));
    assert.deepEqual(encodeAWSetProb(decodeAWSetProb(bytes)), bytes);
    const filterEnd = 1 + apbfStateEncodedSize(s.tombstones);
    // Entries start after the filter: count, then (len, element, dot count, dots) per element.
    const entries = (list: [number[], bigint[]][]): Uint8Array => {
      const parts: number[] = [...bytes.subarray(0, filterEnd)];
      const u32 = (n: number) => parts.push(n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24);
      u32(list.length);
      for (const [e, dots] of list) {
        u32(e.length);
        parts.push(...e);
        u32(dots.length);
        for (const d of dots) parts.push(...dotBytes(d));
      }
      return Uint8Array.from(parts);
    };
    assert.ok(decodeAWSetProb(entries([[[1], [1n]], [[2], [2n, 3n]]])).size === 2, "a hand-built encoding decodes");
    const bad: [string, Uint8Array][] = [
      ["empty", new Uint8Array(0)],
      ["version", Uint8Array.from([9, ...bytes.subarray(1)])],
      ["truncated", bytes.subarray(0, bytes.length - 3)],
      ["trailing", Uint8Array.from([...bytes, 0])],
      ["unsorted elements", entries([[[2], [1n]], [[1], [2n]]])],
      ["duplicate element", entries([[[1], [1n]], [[1], [2n]]])],
      ["no dots", entries([[[1], []]])],
      ["empty element", entries([[[], [1n]]])],
      ["unsorted dots", entries([[[1], [3n, 2n]]])],
      ["dot under two elements", entries([[[1], [5n]], [[2], [5n]]])],
      ["bad filter", Uint8Array.from([1, 1, 1, 0, ...bytes.subarray(4)])],
    ];
    for (const [what, b] of bad) assert.throws(() => decodeAWSetProb(b), DecodeError, what);
  });

  it("encodes an add's or a remove's delta in bytes proportional to its dots, not the filter's size", () => {
    const s = L.bottom();
    const add = s.addDelta(Uint8Array.of(1), 7n);
    s.joinInPlace(add);
    const rm = s.removeDelta(Uint8Array.of(1));
    s.joinInPlace(rm);
    // Header (1) + filter header and hash indices (16 + 100) + two empty bit lists (8) + one entry
    // + an empty list of removed dots (4).
    assert.equal(L.encodedSize(add), 1 + 16 + 100 + 8 + 4 + 4 + 1 + 4 + 8 + 4);
    // One removed dot: k = 12 bits in the slices and 12 in the shadows, at most 2 varint bytes
    // each, and the dot listed (4 + 8).
    assert.ok(L.encodedSize(rm) <= 1 + 16 + 100 + 8 + 24 * 2 + 4 + 12, `${L.encodedSize(rm)} bytes`);
    assert.ok(L.decode(L.encode(rm)).equals(rm));
  });

  it("decodes states of any filter shape (a key's first Add chooses it)", () => {
    const other = AWSetProb.bottom(paramsFor(2, 4096, 5, UnionStrategy.ActiveSlices));
    other.joinInPlace(other.addDelta(Uint8Array.of(1), 5n));
    const back = L.decode(L.encode(other));
    assert.ok(back.equals(other));
    assert.equal(back.params.strategy, UnionStrategy.ActiveSlices);
    assert.ok(L.decode(L.encode(L.bottom())).isBottom());
    assert.ok(Apbf.create(DEFAULT_AWSET_PROB_PARAMS).byteSize() === 11_648);
  });
});

describe("AWSET_PROB batch deltas", () => {
  it("carry the joins their batch made, handed over once: adds of new elements as one, each remove as its own", async () => {
    const { operationsFor } = await import("../../services/crdt/index.js");
    const ops = operationsFor(ObjectType.AWSET_PROB)!;
    const rng = new SplitMix64(3);
    const env = { replica: "r", random: () => 0.5, randomId: () => rng.next() };
    const s = ops.create({ capacity: 4096 }) as AWSetProb;
    const els = ["a", "b", "c"].map((x) => Buffer.from(x));
    const added = ops.add(s, els, env) as AWSetProb;
    assert.equal(added.takeSteps().length, 1);
    const removed = ops.remove!(s, els, env) as AWSetProb;
    const steps = removed.takeSteps();
    assert.equal(steps.length, 3);
    assert.deepEqual(removed.takeSteps(), [removed], "handed over once");
    assert.equal(s.size, 0);
  });

  it("an Add that finds no fresh dot is refused RESOURCE_EXHAUSTED with what to do, and changes nothing", async () => {
    const { operationsFor } = await import("../../services/crdt/index.js");
    const { toServiceError } = await import("../../services/replica/errors.js");
    const ops = operationsFor(ObjectType.AWSET_PROB)!;
    const s = ops.create({ capacity: 4096 }) as AWSetProb;
    ops.add(s, [Buffer.from("a")], { replica: "r", random: () => 0.5, randomId: () => 7n });
    // Every draw is a dot the set holds (as every draw is one its filter reports, once saturated).
    const err = (() => {
      try {
        ops.add(s, [Buffer.from("b")], { replica: "r", random: () => 0.5, randomId: () => 7n });
      } catch (e) {
        return e;
      }
    })();
    assert.ok(err instanceof TombstonesSaturatedError);
    const e = toServiceError(err, () => assert.fail("not unexpected"));
    assert.equal(e.code, 8); // RESOURCE_EXHAUSTED
    assert.match(e.details!, /no fresh dot after 64 draws.*nothing was added.*larger capacity or another union strategy/);
    assert.deepEqual(s.elements().map(String), ["a"]);
  });
});

describe("AWSET_PROB refusals", () => {
  // c's filter reports dot 10 although nobody removed it: another element's remove with the same
  // dot stands for a false positive. c then refuses a's add of element 1 made with dot 10.
  const replicas = () => {
    const a = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
    apply(a, a.addDelta(el(1), 10n));
    const b = a.clone();
    const c = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
    apply(c, c.addDelta(el(9), 10n));
    apply(c, c.removeDelta(el(9)));
    return { a, b, c };
  };

  it("a refused dot comes back as a remove that the replicas holding it join", () => {
    const { a, b, c } = replicas();
    const reply = c.refusalOf(a);
    assert.ok(reply !== undefined);
    apply(c, a);
    assert.equal(c.has(el(1)), false, "c refuses the add");
    assert.equal(b.has(el(1)), true);
    // Deltas from c carry only its own operations' tombstones: without the reply b keeps the add for good.
    apply(b, c.removeDelta(el(5)));
    assert.equal(b.has(el(1)), true);
    apply(b, reply);
    apply(a, reply);
    assert.equal(b.has(el(1)), false, "b drops the dot c refused");
    assert.equal(a.has(el(1)), false);
    assert.deepEqual([a, b, c].map((s) => s.elements().map((e) => e[0])), [[], [], []]);
  });

  it("joining its own reply changes no answer of the refusing replica", () => {
    const { a, c } = replicas();
    const reply = c.refusalOf(a)!;
    apply(c, a);
    const before = c.elements();
    apply(c, reply);
    assert.deepEqual(c.elements(), before);
    assert.ok(c.tombstones.query(dotBytes(10n)));
  });

  it("refuses nothing it holds, nothing its filter does not report, and no other shape", () => {
    const { a, b, c } = replicas();
    assert.equal(b.refusalOf(a), undefined, "b holds dot 10");
    const fresh = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
    assert.equal(fresh.refusalOf(a), undefined, "an empty filter reports nothing");
    assert.equal(c.refusalOf(c.removeDelta(el(9))), undefined, "a delta with no live dot");
    const other = AWSetProb.bottom(makeAWSetProbLattice({ ...DEFAULT_AWSET_PROB_PARAMS, m: DEFAULT_AWSET_PROB_PARAMS.m * 2 }).bottom().params);
    apply(other, other.addDelta(el(1), 10n));
    assert.equal(c.refusalOf(other), undefined);
  });
});
