// Reading the keys of many partitions one after another (Store.keyScan, used by every full-state
// stream): each partition yields exactly its keys in byte order, whatever order the partitions
// are visited in, and partitions holding no key cost no seek of their own once a seek has passed
// over them.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { Store } from "../../services/store/store.ts";

const PARTITIONS = 64;
const root = mkdtempSync(join(tmpdir(), "deltaset-key-scan-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
// "p<N>/<name>" lives in partition N, so a test places keys where it wants them.
const partitionOf = (key: string) => Number(key.slice(1, key.indexOf("/")));
const open = () => Store.open({ dir: join(root, `db${dirs++}`), partitions: PARTITIONS, partitionOf, sync: "buffered" });

/** The keys of each partition, in the byte order LevelDB keeps them. */
function expected(keys: readonly string[]): Map<number, string[]> {
  const by = new Map<number, string[]>();
  for (const k of new Set(keys)) by.set(partitionOf(k), [...(by.get(partitionOf(k)) ?? []), k]);
  for (const ks of by.values()) ks.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return by;
}

const keyArb = fc.tuple(fc.integer({ min: 0, max: PARTITIONS - 1 }), fc.string({ minLength: 1, maxLength: 6, unit: "grapheme" })).map(([p, name]) => `p${p}/${name}`);

describe("scanning the keys of many partitions", () => {
  it("yields each partition's keys in byte order, in any visiting order (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(keyArb, { maxLength: 30 }), fc.array(fc.integer({ min: 0, max: PARTITIONS - 1 }), { maxLength: 80 }), async (keys, visits) => {
        const s = await open();
        try {
          for (const k of keys) await s.add(k, [Buffer.from("x")]);
          const want = expected(keys);
          const scan = s.keyScan();
          for (const p of visits) {
            const got: string[] = [];
            for await (const k of scan.keys(p)) got.push(k);
            assert.deepEqual(got, want.get(p) ?? [], `partition ${p}`);
          }
        } finally {
          await s.close();
        }
      }),
      { numRuns: 25 },
    );
  });

  it("visiting every partition in order seeks once per key and once per non-empty partition, plus one", async () => {
    const s = await open();
    try {
      const keys = ["p3/a", "p3/b", "p10/a", "p40/a", "p40/b", "p40/c"];
      for (const k of keys) await s.add(k, [Buffer.from("x")]);
      const scan = s.keyScan();
      const found: string[] = [];
      for (let p = 0; p < PARTITIONS; p++) for await (const k of scan.keys(p)) found.push(k);
      assert.deepEqual(found, keys);
      // Partition 0's seek lands on p3; each non-empty partition's last seek lands on the next one.
      assert.equal(scan.seeks, keys.length + 3 + 1);
      // Read one partition at a time, every empty partition costs a seek.
      let separate = 0;
      for (let p = 0; p < PARTITIONS; p++) {
        const one = s.keyScan();
        for await (const _ of one.keys(p));
        separate += one.seeks;
      }
      assert.equal(separate, PARTITIONS + keys.length);
    } finally {
      await s.close();
    }
  });

  it("a key made after a scan passed its partition is found by the next scan", async () => {
    const s = await open();
    try {
      await s.add("p50/a", [Buffer.from("x")]);
      const first = s.keyScan();
      for await (const _ of first.keys(0));
      await s.add("p20/new", [Buffer.from("x")]);
      const stale: string[] = [];
      for await (const k of first.keys(20)) stale.push(k);
      assert.deepEqual(stale, [], "the first scan learnt partitions 0-49 were empty");
      const fresh: string[] = [];
      for await (const k of s.keyScan().keys(20)) fresh.push(k);
      assert.deepEqual(fresh, ["p20/new"]);
    } finally {
      await s.close();
    }
  });
});
