// Counters stay within int64 at the boundaries: an increment that would take the value or the
// replica's own total outside int64 is refused and changes nothing, in the kernel and in the
// LevelDB store; a join that would do so is refused by the store for that key; a counter already
// out of range (written directly) is reported by Store.verify, still read, and can be brought
// back by decrements.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import {
  CausalContext,
  CounterLattice as PN,
  CounterRangeError,
  INT64_MAX,
  INT64_MIN,
  ObjectType,
  PNCounter,
  counterRangeProblems,
  dotKey,
  inInt64,
} from "../../services/crdt/index.ts";
import { Store } from "../../services/store/store.ts";
import { rawCounter, writeRawCounter } from "../helpers/overflowed-counter.ts";
import { RUNS } from "./universe.ts";

const STORE_RUNS = Number(process.env.FC_STORE_RUNS ?? 40);
const REPLICAS = ["a", "b", "c"];

/** Amounts around the boundaries, and anywhere in sint64; never zero (the API refuses zero). */
const amount = fc
  .oneof(
    fc.constantFrom(INT64_MAX, INT64_MAX - 1n, INT64_MIN, INT64_MIN + 1n, 1n, -1n, 2n ** 62n, -(2n ** 62n)),
    fc.bigInt({ min: INT64_MIN, max: INT64_MAX }),
  )
  .filter((n) => n !== 0n);

/** What an oracle that knows each replica's own totals expects of an increment. */
function refusedByModel(value: bigint, own: { positive: bigint; negative: bigint }, n: bigint): boolean {
  const changed = n > 0n ? own.positive + n : own.negative - n;
  return changed > INT64_MAX || !inInt64(value + n);
}

type Op = { t: "inc"; r: number; n: bigint } | { t: "sync"; from: number; to: number };
const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant("inc" as const), r: fc.nat(2), n: amount }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant("sync" as const), from: fc.nat(2), to: fc.nat(2) }), weight: 1 },
);

describe("counter range in the kernel", () => {
  it("an increment is refused exactly when the value or the replica's total would leave int64, and changes nothing", () =>
    fc.assert(
      fc.property(fc.array(op, { maxLength: 25 }), (ops) => {
        const states = REPLICAS.map(() => PNCounter.bottom());
        const own = REPLICAS.map(() => ({ positive: 0n, negative: 0n }));
        for (const o of ops) {
          if (o.t === "sync") {
            // Joins are unbounded in the kernel; the store refuses those out of range (below),
            // so the model does too, and the range check must say why.
            const joined = PN.join(states[o.to]!, states[o.from]!);
            if (!inInt64(joined.value())) assert.notDeepEqual(counterRangeProblems(joined), []);
            else states[o.to] = joined;
            continue;
          }
          const x = states[o.r]!;
          const before = Buffer.from(PN.encode(x));
          const refuse = refusedByModel(x.value(), own[o.r]!, o.n);
          if (refuse) {
            assert.throws(() => x.incrementDelta(REPLICAS[o.r]!, o.n), CounterRangeError);
            assert.throws(() => x.increment(REPLICAS[o.r]!, o.n), CounterRangeError);
            assert.deepEqual(Buffer.from(PN.encode(x)), before, "a refused increment changes nothing");
            continue;
          }
          const next = PN.join(x, x.incrementDelta(REPLICAS[o.r]!, o.n));
          assert.equal(next.value(), x.value() + o.n);
          assert.deepEqual(counterRangeProblems(next), []);
          assert.ok(PN.equals(next, x.increment(REPLICAS[o.r]!, o.n)));
          // A state that stays in range always encodes and decodes to itself.
          assert.ok(PN.equals(PN.decode(PN.encode(next)), next));
          states[o.r] = next;
          own[o.r] = o.n > 0n ? { ...own[o.r]!, positive: own[o.r]!.positive + o.n } : { ...own[o.r]!, negative: own[o.r]!.negative - o.n };
        }
      }),
      { numRuns: RUNS },
    ));

  it("reports each out-of-range total and value", () => {
    const c = rawCounter({ a: { positive: 2n ** 64n - 2n, negative: 0n }, b: { positive: 2n, negative: 2n ** 63n } });
    const problems = counterRangeProblems(c);
    assert.equal(problems.length, 3, problems.join("\n"));
    assert.match(problems.join("\n"), /replica a's positive total 18446744073709551614/);
    assert.match(problems.join("\n"), /replica b's negative total 9223372036854775808/);
    assert.match(problems.join("\n"), /value 9223372036854775808 is outside int64/);
  });
});

const root = mkdtempSync(join(tmpdir(), "deltaset-counter-range-"));
after(() => rmSync(root, { recursive: true, force: true }));
const partitionOf = (_key: string, _p: number) => 0;
const open = (dir: string) => Store.open({ dir, nodeId: "n1", partitions: 1, partitionOf, sync: "buffered" });

describe("counter range in the store", () => {
  it("increments and merges at the boundaries: refused exactly as the model says, nothing changes, refusals counted", async () => {
    const s = await open(join(root, "model"));
    let run = 0;
    let refusedIncrements = 0;
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.record({ t: fc.constant("inc" as const), n: amount }),
              // A remote replica's whole totals, delivered by Merge (or gossip: the same join).
              fc.record({ t: fc.constant("merge" as const), positive: fc.bigInt({ min: 0n, max: INT64_MAX }), negative: fc.bigInt({ min: 0n, max: INT64_MAX }) }),
            ),
            { maxLength: 8 },
          ),
          async (ops) => {
            const key = `k${run++}`;
            let own = { positive: 0n, negative: 0n };
            let remote = { positive: 0n, negative: 0n };
            let remoteDot = 0;
            for (const o of ops) {
              const refusedBefore = s.stats().counterJoinsRefused;
              const value = own.positive - own.negative + remote.positive - remote.negative;
              if (o.t === "inc") {
                if (refusedByModel(value, own, o.n)) {
                  refusedIncrements++;
                  await assert.rejects(s.increment(key, o.n), (e: Error) => e instanceof CounterRangeError && e.message.includes(`"${key}"`));
                } else {
                  const r = await s.increment(key, o.n);
                  assert.equal(r.value, value + o.n);
                  own = o.n > 0n ? { ...own, positive: own.positive + o.n } : { ...own, negative: own.negative - o.n };
                }
              } else {
                // Remote totals only grow; a later state supersedes the earlier one (higher dot).
                const next = { positive: max(remote.positive, o.positive), negative: max(remote.negative, o.negative) };
                const state = rawCounterAt("remote", ++remoteDot, next);
                const r = await s.merge(key, ObjectType.COUNTER, state);
                const wouldBe = own.positive - own.negative + next.positive - next.negative;
                if (inInt64(wouldBe)) {
                  assert.equal(r.refused, undefined);
                  remote = next;
                } else {
                  assert.match(r.refused ?? "", new RegExp(`counter "${key}".*outside int64`));
                  assert.equal(r.changed, false);
                  assert.equal(s.stats().counterJoinsRefused, refusedBefore + 1);
                }
              }
              const stored = await s.counter(key);
              assert.equal(stored?.value() ?? 0n, own.positive - own.negative + remote.positive - remote.negative);
              if (stored !== undefined) assert.deepEqual(await s.verify(key), []);
            }
          },
        ),
        {
          numRuns: STORE_RUNS,
          // Runs that surely reach both boundaries, beside the random ones: an increment past
          // int64, and a remote state whose totals would take the value past it.
          examples: [
            [[{ t: "inc", n: INT64_MAX }, { t: "inc", n: 1n }]],
            [[{ t: "inc", n: 5n }, { t: "merge", positive: INT64_MAX, negative: 0n }]],
          ],
        },
      );
      // The boundaries were reached: both kinds of refusal happened.
      assert.ok(refusedIncrements > 0 && s.stats().counterJoinsRefused > 0);
    } finally {
      await s.close();
    }
  });

  it("a counter already out of range is reported by verify, read, and can be decremented back", async () => {
    const dir = join(root, "overflowed");
    await (await open(dir)).close();
    const broken = rawCounter({ "n1~old": { positive: 2n ** 64n - 2n, negative: 0n } });
    await writeRawCounter(dir, 0, "big", broken);
    const s = await open(dir);
    try {
      const problems = await s.verify("big");
      assert.equal(problems.length, 2, problems.join("\n"));
      assert.equal((await s.counter("big"))!.value(), 2n ** 64n - 2n);
      // An increment that leaves it out of range is refused; a decrement back into range is not.
      await assert.rejects(s.increment("big", 1n), CounterRangeError);
      await assert.rejects(s.increment("big", -1n), CounterRangeError);
      const back = await s.increment("big", -INT64_MAX);
      assert.equal(back.value, INT64_MAX);
      // The old replica's total is still above int64: verify keeps saying so.
      assert.deepEqual(await s.verify("big"), [`replica n1~old's positive total ${2n ** 64n - 2n} is outside 0..${INT64_MAX}`]);
      // Joins into a counter that is out of range already are not refused, so it still converges.
      await writeRawCounterOpen(s, dir, "big2", broken);
    } finally {
      await s.close();
    }
    const t = await open(dir);
    try {
      const r = await t.merge("big2", ObjectType.COUNTER, rawCounterAt("other", 1, { positive: 5n, negative: 0n }));
      assert.equal(r.refused, undefined);
      assert.equal(r.changed, true);
      assert.equal((await t.counter("big2"))!.value(), 2n ** 64n + 3n);
    } finally {
      await t.close();
    }
  });
});

/** writeRawCounter needs the directory closed: close s, write, and leave it closed. */
async function writeRawCounterOpen(s: Store, dir: string, key: string, state: PNCounter): Promise<void> {
  await s.close();
  await writeRawCounter(dir, 0, key, state);
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);

function rawCounterAt(replica: string, counter: number, value: { positive: bigint; negative: bigint }): PNCounter {
  const dot = { replica, counter };
  const ctx = new CausalContext();
  ctx.addRange(replica, 1, counter);
  return new PNCounter(new Map([[dotKey(dot), { dot, value }]]), ctx);
}
