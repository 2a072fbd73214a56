// Delete of a set on a real store (LevelDB, fsync), page by page: a concurrent Remove of the first
// page's elements, queued but not yet durable when Delete reads that page from the database, must
// not end the pass there: every element is gone afterwards. A concurrent Add still survives.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ObjectType } from "../../services/crdt/index.ts";
import { keyCalls } from "../../services/replica/key-calls.ts";
import { Store } from "../../services/store/store.ts";
import { testLimits } from "../helpers/limits.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-delete-key-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const open = () => Store.open({ dir: join(root, `db${dirs++}`), partitions: 4, partitionOf: (k, p) => k.length % p, sync: "fsync" });
const el = (i: number) => Buffer.from(`e${String(i).padStart(3, "0")}`);

describe("Delete of a set", () => {
  it("removes every page though another call's removal of the first page is still queued", async () => {
    const store = await open();
    const limits = { ...testLimits(), maxElementsPerCall: 10 };
    const calls = keyCalls({ store, limits, notify: () => {}, clearWhole: async () => 0 });
    await store.add("s", Array.from({ length: 35 }, (_, i) => el(i)));
    const concurrent = store.remove("s", Array.from({ length: 10 }, (_, i) => el(i)));
    const deleted = calls.deleteKey({ key: "s" });
    const [, d] = await Promise.all([concurrent, deleted]);
    assert.equal((await store.page("s", undefined, 100)).members.length, 0, "elements left after Delete");
    assert.ok(Number(d.removed) >= 25);
    await store.close();
  });

  it("keeps an element added after the pages were read (add-wins)", async () => {
    const store = await open();
    const calls = keyCalls({ store, limits: { ...testLimits(), maxElementsPerCall: 10 }, notify: () => {}, clearWhole: async () => 0 });
    await store.add("s", Array.from({ length: 25 }, (_, i) => el(i)));
    await calls.deleteKey({ key: "s" });
    await store.add("s", [el(999)]);
    assert.deepEqual((await store.page("s", undefined, 100)).members, [el(999)]);
    assert.equal(await store.typeOf("s"), ObjectType.AWSET);
    await store.close();
  });
});
