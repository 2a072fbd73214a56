// A scalable filter series (SCGBF, SCGCF, SCORCF) on a real node grows to its 64th sub-filter and
// then refuses Adds of new elements with RESOURCE_EXHAUSTED naming the key, its type and how many
// sub-filters are full (not a plain cuckoo filter's "no free slot" advice to use the scalable
// variant it already is), and keeps nothing of the refused Add.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { TestCluster } from "../helpers/test-cluster.ts";
import { filterCalls, filterParams } from "../helpers/filter-calls.ts";
import { statusOf } from "../helpers/grpc-status.ts";
import { ObjectType } from "../../services/crdt/index.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-series-full-"));
const c = new TestCluster(dir, ["127.0.21.2:7721"], ["--probe-interval-ms", "300", "--gossip-interval-ms", "100"], "s");
before(() => c.startAll());
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const { add, query } = filterCalls(c);

describe("a full scalable series", () => {
  for (const type of [ObjectType.SCGBF, ObjectType.SCGCF, ObjectType.SCORCF]) {
    const name = ObjectType[type];
    it(`${name}: 64 sub-filters of capacity 10 full, an Add of new elements answers RESOURCE_EXHAUSTED naming the key`, async () => {
      const key = `visits-${name}`;
      let refused: { code: number; details: string } | undefined;
      let batch = 0;
      // About 64 x 10 elements fit: batches of 20 until one is refused (bounded).
      for (; batch < 100 && refused === undefined; batch++) {
        const elements = Array.from({ length: 20 }, (_, i) => `${key}-${batch}-${i}`);
        const s = await statusOf(add(0, key, elements, type, filterParams({ capacity: 10n, falsePositiveRate: 0.01 })));
        if (s.code !== 0) refused = s;
      }
      assert.ok(refused !== undefined, `${name}: no Add was refused in ${batch} batches`);
      assert.equal(refused.code, status.RESOURCE_EXHAUSTED, refused.details);
      assert.match(refused.details, new RegExp(`^${name} key "${key}" has all its 64 sub-filters full \\(about \\d+ elements at capacity 10 each\\): a series grows no further.*create a key with a larger capacity$`));
      assert.doesNotMatch(refused.details, /slot|kicks|scalable variant/);
      assert.ok(batch >= 30, `${name}: refused after ${batch} batches of 20`);
      const q = await query(0, key, [`${key}-0-0`]);
      assert.equal(q.presence[0]!.present, true, "what was added before stays");
      assert.equal(JSON.parse(q.filter!.parameters).subFilters, 64);
      // The refused batch kept nothing: the same count after another refusal.
      const count = q.filter!.estimatedCount;
      const again = await statusOf(add(0, key, Array.from({ length: 20 }, (_, i) => `${key}-late-${i}`)));
      assert.equal(again.code, status.RESOURCE_EXHAUSTED, again.details);
      assert.equal((await query(0, key, [`${key}-0-0`])).filter!.estimatedCount, count);
    });
  }
});
