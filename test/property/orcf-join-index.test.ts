// ORCF keeps an index of its live tags once it has joined, so that joining a small delta into a
// large state costs the delta's size (services/crdt/orcf.ts). This checks the indexed join against
// the same join on index-free copies (decoded from the codec), after any mix of adds (with kicks,
// on a table small enough to kick and overflow), removes, and joins of deltas and of whole states,
// in any order: the states must stay equal, entry for entry.
import { strict as assert } from "node:assert";
import { it } from "node:test";
import fc from "fast-check";
import { CuckooTable, cuckooParams } from "../../services/crdt/cuckoo-table.ts";
import { FilterFullError, seededRandom } from "../../services/crdt/filter-common.ts";
import { Orcf, OrcfLattice } from "../../services/crdt/orcf.ts";

const RUNS = Number(process.env.FC_RUNS ?? 150);
const params = cuckooParams(4, 5, { bucketSize: 2, maxKicks: 30, seed: 11 });
const u = (n: number) => new TextEncoder().encode(`e${n}`);
const fresh = (s: Orcf) => OrcfLattice.decode(OrcfLattice.encode(s));
const tags = (s: Orcf) =>
  s
    .entries()
    .map((e) => `${e.replica}:${e.t}:${e.fp}`)
    .sort();

type Step =
  | { kind: "add"; at: number; element: number }
  | { kind: "remove"; at: number; element: number }
  | { kind: "joinDelta"; from: number; to: number }
  | { kind: "joinState"; from: number; to: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("add" as const), at: fc.nat(2), element: fc.nat(9) }),
  fc.record({ kind: fc.constant("remove" as const), at: fc.nat(2), element: fc.nat(9) }),
  fc.record({ kind: fc.constant("joinDelta" as const), from: fc.nat(2), to: fc.nat(2) }),
  fc.record({ kind: fc.constant("joinState" as const), from: fc.nat(2), to: fc.nat(2) }),
);

it("an indexed join gives the same state as the join of index-free copies", () => {
  fc.assert(
    fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 2 ** 31 }), (steps, seed) => {
      const random = seededRandom(seed);
      const states = [0, 1, 2].map(() => Orcf.empty(params));
      const deltas: Orcf[][] = [[], [], []]; // deltas made at each replica since the start
      for (const s of steps) {
        if (s.kind === "add") {
          try {
            deltas[s.at]!.push(states[s.at]!.addInPlace(u(s.element), `r${s.at}`, random));
          } catch (e) {
            if (!(e instanceof FilterFullError)) throw e;
          }
        } else if (s.kind === "remove") {
          deltas[s.at]!.push(states[s.at]!.removeInPlace(u(s.element), random));
        } else {
          const source = s.kind === "joinState" ? [states[s.from]!] : deltas[s.from]!.slice(-3);
          for (const d of source) {
            const expected = fresh(states[s.to]!);
            expected.joinInPlace(fresh(d));
            const changed = states[s.to]!.joinInPlace(d);
            assert.ok(OrcfLattice.equals(states[s.to]!, expected), `${s.kind} r${s.from} -> r${s.to}`);
            assert.deepEqual(tags(states[s.to]!), tags(expected));
            assert.deepEqual([...states[s.to]!.tombstones().dots()].map(String).sort(), [...expected.tombstones().dots()].map(String).sort());
            if (!changed) assert.ok(OrcfLattice.leq(d, states[s.to]!));
          }
        }
      }
    }),
    { numRuns: RUNS },
  );
});

it("joining a one-entry delta into a large state does not walk the state", () => {
  const big = cuckooParams(2 ** 14, 8, { bucketSize: 4, seed: 2 });
  const random = seededRandom(7);
  const a = Orcf.empty(big);
  for (let i = 0; i < 50_000; i++) a.addInPlace(u(i), "a", random);
  const b = a.clone();
  a.joinInPlace(b); // builds a's index once
  const d = b.addInPlace(u(-1), "b", random);
  // Count the entries any table lists during the join: only the delta's one may be walked.
  const walked = { n: 0 };
  const original = CuckooTable.prototype.entries;
  CuckooTable.prototype.entries = function* (this: CuckooTable<unknown>) {
    for (const x of original.call(this)) {
      walked.n++;
      yield x;
    }
  };
  try {
    assert.ok(a.joinInPlace(d));
  } finally {
    CuckooTable.prototype.entries = original;
  }
  assert.ok(walked.n <= 1, `the join walked ${walked.n} entries`);
  assert.ok(a.contains(u(-1)));
  const r = b.removeInPlace(u(5), random);
  assert.ok(a.joinInPlace(r));
  assert.equal(a.copies(u(5)), b.copies(u(5)));
  assert.ok(OrcfLattice.equals(a, b));
});
