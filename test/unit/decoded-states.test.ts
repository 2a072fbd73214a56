// The decoded states of keys stored whole, kept in memory between operations (decoded-states.ts):
// an entry serves only the body it was decoded from, a writer owns what it takes, a writer that
// throws half-way leaves nothing half-changed behind, and what is served is what is on disk.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ObjectType, operationsFor } from "../../services/crdt/index.ts";
import { type FilterSiblings, OrcfKeyLattice } from "../../services/crdt/index.ts";
import type { Orcf as OrcfFilter } from "../../services/crdt/orcf.ts";

/** An ORCF key's state: its filter (siblings of one, here). */
type Orcf = FilterSiblings<OrcfFilter>;
import { seededRandom } from "../../services/crdt/filter-common.ts";
import { DecodedStates } from "../../services/store/decoded-states.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-decoded-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const open = (dir = join(root, `d${n++}`), stateCacheBytes?: number) =>
  Store.open({ dir, partitions: 4, partitionOf: () => 1, sync: "buffered", ...(stateCacheBytes === undefined ? {} : { stateCacheBytes }) });
const u = (s: string) => Buffer.from(s);
const orcf = operationsFor(ObjectType.ORCF)!;

/** Add elements to an ORCF key the way the Replica service does. */
function add(store: Store, key: string, elements: string[], random = seededRandom(7)) {
  return store.update(key, ObjectType.ORCF, (current) => {
    let state = current;
    if (orcf.isUnset(state)) state = orcf.create({ capacity: 1000 });
    const delta = orcf.add(state, elements.map(u), { replica: store.replicaId, random, randomId: () => 1n });
    return { state, delta, result: 0 };
  });
}

/** The state as the header body on disk decodes, bypassing the cache. */
async function onDisk(store: Store, key: string): Promise<Orcf> {
  const r = await store.readState(key);
  return r!.state as Orcf;
}

async function served(store: Store, key: string): Promise<Orcf> {
  return (await store.wholeState(key))!.state as Orcf;
}

describe("DecodedStates", () => {
  const a = new Uint8Array(10);
  const b = new Uint8Array(10);

  it("serves an entry only for the very body it was decoded from", () => {
    const c = new DecodedStates(100);
    const state = { v: 1 };
    c.put("k", a, state, a.length);
    assert.equal(c.peek("k", a), state);
    assert.equal(c.peek("k", b), undefined, "an equal-length body of another version is a miss");
    assert.equal(c.peek("other", a), undefined);
    assert.deepEqual([c.hits, c.misses], [1, 2]);
  });

  it("take hands the state over and leaves no entry", () => {
    const c = new DecodedStates(100);
    const state = { v: 1 };
    c.put("k", a, state, a.length);
    assert.equal(c.take("k", a), state);
    assert.equal(c.peek("k", a), undefined);
    assert.equal(c.estimatedBytes, 0);
  });

  it("evicts the least recently used entries past the budget, and keeps nothing larger than it", () => {
    const c = new DecodedStates(25);
    c.put("x", new Uint8Array(10), 1, 10);
    c.put("y", new Uint8Array(10), 2, 10);
    const xBody = new Uint8Array(10);
    c.put("x", xBody, 3, xBody.length); // x is now the most recent
    c.put("z", new Uint8Array(10), 4, 10); // 30 bytes: y goes
    assert.deepEqual([c.size, c.estimatedBytes], [2, 20]);
    assert.equal(c.peek("x", xBody), 3);
    c.put("big", new Uint8Array(26), 5, 26);
    assert.equal(c.size, 2, "a state larger than the whole budget is not kept");
  });
});

describe("the store's decoded whole states", () => {
  it("serve what the body on disk holds after every write, and a read after a write decodes nothing", async () => {
    const s = await open();
    try {
      for (let i = 0; i < 5; i++) {
        await add(s, "f", [`e${i}`, `x${i}`]);
        const before = s.stats().stateCache;
        const state = await served(s, "f");
        const after1 = s.stats().stateCache;
        assert.equal(after1.hits, before.hits + 1, "the state the write left behind is served");
        assert.ok(OrcfKeyLattice.equals(state, await onDisk(s, "f")));
        assert.equal(state.main!.count, 2 * (i + 1));
      }
    } finally {
      await s.close();
    }
  });

  it("a writer that changes the state and then throws leaves the state on disk served", async () => {
    const s = await open();
    try {
      await add(s, "f", ["a", "b"]);
      await served(s, "f"); // cached
      await assert.rejects(
        s.update("f", ObjectType.ORCF, (current) => {
          (current as Orcf).main!.addInPlace(u("half-way"), s.replicaId, seededRandom(1));
          throw new Error("refused after changing the state in place");
        }),
        /refused after changing/,
      );
      const state = await served(s, "f");
      assert.equal(state.main!.contains(u("half-way")), false, "the half-changed state must not be served");
      assert.equal(state.main!.count, 2);
      // And the next write works on the state on disk.
      await add(s, "f", ["c"]);
      assert.ok(OrcfKeyLattice.equals(await served(s, "f"), await onDisk(s, "f")));
      assert.equal((await served(s, "f")).main!.count, 3);
    } finally {
      await s.close();
    }
  });

  it("a received delta joins into the kept state, and the result is what reopening the store reads", async () => {
    const dir = join(root, `d${n++}`);
    const s = await open(dir);
    const other = await open();
    let expected: Orcf;
    try {
      await add(s, "f", ["a", "b"]);
      await add(other, "f", ["c"]);
      const delta = await onDisk(other, "f");
      const r = await s.merge("f", ObjectType.ORCF, delta);
      assert.equal(r.changed, true);
      const merged = await served(s, "f");
      assert.ok(["a", "b", "c"].every((e) => merged.main!.contains(u(e))));
      assert.ok(OrcfKeyLattice.equals(merged, await onDisk(s, "f")));
      // A join that changes nothing keeps the entry (the next read is a hit).
      const again = await s.merge("f", ObjectType.ORCF, delta);
      assert.equal(again.changed, false);
      const hits = s.stats().stateCache.hits;
      await served(s, "f");
      assert.equal(s.stats().stateCache.hits, hits + 1);
      expected = OrcfKeyLattice.clone(merged);
    } finally {
      await s.close();
      await other.close();
    }
    const reopened = await open(dir);
    try {
      assert.ok(OrcfKeyLattice.equals(await served(reopened, "f"), expected));
    } finally {
      await reopened.close();
    }
  });

  it("a full-state transfer hands out the stored body, which decodes to the key's state", async () => {
    const s = await open();
    try {
      await add(s, "f", ["a", "b", "c"]);
      const chunks = [];
      for await (const c of s.stateChunks("f", { maxEntries: 1, maxBytes: Number.MAX_SAFE_INTEGER })) chunks.push(c);
      assert.equal(chunks.length, 1);
      assert.equal(chunks[0]!.slice, undefined);
      assert.ok(chunks[0]!.encoded !== undefined);
      assert.ok(OrcfKeyLattice.equals(OrcfKeyLattice.decode(chunks[0]!.encoded!), await onDisk(s, "f")));
      assert.deepEqual(Buffer.from(chunks[0]!.encoded!), Buffer.from(OrcfKeyLattice.encode(await onDisk(s, "f"))), "the codec is canonical");
    } finally {
      await s.close();
    }
  });

  it("a state larger than the budget is decoded on every read and still correct", async () => {
    const s = await open(undefined, 64 * 1024);
    try {
      const many = Array.from({ length: 20_000 }, (_, i) => `element-${i}`);
      await s.update("big", ObjectType.ORCF, (current) => {
        let state = current;
        if (orcf.isUnset(state)) state = orcf.create({ capacity: 25_000 });
        const delta = orcf.add(state, many.map(u), { replica: s.replicaId, random: seededRandom(3), randomId: () => 1n });
        return { state, delta, result: 0 };
      });
      const before = s.stats().stateCache;
      const state = await served(s, "big");
      assert.equal(state.main!.count, 20_000);
      assert.ok(OrcfKeyLattice.encode(state).length > 64 * 1024);
      assert.equal(s.stats().stateCache.entries, 0, "larger than 64 KiB encoded: not kept");
      assert.equal(s.stats().stateCache.misses, before.misses + 1);
    } finally {
      await s.close();
    }
  });
});
