// The COUNTER state as a product lattice (PN-counter × retry filter, crdt/product.ts and
// crdt/retry-filter.ts): the lattice laws over states and deltas built by increments with and
// without request ids on three replicas, at several times and with two filter parameter sets
// (their order decides the join); the codec; and retry-safety: with deltas delivered, a retried
// id within the retention window is absorbed on every replica, a fresh one applied.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CounterLattice as L, PNCounter, RetryFilterLattice, retentionMs, retryFilterParams } from "../../services/crdt/index.ts";

const run = (p: fc.IProperty<unknown[]>) => fc.assert(p, { numRuns: 60 });
const P = 1000;
const small = retryFilterParams({ idsPerPeriod: 4, falsePositiveRate: 0.05, periodMs: P, pastEpochs: 2 });
const other = retryFilterParams({ idsPerPeriod: 8, falsePositiveRate: 0.05, periodMs: P, pastEpochs: 2 });
const REPLICAS = ["r0", "r1", "r2"];

type Op =
  | { kind: "inc"; r: number; amount: number; id: number | null; t: number; big: boolean }
  | { kind: "deliver"; from: number; to: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("inc" as const),
    r: fc.nat(2),
    amount: fc.integer({ min: -3, max: 3 }).filter((n) => n !== 0),
    id: fc.option(fc.nat(5)),
    t: fc.nat(8 * P),
    big: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("deliver" as const), from: fc.nat(2), to: fc.nat(2) }),
);

/** Replay a script; every state and delta seen, for the laws. */
function pool(ops: Op[]): PNCounter[] {
  const states = REPLICAS.map(() => PNCounter.bottom());
  const out: PNCounter[] = [PNCounter.bottom()];
  for (const o of ops) {
    if (o.kind === "deliver") {
      states[o.to] = L.join(states[o.to]!, states[o.from]!);
    } else if (o.id === null) {
      const d = states[o.r]!.incrementDelta(REPLICAS[o.r]!, BigInt(o.amount));
      out.push(d);
      states[o.r] = L.join(states[o.r]!, d);
    } else {
      const s = states[o.r]!;
      const params = s.filter.params ?? (o.big ? other : small);
      const r = s.retryIncrementDelta(REPLICAS[o.r]!, BigInt(o.amount), `id-${o.id}`, o.t, params, false);
      if (r.delta !== null) {
        out.push(r.delta);
        states[o.r] = L.join(s, r.delta);
      }
    }
    out.push(...states);
  }
  return out;
}

const pools = fc.array(op, { maxLength: 14 }).map(pool);
const pick = (xs: PNCounter[], i: number) => xs[i % xs.length]!;
const triple = fc.tuple(pools, fc.nat(), fc.nat(), fc.nat());

describe("COUNTER: PN-counter × retry filter is a lattice", () => {
  it("join is commutative, associative and idempotent", () => {
    run(
      fc.property(triple, ([xs, i, j, k]) => {
        const [a, b, c] = [pick(xs, i), pick(xs, j), pick(xs, k)];
        assert.ok(L.equals(L.join(a, b), L.join(b, a)));
        assert.ok(L.equals(L.join(L.join(a, b), c), L.join(a, L.join(b, c))));
        assert.ok(L.equals(L.join(a, a), a));
      }),
    );
  });

  it("leq is the join's order, bottom is least, joinInPlace agrees with join", () => {
    run(
      fc.property(triple, ([xs, i, j]) => {
        const [a, b] = [pick(xs, i), pick(xs, j)];
        assert.equal(L.leq(a, b), L.equals(L.join(a, b), b));
        assert.ok(L.leq(a, L.join(a, b)) && L.leq(b, L.join(a, b)));
        assert.ok(L.leq(L.bottom(), a));
        const t = L.clone(a);
        const changed = L.joinInPlace(t, b);
        assert.ok(L.equals(t, L.join(a, b)));
        assert.equal(changed, !L.leq(b, a));
      }),
    );
  });

  it("decompose joins back to the state, with no bottom and no redundant part; difference is the new part", () => {
    run(
      fc.property(triple, ([xs, i, j]) => {
        const [a, b] = [pick(xs, i), pick(xs, j)];
        const parts = L.decompose(a);
        assert.ok(L.equals(parts.reduce((x, y) => L.join(x, y), L.bottom()), a));
        for (const p of parts) assert.ok(!L.isBottom(p));
        if (parts.length <= 40) {
          for (let q = 0; q < parts.length; q++) {
            const rest = parts.filter((_, r) => r !== q).reduce((x, y) => L.join(x, y), L.bottom());
            assert.ok(!L.leq(parts[q]!, rest), "a redundant irreducible");
          }
        }
        const d = L.difference(a, b);
        assert.ok(L.equals(L.join(d, b), L.join(a, b)));
        assert.equal(L.isBottom(d), L.leq(a, b));
      }),
    );
  });

  it("encodes canonically and decodes to an equal state; encodedSize is exact", () => {
    run(
      fc.property(pools, (xs) => {
        for (const s of xs) {
          const bytes = L.encode(s);
          assert.equal(L.encodedSize(s), bytes.length);
          assert.ok(L.equals(L.decode(bytes), s));
          assert.deepEqual(L.encode(L.decode(bytes)), bytes);
        }
      }),
    );
  });

  it("filters of different parameters join to the filter of the greater ones, the counters still join", () => {
    const a = PNCounter.bottom().retryIncrementDelta("r0", 2n, "x", 5, small, false).delta!;
    const b = PNCounter.bottom().retryIncrementDelta("r1", 3n, "y", 5, other, false).delta!;
    const j = L.join(a, b);
    assert.equal(j.value(), 5n);
    assert.ok(L.equals(L.join(b, a), j));
    const winner = RetryFilterLattice.leq(a.filter, b.filter) ? b : a;
    assert.ok(RetryFilterLattice.equals(j.filter, winner.filter));
  });
});

describe("COUNTER: retries with a request id", () => {
  const big = retryFilterParams({ idsPerPeriod: 1000, falsePositiveRate: 1e-9, periodMs: P, pastEpochs: 3 });

  it("with every delta delivered, each id is applied once whichever replica its retries reach within the window", () => {
    run(
      fc.property(
        fc.array(fc.record({ r: fc.nat(2), id: fc.nat(6), amount: fc.integer({ min: 1, max: 5 }), dt: fc.nat(P) }), { maxLength: 30 }),
        (calls) => {
          // All calls fall within one retention window of the first: times grow by at most P per call
          // and are capped below the window.
          const window = retentionMs(big);
          const states = REPLICAS.map(() => PNCounter.bottom());
          const firstAmount = new Map<number, number>();
          let t = 0;
          for (const c of calls) {
            t = Math.min(t + c.dt, window - 1);
            const r = states[c.r]!.retryIncrementDelta(REPLICAS[c.r]!, BigInt(c.amount), `id-${c.id}`, t, big, false);
            assert.equal(r.duplicate, firstAmount.has(c.id), `id-${c.id} at ${t}`);
            if (!r.duplicate) firstAmount.set(c.id, c.amount);
            if (r.delta !== null) for (let q = 0; q < states.length; q++) states[q] = L.join(states[q]!, r.delta);
          }
          const expected = [...firstAmount.values()].reduce((x, y) => x + y, 0);
          for (const s of states) assert.equal(s.value(), BigInt(expected));
        },
      ),
    );
  });

  it("without a request id every call counts", () => {
    let s = PNCounter.bottom();
    for (let i = 0; i < 3; i++) s = L.join(s, s.incrementDelta("r0", 1n));
    assert.equal(s.value(), 3n);
  });

  it("the retention window holds to the millisecond on one clock, and an id is forgotten after (N+2)·P", () => {
    const s0 = PNCounter.bottom();
    for (const t0 of [0, P - 1, 7 * P + 123]) {
      const d = s0.retryIncrementDelta("r0", 1n, "x", t0, big, false).delta!;
      const s = L.join(s0, d);
      assert.equal(s.retryIncrementDelta("r0", 1n, "x", t0 + retentionMs(big) - 1, big, false).duplicate, true);
      assert.equal(s.retryIncrementDelta("r1", 1n, "x", t0 + (big.pastEpochs + 2) * P, big, false).duplicate, false);
    }
  });
});
