// Property tests of the replicated probabilistic filters (seed 001): the join-semilattice laws and
// their consistency with leq (seed 001 Eqs 4.5-4.8, the check its corrected VeriFx template adds),
// join-decomposition and difference, codec round trips, the seed's proved properties restated
// (inflation, GCF universe merge Thm 4.4, ORCF as an OR-Set Thm 4.9, no false negatives), and
// convergence of 3 replicas exchanging deltas under reordering, duplication and loss-then-resend.
//
// Small tables (few buckets, short fingerprints) make collisions, kicks and overflow common.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { Lattice } from "../../services/crdt/lattice.ts";
import { Gbf, GbfLattice, gbfParams } from "../../services/crdt/gbf.ts";
import { Gcf, GcfLattice } from "../../services/crdt/gcf.ts";
import { Orcf, OrcfLattice } from "../../services/crdt/orcf.ts";
import { altIndex, cuckooParams } from "../../services/crdt/cuckoo-table.ts";
import { FilterFullError, type Random, seededRandom } from "../../services/crdt/filter-common.ts";
import { dotKey, makeDot } from "../../services/crdt/dot.ts";
import { ScGbf, ScGbfLattice, ScGcf, ScGcfLattice, ScOrcf, ScOrcfLattice, seriesParams } from "../../services/crdt/scalable-filter.ts";
import { FilterSiblings } from "../../services/crdt/filter-siblings.ts";
import { assertDecodedOwnsItsBytes } from "./owned-bytes.ts";
import { type ClientOperations, type CreateParams, type MutatorEnv, ObjectType, latticeFor, operationsFor, retryFilterParams } from "../../services/crdt/index.ts";

const RUNS = Number(process.env.FC_RUNS ?? 150);
const u = (s: string) => new TextEncoder().encode(s);
const REPLICAS = ["r0", "r1", "r2"];

/** One filter type driven through its mutators, for the generic properties. */
interface Driver<S> {
  L: Lattice<S>;
  empty(): S;
  /** Apply a local op in place; returns the delta, or undefined if the op did nothing or failed full. */
  op(s: S, replica: string, kind: "add" | "remove", element: Uint8Array, random: Random): S | undefined;
  contains(s: S, e: Uint8Array): boolean;
  /** Whether removes exist (no-false-negative checks are for grow-only types). */
  removes: boolean;
  /** What the tests are named by (default the lattice's name). */
  label?: string;
}

function full<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch (e) {
    if (e instanceof FilterFullError) return undefined;
    throw e;
  }
}

const gbfP = gbfParams(48, 3, 1);
const smallCuckoo = cuckooParams(4, 5, { bucketSize: 2, maxKicks: 30, seed: 3 });
const series = seriesParams(4, 0.2, { bucketSize: 2, maxKicks: 30, seed: 5, buckets: 2 });

const drivers: Array<Driver<any>> = [
  {
    L: GbfLattice,
    empty: () => Gbf.empty(gbfP),
    op: (s: Gbf, _r, _k, e) => s.addInPlace(e),
    contains: (s: Gbf, e) => s.contains(e),
    removes: false,
  } satisfies Driver<Gbf>,
  {
    L: GcfLattice,
    empty: () => Gcf.empty(smallCuckoo),
    op: (s: Gcf, _r, _k, e, rnd) => full(() => s.addInPlace(e, rnd)),
    contains: (s: Gcf, e) => s.contains(e),
    removes: false,
  } satisfies Driver<Gcf>,
  {
    L: OrcfLattice,
    empty: () => Orcf.empty(smallCuckoo),
    op: (s: Orcf, r, k, e, rnd) => (k === "add" ? full(() => s.addInPlace(e, r, rnd)) : s.removeInPlace(e, rnd)),
    contains: (s: Orcf, e) => s.contains(e),
    removes: true,
  } satisfies Driver<Orcf>,
  {
    L: ScGbfLattice,
    empty: () => ScGbf.empty(series),
    op: (s: ScGbf, _r, _k, e) => s.addInPlace(e),
    contains: (s: ScGbf, e) => s.contains(e),
    removes: false,
  } satisfies Driver<ScGbf>,
  {
    L: ScGcfLattice,
    empty: () => ScGcf.empty(series),
    op: (s: ScGcf, _r, _k, e, rnd) => full(() => s.addInPlace(e, rnd)),
    contains: (s: ScGcf, e) => s.contains(e),
    removes: false,
  } satisfies Driver<ScGcf>,
  {
    L: ScOrcfLattice,
    empty: () => ScOrcf.empty(series),
    op: (s: ScOrcf, r, k, e, rnd) => (k === "add" ? full(() => s.addInPlace(e, r, rnd)) : s.removeInPlace(e, rnd)),
    contains: (s: ScOrcf, e) => s.contains(e),
    removes: true,
  } satisfies Driver<ScOrcf>,
];

/**
 * A key of a filter type as the node keeps it (filter-siblings.ts), created by each replica's first
 * add with that replica's parameters: r0 and r2 alike, r1 different, as when two nodes take the
 * key's first Adds at once. Siblings must keep the laws, converge, and lose no add.
 */
function siblingDriver(type: ObjectType, paramsOf: (replica: string) => CreateParams, removes: boolean, withIds = false): Driver<FilterSiblings<unknown>> {
  const ops = operationsFor(type)! as ClientOperations<FilterSiblings<unknown>>;
  // With ids: every add carries a fresh request id (addOnce), small retry filters whose epochs the
  // adds' clocks spread over, so states carry the key's retry filter through every law.
  let ids = 0;
  const retry = () => ({ id: `id-${ids++}`, now: 1_000_000 + (ids % 7) * 400, params: RETRY_PARAMS, explicit: false });
  const add = (s: FilterSiblings<unknown>, e: Uint8Array, env: MutatorEnv) => (withIds ? ops.addOnce!(s, [e], env, retry()).delta : ops.add(s, [e], env));
  const env = (replica: string, random: Random) => ({ replica, random, randomId: () => 1n });
  return {
    L: latticeFor(type) as Lattice<FilterSiblings<unknown>>,
    empty: () => new FilterSiblings<unknown>([]),
    op(s, r, kind, e, rnd) {
      if (kind === "remove") return ops.remove!(s, [e], env(r, rnd));
      // The key's first add creates it, as runOperation does; a failed add leaves nothing.
      const created = ops.isUnset(s);
      if (created) s.filters.push(...ops.create(paramsOf(r)).filters);
      const delta = full(() => add(s, e, env(r, rnd)));
      if (delta === undefined && created) s.filters.length = 0;
      return delta;
    },
    contains: (s, e) => ops.contains(s, [e])[0]!,
    removes,
    label: `${ObjectType[type]} key created with two parameter sets (siblings)${withIds ? ", adds with request ids" : ""}`,
  };
}
const RETRY_PARAMS = retryFilterParams({ idsPerPeriod: 20, falsePositiveRate: 0.01, periodMs: 1000, pastEpochs: 2 });
const other = (r: string) => r === "r1";
drivers.push(
  siblingDriver(ObjectType.GBF, (r) => (other(r) ? { bits: 64, hashes: 2 } : { bits: 48, hashes: 3 }), false),
  siblingDriver(ObjectType.ORCF, (r) => ({ capacity: other(r) ? 8 : 4, bucketSize: 2, fingerprintBits: 5 }), true),
  siblingDriver(ObjectType.ORCF, (r) => ({ capacity: other(r) ? 8 : 4, bucketSize: 2, fingerprintBits: 5 }), true, true),
  siblingDriver(ObjectType.SCGCF, () => ({ capacity: 4, falsePositiveRate: 0.2, bucketSize: 2 }), false, true),
);

// A run: ops at 3 replicas (add/remove of elements from a pool of 12) and syncs between them.
type Step = { t: "op"; r: number; kind: "add" | "remove"; e: number } | { t: "sync"; from: number; to: number };
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ t: fc.constant("op" as const), r: fc.nat(2), kind: fc.constantFrom("add" as const, "add" as const, "remove" as const), e: fc.nat(11) }),
  fc.record({ t: fc.constant("sync" as const), from: fc.nat(2), to: fc.nat(2) }),
);
const runArb = fc.record({ steps: fc.array(stepArb, { maxLength: 40 }), seed: fc.nat() });

/** Every state a run reaches (states and deltas), the material the laws are checked on. */
function reachable<S>(d: Driver<S>, steps: Step[], seed: number): S[] {
  const rnd = seededRandom(seed);
  const reps = REPLICAS.map(() => d.empty());
  const out: S[] = [d.L.bottom(), d.empty()];
  for (const st of steps) {
    if (st.t === "op") {
      if (st.kind === "remove" && !d.removes) continue;
      const delta = d.op(reps[st.r]!, REPLICAS[st.r]!, st.kind, u(`e${st.e}`), rnd);
      if (delta !== undefined) out.push(delta);
      out.push(d.L.clone(reps[st.r]!));
    } else {
      d.L.joinInPlace(reps[st.to]!, reps[st.from]!);
      out.push(d.L.clone(reps[st.to]!));
    }
  }
  return out;
}

const pick3 = runArb.chain((run) => fc.tuple(fc.constant(run), fc.nat(1000), fc.nat(1000), fc.nat(1000)));

for (const d of drivers) {
  const { L } = d;
  const eq = (a: unknown, b: unknown) => L.equals(a, b);
  const states = (run: { steps: Step[]; seed: number }) => reachable(d, run.steps, run.seed);
  const at = <S>(xs: S[], i: number) => xs[i % xs.length]!;
  const check = (f: (a: unknown, b: unknown, c: unknown) => void) =>
    fc.assert(
      fc.property(pick3, ([run, i, j, k]) => {
        const xs = states(run);
        f(at(xs, i), at(xs, j), at(xs, k));
      }),
      { numRuns: RUNS },
    );

  describe(`${d.label ?? L.name} lattice laws (seed 001 Eqs 4.5-4.8)`, () => {
    it("join is idempotent, commutative, associative, with bottom as identity", () =>
      check((a, b, c) => {
        assert.ok(eq(L.join(a, a), a));
        assert.ok(eq(L.join(a, b), L.join(b, a)));
        assert.ok(eq(L.join(L.join(a, b), c), L.join(a, L.join(b, c))));
        assert.ok(eq(L.join(a, L.bottom()), a) && eq(L.join(L.bottom(), a), a));
      }));

    it("leq agrees with join (a ≤ b ⇔ a ⊔ b = b), is reflexive, antisymmetric, and bounds the join", () =>
      check((a, b) => {
        assert.equal(L.leq(a, b), eq(L.join(a, b), b));
        assert.ok(L.leq(a, a));
        if (L.leq(a, b) && L.leq(b, a)) assert.ok(eq(a, b));
        const j = L.join(a, b);
        assert.ok(L.leq(a, j) && L.leq(b, j));
        assert.ok(L.leq(L.bottom(), a));
      }));

    it("joinInPlace equals join and reports change", () =>
      check((a, b) => {
        const t = L.clone(a);
        const changed = L.joinInPlace(t, b);
        assert.ok(eq(t, L.join(a, b)));
        assert.equal(changed, !eq(a, t));
      }));

    it("decompose joins back to the state, into irreducibles none of which is redundant", () =>
      check((a) => {
        const parts = L.decompose(a);
        assert.ok(eq(parts.reduce((acc, x) => L.join(acc, x), L.bottom()), a));
        for (const [n, p] of parts.entries()) {
          assert.ok(!L.isBottom(p));
          const rest = parts.filter((_, m) => m !== n).reduce((acc, x) => L.join(acc, x), L.bottom());
          if (parts.length <= 12) assert.ok(!L.leq(p, rest), "redundant irreducible");
        }
      }));

    it("difference: Δ(a,b) ⊔ b = a ⊔ b, Δ(a,b) ≤ a, and Δ(a,b) is bottom when a ≤ b", () =>
      check((a, b) => {
        const dlt = L.difference(a, b);
        assert.ok(eq(L.join(dlt, b), L.join(a, b)));
        assert.ok(L.leq(dlt, a));
        if (L.leq(a, b)) assert.ok(L.isBottom(dlt));
      }));

    it("codec round-trips (encodedSize exact) and decoding is canonical", () =>
      check((a) => {
        const bytes = L.encode(a);
        assert.equal(L.encodedSize(a), bytes.length);
        const back = L.decode(bytes);
        assert.ok(eq(back, a));
        assert.deepEqual(Buffer.from(L.encode(back)), Buffer.from(bytes));
      }));

    it("a state decoded from a Buffer owns its memory (the input overwritten, or a sibling decode joined into, leaves it as it was)", () =>
      check((a, b) => assertDecodedOwnsItsBytes(L, a, b)));

    it("every update is an inflation, and an add makes the element contained (seed 001 Thm 4.2/4.5)", () =>
      fc.assert(
        fc.property(runArb, fc.nat(11), fc.boolean(), (run, e, remove) => {
          const rnd = seededRandom(run.seed);
          for (const s of states(run).slice(1)) {
            const before = L.clone(s);
            const kind = remove && d.removes ? "remove" : "add";
            const delta = d.op(s, "r9", kind, u(`e${e}`), rnd);
            assert.ok(L.leq(before, s), "s ≤ update(s)");
            if (delta !== undefined) {
              assert.ok(eq(L.join(before, delta), s), "s ⊔ δ(s) = update(s)");
              if (kind === "add") assert.ok(d.contains(s, u(`e${e}`)));
            }
          }
        }),
        { numRuns: Math.ceil(RUNS / 3) },
      ));
  });

  describe(`${d.label ?? L.name} convergence of 3 replicas under reorder, duplication, loss and resend`, () => {
    const evt = fc.oneof(
      fc.record({ t: fc.constant("op" as const), r: fc.nat(2), kind: fc.constantFrom("add" as const, "add" as const, "remove" as const), e: fc.nat(11) }),
      fc.record({ t: fc.constant("deliver" as const), pick: fc.nat(), dup: fc.boolean(), lose: fc.boolean() }),
    );
    it("all replicas end equal, to the join of every delta, with no false negatives for grow-only types", () =>
      fc.assert(
        fc.property(fc.array(evt, { maxLength: 60 }), fc.nat(), fc.array(fc.nat(), { maxLength: 8 }), (events, seed, order) => {
          const rnd = seededRandom(seed);
          const reps = REPLICAS.map(() => d.empty());
          let all = L.bottom();
          const inflight: Array<{ to: number; delta: unknown }> = [];
          const lost: Array<{ to: number; delta: unknown }> = [];
          const added = new Set<number>();
          for (const ev of events) {
            if (ev.t === "op") {
              if (ev.kind === "remove" && !d.removes) continue;
              const delta = d.op(reps[ev.r]!, REPLICAS[ev.r]!, ev.kind, u(`e${ev.e}`), rnd);
              if (delta === undefined) continue;
              if (ev.kind === "add") added.add(ev.e);
              all = L.join(all, delta);
              // The delta travels encoded, as it would on the wire.
              for (let to = 0; to < 3; to++) if (to !== ev.r) inflight.push({ to, delta: L.decode(L.encode(delta)) });
            } else if (inflight.length > 0) {
              const k = ev.pick % inflight.length;
              const msg = inflight[k]!;
              if (!ev.dup) inflight.splice(k, 1);
              if (ev.lose) lost.push(msg);
              else L.joinInPlace(reps[msg.to]!, msg.delta);
            }
          }
          // Everything still in flight or lost is (re)sent, in a generated order.
          const rest = [...inflight, ...lost];
          for (const k of order) if (rest.length > 1) rest.push(...rest.splice(k % rest.length, 1));
          for (const msg of rest) L.joinInPlace(reps[msg.to]!, msg.delta);
          for (const rep of reps) assert.ok(eq(rep, all), "replica differs from the join of all deltas");
          if (!d.removes) for (const e of added) assert.ok(d.contains(reps[0]!, u(`e${e}`)), `false negative for e${e}`);
        }),
        { numRuns: RUNS },
      ));
  });
}

// ------------------------------------------------------------------ the seed's proved properties

describe("GCF: seed 001 Lemma 4.3 and Thm 4.4 (merge is the union of universes)", () => {
  const universe = (g: Gcf) => {
    const p = g.params;
    const out = new Set<string>();
    for (const [i, f] of g.entries()) {
      out.add(`${i}:${f}`);
      out.add(`${altIndex(p!, i, f)}:${f}`);
    }
    return out;
  };
  it("D(D(S)) = S, and U(S ⊔ S') = U(S) ∪ U(S')", () =>
    fc.assert(
      fc.property(pick3, ([run, i, j]) => {
        const xs = reachable(drivers[1] as Driver<Gcf>, run.steps, run.seed);
        const [a, b] = [xs[i % xs.length]!, xs[j % xs.length]!];
        for (const [bi, f] of a.entries()) if (a.params) assert.equal(altIndex(a.params, altIndex(a.params, bi, f), f), bi);
        const uj = universe(GcfLattice.join(a, b));
        assert.deepEqual([...uj].sort(), [...new Set([...universe(a), ...universe(b)])].sort());
        // Compare (Spec 3) is inclusion of universes.
        assert.equal(GcfLattice.leq(a, b), [...universe(a)].every((x) => universe(b).has(x)));
      }),
      { numRuns: RUNS },
    ));
});

describe("ORCF: seed 001 Lemma 4.8 / Thm 4.9 (it is an optimised OR-Set over tags)", () => {
  const tags = (o: Orcf) => new Set(o.entries().map((e) => dotKey(makeDot(e.replica, e.t))));
  it("live tags of a ⊔ b are (A ∩ B) ∪ (A \\ H_b) ∪ (B \\ H_a); order is H ⊆ H' ∧ T ⊆ T'", () =>
    fc.assert(
      fc.property(pick3, ([run, i, j]) => {
        const xs = reachable(drivers[2] as Driver<Orcf>, run.steps, run.seed);
        const [a, b] = [xs[i % xs.length]!, xs[j % xs.length]!];
        const [ta, tb] = [tags(a), tags(b)];
        const seen = (o: Orcf, tag: string) => {
          const at = tag.indexOf("@");
          return o.history.contains(tag.slice(at + 1), Number(tag.slice(0, at)));
        };
        const expected = new Set([...ta].filter((t) => tb.has(t) || !seen(b, t)));
        for (const t of tb) if (!ta.has(t) && !seen(a, t)) expected.add(t);
        assert.deepEqual([...tags(OrcfLattice.join(a, b))].sort(), [...expected].sort());
        const order = a.history.leq(b.history) && a.tombstones().leq(b.tombstones());
        assert.equal(OrcfLattice.leq(a, b), order);
      }),
      { numRuns: RUNS },
    ));

  it("a remove's delta is new to a state that still holds the tag, and nothing to one that removed it too", () => {
    const d = drivers[2] as Driver<Orcf>;
    const rnd = seededRandom(7);
    const s = d.empty();
    for (const e of ["x", "y", "z"]) d.op(s, "r0", "add", u(e), rnd);
    const holding = OrcfLattice.clone(s);
    const removal = d.op(s, "r0", "remove", u("x"), rnd)!;
    const removedToo = OrcfLattice.join(holding, removal);
    // The delta's history is one tag and the states hold two or three entries: the walk over the delta.
    assert.equal([...OrcfLattice.difference(removal, holding).tombstones().dots()].length, 1);
    assert.ok(OrcfLattice.isBottom(OrcfLattice.difference(removal, removedToo)));
  });

  it("Δ(a, b) holds a's live tags b never observed and a's tombstones b never observed or still holds, whichever side it walks", () =>
    fc.assert(
      fc.property(pick3, ([run, i, j]) => {
        const xs = reachable(drivers[2] as Driver<Orcf>, run.steps, run.seed);
        const [a, b] = [xs[i % xs.length]!, xs[j % xs.length]!];
        const d = OrcfLattice.difference(a, b);
        const tb = tags(b);
        const liveTags = [...tags(a)].filter((t) => {
          const at = t.indexOf("@");
          return !b.history.contains(t.slice(at + 1), Number(t.slice(0, at)));
        });
        assert.deepEqual([...tags(d)].sort(), liveTags.sort());
        const tombs = [...a.tombstones().dots()].filter((x) => !b.history.contains(x.replica, x.counter) || tb.has(dotKey(x))).map(dotKey);
        assert.deepEqual([...d.tombstones().dots()].map(dotKey).sort(), tombs.sort());
      }),
      { numRuns: RUNS },
    ));
});
