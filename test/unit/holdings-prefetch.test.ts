// A full-state push asks what its neighbour holds of the next partitions while it streams the
// current one (gossip/holdings-prefetch.ts): at most `ahead` questions out at once, each partition
// asked once, later pages asked when needed, and an answer nobody takes never left unhandled.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { prefetchedHoldings } from "../../services/gossip/holdings-prefetch.ts";

/** A neighbour whose answers come when released; records every question. */
function neighbour() {
  const asked: Array<{ partition: number; startAfter?: string }> = [];
  const pending = new Map<string, { resolve: (v: string) => void; reject: (e: Error) => void }>();
  const ask = (partition: number, startAfter?: string) =>
    new Promise<string>((resolve, reject) => {
      asked.push({ partition, startAfter });
      pending.set(`${partition}/${startAfter ?? ""}`, { resolve, reject });
    });
  const answer = (partition: number, startAfter?: string) => pending.get(`${partition}/${startAfter ?? ""}`)!.resolve(`holdings of ${partition} after ${startAfter ?? "-"}`);
  const fail = (partition: number) => pending.get(`${partition}/`)!.reject(new Error("UNAVAILABLE"));
  return { asked, ask, answer, fail };
}

describe("holdings asked ahead of a full-state push", () => {
  it("keeps at most `ahead` questions out, asks each partition once, in push order, and hands each its own answer", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.nat(63), { minLength: 1, maxLength: 20 }), fc.integer({ min: 1, max: 10 }), async (partitions, ahead) => {
        const n = neighbour();
        const holdingsOf = prefetchedHoldings(partitions, n.ask, ahead);
        for (const [i, p] of partitions.entries()) {
          const got = holdingsOf(p);
          // Asked so far: through the current partition and ahead - 1 after it, no further.
          assert.equal(n.asked.length, Math.min(partitions.length, i + ahead));
          n.answer(p);
          assert.equal(await got, `holdings of ${p} after -`);
        }
        assert.deepEqual(n.asked.map((a) => a.partition), partitions, "each once, in push order");
      }),
      { numRuns: 200 },
    );
  });

  it("asks a later page of a partition when the stream needs it", async () => {
    const n = neighbour();
    const holdingsOf = prefetchedHoldings([3, 5], n.ask, 4);
    const first = holdingsOf(3);
    n.answer(3);
    await first;
    const page = holdingsOf(3, "key-17");
    assert.deepEqual(n.asked.at(-1), { partition: 3, startAfter: "key-17" });
    n.answer(3, "key-17");
    assert.equal(await page, "holdings of 3 after key-17");
  });

  it("a failed answer fails the push that takes it, and one nobody takes is not an unhandled rejection", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      const n = neighbour();
      const holdingsOf = prefetchedHoldings([1, 2, 3], n.ask, 3);
      const first = holdingsOf(1);
      n.fail(1);
      n.fail(3); // the push ends before it reaches partition 3
      await assert.rejects(first, /UNAVAILABLE/);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
