// The replicated Forgetful Bloom Filter: lattice laws at a fixed now, convergence under reordering,
// duplication and loss-then-resend, no false negatives inside the retention window (the retry
// property), forgetting, clock-skew reports, and the codec.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  FbfParamsMismatchError,
  ReplicatedFbf,
  ReplicatedFbfLattice as L,
  type ReplicatedFbfParams,
  epochOf,
  joinAt,
  joinInPlaceAt,
  prune,
  pruneInPlace,
  retentionMs,
  skewReport,
} from "../../services/crdt/replicated-fbf.js";
import { DecodeError } from "../../services/crdt/errors.js";
import { HASH_FAMILY } from "../../services/crdt/element-hash.js";
import { ObjectType } from "../../services/gen/deltaset/v1/types.js";
import { RUNS } from "./universe.js";

const P = 1000;
// Small filters so that ids share bits and the laws see overlapping states.
const SMALL: ReplicatedFbfParams = { m: 64, k: 3, hashFamily: HASH_FAMILY, periodMs: P, pastEpochs: 2 };
const run = (p: fc.IPropertyWithHooks<unknown>, numRuns = RUNS) => fc.assert(p, { numRuns });
const eq = (a: ReplicatedFbf, b: ReplicatedFbf) => L.equals(a, b);
const joinAll = (xs: ReplicatedFbf[]) => xs.reduce((acc, x) => L.join(acc, x), L.bottom());

// ---------------------------------------------------------------- arbitraries

const insertOp = fc.record({ id: fc.integer({ min: 0, max: 40 }).map((i) => `id-${i}`), now: fc.nat(8 * P) });

/** A state built by inserts, by raw (epoch, bit) pairs, the empty state with params, or bottom. */
const stateArb: fc.Arbitrary<ReplicatedFbf> = fc.oneof(
  fc.array(insertOp, { maxLength: 8 }).map((ops) => {
    const s = ReplicatedFbf.empty(SMALL);
    for (const o of ops) s.insert(o.id, o.now);
    return s;
  }),
  fc.array(fc.tuple(fc.nat(10), fc.nat(SMALL.m - 1)), { maxLength: 12 }).map((pairs) => {
    const epochs = new Map<number, Uint8Array>();
    for (const [e, i] of pairs) {
      const b = epochs.get(e) ?? new Uint8Array(SMALL.m / 8);
      b[i >>> 3]! |= 1 << (i & 7);
      epochs.set(e, b);
    }
    return new ReplicatedFbf(SMALL, epochs);
  }),
  fc.constant(null).map(() => ReplicatedFbf.empty(SMALL)),
  fc.constant(null).map(() => L.bottom()),
);

// ---------------------------------------------------------------- lattice laws (fixed now)

describe("replicated FBF: lattice laws", () => {
  it("join is idempotent, commutative, associative; bottom is its identity", () =>
    run(
      fc.property(stateArb, stateArb, stateArb, (a, b, c) => {
        assert.ok(eq(L.join(a, a), a));
        assert.ok(eq(L.join(a, b), L.join(b, a)));
        assert.ok(eq(L.join(L.join(a, b), c), L.join(a, L.join(b, c))));
        assert.ok(eq(L.join(a, L.bottom()), a) && eq(L.join(L.bottom(), a), a));
        assert.ok(L.isBottom(L.bottom()));
      }),
    ));

  it("leq is the order of the join; joinInPlace agrees with join and reports change", () =>
    run(
      fc.property(stateArb, stateArb, (a, b) => {
        const j = L.join(a, b);
        assert.ok(L.leq(a, j) && L.leq(b, j));
        assert.equal(L.leq(a, b), eq(j, b));
        const t = L.clone(a);
        const changed = L.joinInPlace(t, b);
        assert.ok(eq(t, j));
        assert.equal(changed, !eq(a, j));
        assert.ok(eq(a, L.clone(a)), "clone is a deep, equal copy");
      }),
    ));

  it("decompose joins back to the state, into irreducibles none of which is redundant", () =>
    run(
      fc.property(stateArb, (s) => {
        const parts = L.decompose(s);
        assert.ok(eq(joinAll(parts), s));
        for (const p of parts) {
          assert.ok(!L.isBottom(p));
          assert.ok(L.decompose(p).length === 1, "irreducible");
        }
        if (parts.length <= 40) {
          parts.forEach((_, i) => {
            const rest = joinAll(parts.filter((_, j) => j !== i));
            assert.ok(!eq(rest, s), `part ${i} is redundant`);
          });
        }
      }),
    ));

  it("difference is sound and minimal: b ⊔ Δ(a, b) = a ⊔ b, Δ ⊑ a, nothing of Δ is below b", () =>
    run(
      fc.property(stateArb, stateArb, (a, b) => {
        const d = L.difference(a, b);
        assert.ok(eq(L.join(b, d), L.join(a, b)));
        assert.ok(L.leq(d, a));
        for (const p of L.decompose(d)) assert.ok(!L.leq(p, b));
        assert.ok(L.isBottom(L.difference(a, a)));
        assert.ok(eq(L.difference(a, L.bottom()), a));
      }),
    ));

  it("prune at a fixed now distributes over join (pruned replicas still converge)", () =>
    run(
      fc.property(stateArb, stateArb, fc.nat(12 * P), (a, b, now) => {
        assert.ok(eq(prune(L.join(a, b), now), L.join(prune(a, now), prune(b, now))));
        assert.ok(eq(joinAt(a, b, now), prune(L.join(a, b), now)));
        const t = L.clone(a);
        joinInPlaceAt(t, b, now);
        assert.ok(eq(t, joinAt(a, b, now)));
      }),
    ));

  it("joining different parameters throws FbfParamsMismatchError; bottom joins with anything", () => {
    const a = ReplicatedFbf.empty(SMALL);
    a.insert("x", 0);
    for (const other of [
      { ...SMALL, m: 128 },
      { ...SMALL, k: 4 },
      { ...SMALL, periodMs: 2 * P },
      { ...SMALL, pastEpochs: 3 },
    ]) {
      const b = ReplicatedFbf.empty(other);
      b.insert("x", 0);
      assert.throws(() => L.join(a, b), FbfParamsMismatchError);
      assert.throws(() => L.joinInPlace(L.clone(a), b), /different parameters/);
      assert.equal(L.leq(a, b), false);
    }
    assert.ok(eq(L.join(L.bottom(), a), a));
    assert.equal(L.type, ObjectType.OBJECT_TYPE_UNSPECIFIED);
    assert.ok(L.context(a).isEmpty());
  });
});

// ---------------------------------------------------------------- convergence

describe("replicated FBF: convergence of three replicas", () => {
  const scenario = fc.record({
    ops: fc.array(fc.record({ replica: fc.nat(2), id: fc.nat(30), now: fc.nat(6 * P) }), { minLength: 1, maxLength: 25 }),
    // Per message: a delivery priority, a duplicate flag, and a loss flag (lost ones are resent last).
    fates: fc.array(fc.tuple(fc.nat(1000), fc.boolean(), fc.boolean()), { minLength: 50, maxLength: 50 }),
  });

  it("replicas that receive every insert delta, in any order, duplicated or lost then resent, are equal", () =>
    run(
      fc.property(scenario, ({ ops, fates }) => {
        const reps = [0, 1, 2].map(() => ReplicatedFbf.empty(SMALL));
        const msgs: { to: number; delta: ReplicatedFbf; key: number; dup: boolean; lost: boolean }[] = [];
        const deltas: ReplicatedFbf[] = [];
        for (const o of ops) {
          const d = reps[o.replica]!.insert(`id-${o.id}`, o.now);
          deltas.push(d);
          for (const to of [0, 1, 2]) {
            if (to === o.replica) continue;
            const [key, dup, lost] = fates[msgs.length % fates.length]!;
            msgs.push({ to, delta: L.decode(L.encode(d)), key, dup, lost });
          }
        }
        const order = [...msgs].sort((x, y) => x.key - y.key);
        for (const m of order) {
          if (m.lost) continue;
          L.joinInPlace(reps[m.to]!, m.delta);
          if (m.dup) L.joinInPlace(reps[m.to]!, m.delta);
        }
        for (const m of order) if (m.lost) L.joinInPlace(reps[m.to]!, m.delta);
        const expected = joinAll(deltas);
        for (const r of reps) assert.ok(eq(r, expected));
        // And every id is found everywhere right after its last insert.
        for (const o of ops) for (const r of reps) assert.ok(r.contains(`id-${o.id}`, o.now));
      }),
    ));

  it("with pruning at a common now, replicas converge to the pruned join", () =>
    run(
      fc.property(scenario, fc.nat(12 * P), ({ ops, fates }, now) => {
        const reps = [0, 1, 2].map(() => ReplicatedFbf.empty(SMALL));
        const deltas = ops.map((o) => reps[o.replica]!.insert(`id-${o.id}`, o.now));
        deltas.forEach((d, i) => {
          const [, , lost] = fates[i % fates.length]!;
          for (const r of reps) joinInPlaceAt(r, d, lost ? now : Math.min(now, ops[i]!.now));
        });
        for (const r of reps) pruneInPlace(r, now);
        const expected = prune(joinAll(deltas), now);
        for (const r of reps) assert.ok(eq(r, expected));
      }),
    ));
});

// ---------------------------------------------------------------- the retry property

describe("replicated FBF: no false negatives inside the retention window", () => {
  const params = (N: number): ReplicatedFbfParams => ({ m: 256, k: 4, hashFamily: HASH_FAMILY, periodMs: P, pastEpochs: N });
  // The skew bound of the header of replicated-fbf.ts: any two nodes' clocks differ by at most B.
  const B = P / 10;
  // Integers in [lo, hi], half of them at an end: the window's edge needs several ends at once.
  const edgy = (lo: number, hi: number) => fc.oneof(fc.integer({ min: lo, max: hi }), fc.constantFrom(lo, hi));

  /**
   * The retry property. Times t, t' are reference time; node r's clock reads time + skews[r].
   * `spread` bounds how far apart two clocks may be, and the id must be found for
   * t <= t' < t + (N+1)·P - spread at the inserter and at every replica holding its delta.
   */
  const retained = (skewsArb: fc.Arbitrary<number[]>, spread: number) =>
    fc.property(
      fc.record({
        N: fc.integer({ min: 1, max: 4 }),
        origin: fc.nat(2),
        // The inserter's clock reads epoch·P + phase at t; the phases next to an epoch end are the
        // ones that reach the edge of the window.
        epoch: fc.integer({ min: 1, max: 20 }),
        phase: edgy(0, P - 1),
        // where in the window t' falls, in thousandths from t to its last ms
        at: edgy(0, 1000),
        skews: skewsArb,
        receivers: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
        // receive and prune times, each in thousandths of [t, t']
        recvAt: fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 3, maxLength: 3 }),
        other: fc.array(fc.record({ replica: fc.nat(2), id: fc.nat(50), dt: fc.integer({ min: -3 * P, max: 6 * P }) }), {
          maxLength: 10,
        }),
      }),
      ({ N, origin, epoch, phase, at, skews, receivers, recvAt, other }) => {
        assert.ok(Math.max(...skews) - Math.min(...skews) <= spread, "the generator keeps the clocks within the bound");
        const p = params(N);
        const local = (r: number, time: number) => Math.max(0, time + skews[r]!);
        const t = epoch * P + phase - skews[origin]!; // > 0: epoch >= 1 and skews >= -B
        const window = retentionMs(p) - spread;
        const tPrime = t + Math.round((at * (window - 1)) / 1000);
        const reps = [0, 1, 2].map(() => ReplicatedFbf.empty(p));
        for (const o of other) reps[o.replica]!.insert(`other-${o.id}`, local(o.replica, Math.max(0, t + o.dt)));
        const delta = reps[origin]!.insert("the-op", local(origin, t));
        const wire = L.decode(L.encode(delta));
        for (const r of [0, 1, 2]) {
          if (r === origin || !receivers[r]) continue;
          const when = t + Math.round((recvAt[r]! * (tPrime - t)) / 1000);
          joinInPlaceAt(reps[r]!, wire, local(r, when));
          pruneInPlace(reps[r]!, local(r, when));
        }
        pruneInPlace(reps[origin]!, local(origin, tPrime));
        for (const r of [0, 1, 2]) {
          if (r !== origin && !receivers[r]) continue;
          assert.ok(reps[r]!.contains("the-op", local(r, tPrime)), `replica ${r} at ${tPrime} (t = ${t})`);
        }
      },
    );

  it("an id inserted at t is present at every replica that received its delta, for t <= t' < t + (N+1)·P - B", () =>
    run(
      retained(
        // A common offset plus each node's own in [0, B]: any two clocks at most B apart.
        fc
          .tuple(fc.integer({ min: -B, max: B }), fc.array(edgy(0, B), { minLength: 3, maxLength: 3 }))
          .map(([shift, own]) => own.map((o) => shift + o)),
        B,
      ),
    ));

  it("with every clock within B of reference time (so 2B apart), the window is t + (N+1)·P - 2B", () =>
    fc.assert(retained(fc.array(edgy(-B, B), { minLength: 3, maxLength: 3 }), 2 * B), {
      numRuns: RUNS,
      // Clocks 102 ms apart: outside the first property's assumption, which once drew it (seed 706530460).
      examples: [
        [
          {
            N: 1,
            origin: 0,
            epoch: 0,
            phase: 999,
            at: 1000,
            skews: [-15, 0, 87],
            receivers: [false, false, true],
            recvAt: [0, 0, 0],
            other: [],
          },
        ],
      ],
    }));

  it("the window is tight: a checker B ahead of the inserter may lose the id 1 ms after it", () => {
    for (const N of [1, 2, 4]) {
      const p = params(N);
      const t = 8 * P - 1; // the inserter's clock reads t: the last ms of its epoch
      const origin = ReplicatedFbf.empty(p);
      const checker = ReplicatedFbf.empty(p);
      joinInPlaceAt(checker, origin.insert("x", t), t + B);
      const end = t + retentionMs(p) - B; // the first instant after [t, t + (N+1)·P - B)
      // The checker's clock reads reference time + B.
      assert.ok(checker.contains("x", end - 1 + B), `N = ${N}: found inside the window`);
      assert.ok(checker.contains("x", end + B), `N = ${N}: still found at the edge`);
      assert.equal(checker.contains("x", end + 1 + B), false, `N = ${N}: gone 1 ms later`);
      // The inserter's own clock keeps it for (N+1)·P.
      assert.ok(origin.contains("x", t + retentionMs(p)));
    }
  });

  it("after the window the id is forgotten and pruning drops its epochs; a late join does not resurrect them", () =>
    run(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.nat(20 * P), fc.nat(5 * P), (N, t, extra) => {
        const p = params(N);
        const s = ReplicatedFbf.empty(p);
        const delta = s.insert("x", t);
        const I = epochOf(t, P);
        const late = (I + N + 2) * P + extra;
        assert.ok(s.contains("x", (I + N + 2) * P - 1), "present until the last ms of its window");
        assert.equal(s.contains("x", late), false);
        pruneInPlace(s, late);
        assert.ok(s.epochs.size === 0);
        assert.equal(joinInPlaceAt(s, delta, late), false, "old epochs are ignored");
        assert.ok(s.epochs.size === 0);
      }),
    ));

  it("checkAndInsert treats a member as a retry and ships no delta", () => {
    const a = ReplicatedFbf.empty(params(2));
    const b = ReplicatedFbf.empty(params(2));
    const first = a.checkAndInsert("op-1", 5 * P + 10);
    assert.equal(first.duplicate, false);
    L.joinInPlace(b, first.delta!);
    // The client's retry reaches the other replica two periods later.
    assert.deepEqual(b.checkAndInsert("op-1", 7 * P + 500), { duplicate: true, delta: null });
  });

  it("fppEstimate rises with the fill and ignores epochs outside the window", () => {
    const s = ReplicatedFbf.empty(params(1));
    assert.equal(s.fppEstimate(0), 0);
    for (let i = 0; i < 40; i++) s.insert(`id-${i}`, 10);
    const a = s.fppEstimate(10);
    for (let i = 40; i < 80; i++) s.insert(`id-${i}`, 10);
    assert.ok(s.fppEstimate(10) > a && a > 0);
    assert.equal(s.fppEstimate(10 * P), 0);
  });
});

// ---------------------------------------------------------------- clock skew

describe("replicated FBF: clock-skew reports", () => {
  const B = 100;
  const epochsOf = (d: ReplicatedFbf) => [...d.epochs.keys()];
  const delta = (s: number) => ReplicatedFbf.empty(SMALL).insertDelta("x", s);

  it("no report when the clocks are within B and delivery is prompt", () =>
    run(
      fc.property(fc.integer({ min: 2 * P, max: 50 * P }), fc.integer({ min: -B, max: B }), (s, d) => {
        assert.equal(skewReport(epochsOf(delta(s)), s + d, P, B), null);
      }),
    ));

  it("a sender more than B + P ahead is always reported as ahead", () =>
    run(
      fc.property(fc.integer({ min: 2 * P, max: 50 * P }), fc.integer({ min: B + P + 1, max: 5 * P }), (s, ahead) => {
        const r = skewReport(epochsOf(delta(s)), s - ahead, P, B);
        assert.equal(r?.direction, "ahead");
        assert.ok(r!.minSkewMs > B && r!.minSkewMs <= ahead);
      }),
    ));

  it("examples: ahead, undecidable, behind", () => {
    assert.deepEqual(skewReport(epochsOf(delta(5000)), 4500, P, B), {
      direction: "ahead",
      senderEpoch: 5,
      localEpoch: 4,
      minSkewMs: 500,
    });
    assert.equal(skewReport(epochsOf(delta(5000)), 4950, P, B), null);
    assert.equal(skewReport(epochsOf(delta(5000)), 6200, P, B)?.direction, "behind");
    assert.equal(skewReport([], 6200, P, B), null);
  });
});

// ---------------------------------------------------------------- codec

describe("replicated FBF: codec", () => {
  it("round trips, encodedSize is exact, and equal states have equal bytes", () =>
    run(
      fc.property(stateArb, stateArb, (a, b) => {
        const bytes = L.encode(a);
        assert.equal(L.encodedSize(a), bytes.length);
        const back = L.decode(bytes);
        assert.ok(eq(back, a));
        assert.deepEqual(L.encode(back), bytes);
        if (eq(a, b)) assert.deepEqual(L.encode(b), bytes);
      }),
    ));

  it("an insert delta is small whatever m is; a full filter switches to the dense form", () => {
    const big: ReplicatedFbfParams = { m: 1 << 20, k: 5, hashFamily: HASH_FAMILY, periodMs: 60_000, pastEpochs: 4 };
    const s = ReplicatedFbf.empty(big);
    const d = s.insert("client-7:seq-123", Date.UTC(2025, 0, 1));
    assert.ok(L.encode(d).length < 60, `delta of ${L.encode(d).length} bytes`);
    const full = ReplicatedFbf.empty(SMALL);
    for (let i = 0; i < 60; i++) full.insert(`id-${i}`, 0);
    const bytes = L.encode(full);
    assert.ok(bytes.length <= 2 + 6 + 1 + 2 * (2 + SMALL.m / 8), `dense: ${bytes.length} bytes`);
  });

  it("every truncation and any trailing byte is a DecodeError", () => {
    const s = ReplicatedFbf.empty(SMALL);
    for (let i = 0; i < 20; i++) s.insert(`id-${i}`, i * 300);
    const bytes = L.encode(s);
    for (let n = 0; n < bytes.length; n++) assert.throws(() => L.decode(bytes.subarray(0, n)), DecodeError, `prefix ${n}`);
    assert.throws(() => L.decode(Uint8Array.from([...bytes, 0])), /trailing/);
  });

  it("malformed inputs are refused with DecodeError", () => {
    const h = HASH_FAMILY;
    // version 1, params (hash, m=64, k=3, P=1000 as varint e8 07, N=2)
    const head = [1, 1, h, 64, 3, 0xe8, 0x07, 2];
    const cases: [number[], RegExp][] = [
      [[2, 0, 0], /version/],
      [[1, 2, 0], /flags/],
      [[1, 0, 1, 0, 0, 1, 0], /without parameters/],
      [[1, 1, h + 1, 64, 3, 0xe8, 0x07, 2, 0], /hash family/],
      [[1, 1, h, 64, 0, 0xe8, 0x07, 2, 0], /k must be/],
      [[...head, 1, 0, 0, 1, 64], /not below m/], // bit 64 of m = 64
      [[...head, 1, 0, 0, 0], /bit count/], // sparse with no bits
      [[...head, 1, 0, 7, 0, 0], /unknown form/],
      [[...head, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0], /canonical/], // one bit sent dense
      [[...head, 2, 0, 0, 1, 5, 0x80, 0x00, 0, 1, 5], /minimal varint/],
      [[...head, 0xff, 0xff, 0x03], /epochs in/],
      [[1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f], /2\^53/],
    ];
    for (const [bytes, why] of cases) {
      assert.throws(() => L.decode(Uint8Array.from(bytes)), (e: unknown) => e instanceof DecodeError && why.test(e.message), `${bytes} ${why}`);
    }
  });

  it("arbitrary bytes either decode to a state that re-encodes to them, or throw DecodeError", () =>
    run(
      fc.property(fc.uint8Array({ maxLength: 40 }), (raw) => {
        const bytes = raw.length >= 2 ? Uint8Array.from([1, raw[0]! & 1, ...raw.subarray(1)]) : raw;
        try {
          const s = L.decode(bytes);
          assert.deepEqual(L.encode(s), bytes);
        } catch (e) {
          assert.ok(e instanceof DecodeError, String(e));
        }
      }),
    ));
});
