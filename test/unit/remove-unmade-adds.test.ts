// A Remove whose context names adds of the receiving node's own replica id that it never made, on
// a real store (LevelDB): the node mints a key's dots from the key's context, so such adds cannot
// exist anywhere. Deferred, the remove would take this node's next acknowledged adds of the
// element when it made them; it is refused instead, and nothing changes. The same context naming
// another replica's adds not seen here yet is a deferred remove, as before.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { CausalContext } from "../../services/crdt/index.ts";
import { UnmadeAddsError } from "../../services/store/pending-removes.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-unmade-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const open = () => Store.open({ dir: join(root, `db${dirs++}`), partitions: 4, partitionOf: (k, p) => k.length % p, sync: "fsync" });
const b = (s: string) => Buffer.from(s);
const members = async (store: Store, key: string) => (await store.page(key, undefined, 100)).members.map((m) => m.toString());

describe("a Remove context naming this node's own adds that were never made", () => {
  it("is refused, changes nothing, and later adds stay", async () => {
    const store = await open();
    try {
      await store.add("fruit", [b("apple"), b("kiwi")]);
      const me = store.replicaId;
      const bogus = CausalContext.of([{ replica: me, counter: 12 }]);
      for (let c = 1; c <= 11; c++) bogus.add(me, c);
      await assert.rejects(store.remove("fruit", [b("apple")], bogus), (e: Error) => {
        assert.ok(e instanceof UnmadeAddsError, String(e));
        assert.match(e.message, new RegExp(`${me}:3-12 of key "fruit" that this node never made \\(its last add there is 2\\)`));
        return true;
      });
      assert.deepEqual(await members(store, "fruit"), ["apple", "kiwi"], "the refused remove took apple");
      assert.deepEqual(store.pendingRemovesOf("fruit"), []);
      await store.add("fruit", [b("apple")]);
      assert.deepEqual(await members(store, "fruit"), ["apple", "kiwi"]);
    } finally {
      await store.close();
    }
  });

  it("a context of what was made removes it, and one naming another replica's unseen adds is deferred", async () => {
    const store = await open();
    try {
      await store.add("fruit", [b("apple"), b("kiwi")]);
      const seen = CausalContext.of([{ replica: store.replicaId, counter: 1 }, { replica: store.replicaId, counter: 2 }, { replica: "elsewhere~1", counter: 3 }]);
      const r = await store.remove("fruit", [b("apple")], seen);
      assert.equal(r.removed, 1);
      assert.equal(r.pending, 1, "elsewhere~1's adds have not arrived: the remove waits for them");
      assert.deepEqual(await members(store, "fruit"), ["kiwi"]);
    } finally {
      await store.close();
    }
  });
});
