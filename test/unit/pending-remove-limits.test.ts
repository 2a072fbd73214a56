// What a deferred remove keeps is bounded before anything is stored, on a real store (LevelDB):
// the replica ids one element waits for (--max-remove-unseen-replicas) and the bytes of all the
// records (--max-pending-remove-bytes). A refused Remove changes nothing; a Remove within them
// still waits and applies when its adds arrive, which gives its room back. And a join checks a
// pending remove's context only when it shares a dot with the key's context: a large one that
// none of the arriving adds touch costs nothing to look past.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { MemoryLevel } from "memory-level";
import fc from "fast-check";
import { AWSet, CausalContext, ObjectType, elementKey } from "../../services/crdt/index.ts";
import type { BatchOp } from "../../services/store/group-commit.ts";
import type { StoreDb } from "../../services/store/db.ts";
import { PendingRemoves, PendingRemovesFullError } from "../../services/store/pending-removes.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-pending-limits-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const newDir = () => join(root, `db${dirs++}`);
const open = (dir: string, o: { maxRemoveUnseenReplicas?: number; maxPendingRemoveBytes?: number }) =>
  Store.open({ dir, nodeId: "n", partitions: 4, partitionOf: (k, p) => k.length % p, sync: "buffered", ...o });
const b = (s: string) => Buffer.from(s);
const members = async (store: Store, key: string) => (await store.page(key, undefined, 100)).members.map((m) => m.toString());
/** A context naming counter 1 of each replica `${prefix}0~x` .. `${prefix}${n - 1}~x`. */
const foreign = (prefix: string, n: number) => CausalContext.of(Array.from({ length: n }, (_, i) => ({ replica: `${prefix}${i}~x`, counter: 1 })));

async function refused(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (e: Error) => {
    assert.ok(e instanceof PendingRemovesFullError, String(e));
    assert.match(e.message, pattern);
    return true;
  });
}

describe("--max-remove-unseen-replicas", () => {
  it("refuses a Remove whose unseen part names more replica ids, changing nothing; as many is kept", async () => {
    const store = await open(newDir(), { maxRemoveUnseenReplicas: 8 });
    try {
      await store.add("k", [b("x"), b("y")]);
      const seen = (await store.describe("k"))!.ctx;
      await refused(store.remove("k", [b("x")], seen.join(foreign("a", 9))), /names adds of 9 replica ids this node has not received \(limit 8, --max-remove-unseen-replicas\)/);
      assert.deepEqual(await members(store, "k"), ["x", "y"], "the refused Remove took x's add, which it saw");
      assert.deepEqual(store.pendingRemovesOf("k"), []);
      assert.equal(store.stats().pendingRemoveBytes, 0);
      const r = await store.remove("k", [b("x")], seen.join(foreign("a", 8)));
      assert.deepEqual([r.removed, r.pending], [1, 1]);
      assert.deepEqual(await members(store, "k"), ["y"]);
    } finally {
      await store.close();
    }
  });

  it("counts what an element already waits for: a second Remove of it may not add more replica ids past the limit", async () => {
    const store = await open(newDir(), { maxRemoveUnseenReplicas: 8 });
    try {
      await store.add("k", [b("x")]);
      await store.remove("k", [b("e")], foreign("a", 5));
      await refused(store.remove("k", [b("e")], foreign("b", 5)), /context with the removes it already waits for names adds of 10 replica ids .*--max-remove-unseen-replicas/);
      assert.deepEqual(store.pendingRemovesOf("k").map((p) => p.unseen.replicas().length), [5], "the refused Remove changed e's record");
      // The same replicas' later adds, and other elements, stay within it.
      const more = foreign("a", 5);
      more.add("a0~x", 2);
      assert.equal((await store.remove("k", [b("e")], more)).pending, 1);
      assert.equal((await store.remove("k", [b("f")], foreign("b", 5))).pending, 1);
      assert.deepEqual(store.pendingRemovesOf("k").map((p) => [p.element.toString(), p.unseen.dotCount()]).sort(), [["e", 6], ["f", 5]]);
    } finally {
      await store.close();
    }
  });
});

describe("--max-pending-remove-bytes", () => {
  it("bounds the bytes of all records; refused Removes change nothing, arriving adds give room back, restarts keep the count", async () => {
    const ctx = foreign("r", 20);
    // The bytes of one element's record (elements e0..e9 are all as long).
    const probe = await open(newDir(), {});
    await probe.add("k", [b("x")]);
    await probe.remove("k", [b("e0")], ctx);
    const one = probe.stats().pendingRemoveBytes;
    await probe.close();
    assert.ok(one > 20 * 5, `a record naming 20 replica ids takes ${one} bytes`);

    const dir = newDir();
    let store = await open(dir, { maxPendingRemoveBytes: 3 * one + Math.floor(one / 2) });
    try {
      await store.add("k", [b("x")]);
      await store.remove("k", [b("e0"), b("e1")], ctx);
      // Two more elements in one Remove pass the limit: neither is kept.
      await refused(store.remove("k", [b("e2"), b("e3")], ctx), new RegExp(`would take more than ${3 * one + Math.floor(one / 2)} bytes \\(now ${2 * one}; limit --max-pending-remove-bytes\\)`));
      assert.equal(store.stats().pendingRemoveBytes, 2 * one);
      assert.equal(store.stats().pendingRemoves, 2);
      await store.remove("k", [b("e2")], ctx);
      await refused(store.remove("k", [b("e3")], ctx), /--max-pending-remove-bytes/);
      assert.equal(store.stats().pendingRemoveBytes, 3 * one);

      await store.close();
      store = await open(dir, { maxPendingRemoveBytes: 3 * one + Math.floor(one / 2) });
      assert.equal(store.stats().pendingRemoveBytes, 3 * one, "the records' bytes are counted again at start");
      await refused(store.remove("k", [b("e3")], ctx), /--max-pending-remove-bytes/);

      // The adds the contexts name arrive (e1 among them): the removes apply and their records go.
      let state = AWSet.bottom();
      for (const r of ctx.replicas()) state = state.add(r, r === "r0~x" ? [b("e1")] : [b("other")]);
      await store.merge("k", ObjectType.AWSET, state);
      assert.equal(store.stats().pendingRemoveBytes, 0);
      assert.deepEqual(await members(store, "k"), ["other", "x"], "e1's add the Remove saw stays removed");
      await store.remove("k", [b("e3")], foreign("s", 20));
      assert.equal(store.stats().pendingRemoves, 1);
    } finally {
      await store.close();
    }
  });
});

describe("settling pending removes", () => {
  it("looks only at those whose context shares a dot with the key's", async () => {
    const db = new MemoryLevel<Buffer, Buffer>({ keyEncoding: "buffer", valueEncoding: "buffer" }) as unknown as StoreDb;
    const p = await PendingRemoves.load(db, { maxElements: 100, maxUnseenDots: 1_000_000, maxUnseenReplicas: 5000, maxBytes: 1 << 30 });
    const ops: BatchOp[] = [];
    const ek = (s: string) => elementKey(b(s));
    for (let i = 0; i < 3; i++) p.defer("k", ek(`e${i}`), foreign(`big${i}-`, 2000), ops);
    p.defer("k", ek("small"), CausalContext.of([{ replica: "late~1", counter: 4 }]), ops);
    const before = p.bytes();
    const read: string[] = [];
    const dotsOf = async (e: string) => {
      read.push(e);
      return e === ek("small") ? [{ replica: "late~1", counter: 4 }] : [];
    };
    const seen = CausalContext.of([{ replica: "me~1", counter: 1 }, { replica: "late~1", counter: 3 }]);
    const settleOps: BatchOp[] = [];
    assert.equal((await p.settle("k", dotsOf, seen, settleOps)).size, 0);
    assert.deepEqual([read, settleOps], [[], []], "no pending context meets the key's: no element is read, no record written");

    seen.add("late~1", 4);
    const hits = await p.settle("k", dotsOf, seen, settleOps);
    assert.deepEqual(read, ["small"], "only the element whose adds arrived is read");
    assert.deepEqual([...hits.values()], [[{ replica: "late~1", counter: 4 }]]);
    assert.deepEqual(settleOps.map((o) => o.type), ["del"]);
    assert.equal(p.size("k"), 3);
    assert.ok(p.bytes() < before);
  });

  it("CausalContext.intersects agrees with the intersection", () => {
    const ctxArb = fc
      .array(fc.record({ r: fc.constantFrom("a", "b", "c", "d"), first: fc.integer({ min: 1, max: 40 }), len: fc.nat(6) }), { maxLength: 12 })
      .map((xs) => {
        const c = new CausalContext();
        for (const x of xs) c.addRange(x.r, x.first, x.first + x.len);
        return c;
      });
    fc.assert(
      fc.property(ctxArb, ctxArb, (x, y) => {
        const expected = !x.intersect(y).isEmpty();
        assert.equal(x.intersects(y), expected);
        assert.equal(y.intersects(x), expected);
      }),
      { numRuns: 500 },
    );
  });
});
