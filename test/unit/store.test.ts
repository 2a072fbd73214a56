// The LevelDB store must behave exactly like the in-memory AWSet lattice: every operation, merge
// and chunked transfer is mirrored on a model and the stored state compared with it.
import { strict as assert } from "node:assert";
import { cpSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { ClassicLevel } from "classic-level";
import { AWSet, AWSetLattice, CausalContext, ObjectType } from "../../services/crdt/index.ts";
import { DOT_BUCKET } from "../../services/store/dot-index.ts";
import { dotIndexRange, elementRange, objectPrefix } from "../../services/store/keys.ts";
import { Store, StoreOpenError, TypeMismatchError } from "../../services/store/store.ts";
import { memoryDb } from "../../services/store/db.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-store-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const newDir = () => join(root, `db${dirs++}`);
const partitionOf = (key: string, p: number) => Buffer.from(key).reduce((a, b) => (a * 31 + b) % p, 7);
const open = (dir: string, nodeId?: string, partitions = 8) => Store.open({ dir, nodeId, partitions, partitionOf, sync: "buffered" });
const el = (n: number) => Buffer.from([n]);
const RUNS = Number(process.env.FC_STORE_RUNS ?? 40);

async function stored(s: Store, key: string): Promise<AWSet> {
  const r = await s.readState(key);
  return r === undefined ? AWSet.bottom() : (r.state as AWSet);
}

/** Stream `from`'s state of key into `to` in chunks; stop after `limit` chunks (cut stream). */
async function transfer(from: Store, to: Store, key: string, chunkSize: number, limit = Infinity): Promise<boolean> {
  let ctx: CausalContext | undefined;
  let n = 0;
  for await (const c of from.stateChunks(key, { maxEntries: chunkSize, maxBytes: Number.MAX_SAFE_INTEGER })) {
    if (n++ >= limit) return false;
    ctx = c.ctx ?? ctx;
    await to.applyChunk(key, { type: c.type, senderCtx: ctx!, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: c.slice });
    if (c.keyDone) await to.finishKey(key, c.type, ctx!);
  }
  return true;
}

type Op =
  | { kind: "add"; on: 0 | 1; els: number[] }
  | { kind: "remove"; on: 0 | 1; els: number[]; stale: boolean }
  | { kind: "merge"; into: 0 | 1; delta: boolean }
  | { kind: "chunks"; into: 0 | 1; size: number; cut: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("add" as const), on: fc.constantFrom(0 as const, 1 as const), els: fc.array(fc.nat(9), { minLength: 1, maxLength: 4 }) }),
  fc.record({ kind: fc.constant("remove" as const), on: fc.constantFrom(0 as const, 1 as const), els: fc.array(fc.nat(9), { minLength: 1, maxLength: 3 }), stale: fc.boolean() }),
  fc.record({ kind: fc.constant("merge" as const), into: fc.constantFrom(0 as const, 1 as const), delta: fc.boolean() }),
  fc.record({ kind: fc.constant("chunks" as const), into: fc.constantFrom(0 as const, 1 as const), size: fc.integer({ min: 1, max: 4 }), cut: fc.integer({ min: 0, max: 6 }) }),
);

describe("store matches the AWSet lattice", () => {
  it("under random adds, removes (fresh or stale context), merges and chunked transfers", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
        const stores = [await open(newDir(), "A"), await open(newDir(), "B")];
        const models = [AWSet.bottom(), AWSet.bottom()];
        const lastDelta: Array<AWSet | undefined> = [undefined, undefined];
        const oldCtx = [new CausalContext(), new CausalContext()];
        const key = "set";
        try {
          for (const op of ops) {
            if (op.kind === "add") {
              const r = await stores[op.on]!.add(key, op.els.map(el));
              oldCtx[op.on] = models[op.on]!.ctx.clone();
              const before = models[op.on]!;
              models[op.on] = before.add(stores[op.on]!.replicaId, op.els.map(el));
              const fresh = new Set(op.els.filter((e) => !before.has(el(e))));
              assert.equal(r.added, fresh.size, "added: the distinct elements that were not members");
              lastDelta[op.on] = r.delta;
            } else if (op.kind === "remove") {
              const ctx = op.stale ? oldCtx[op.on] : undefined;
              const r = await stores[op.on]!.remove(key, op.els.map(el), ctx);
              models[op.on] = models[op.on]!.remove(op.els.map(el), ctx);
              lastDelta[op.on] = r.delta;
            } else if (op.kind === "merge") {
              const from = 1 - op.into;
              const payload = op.delta ? lastDelta[from] : models[from];
              if (payload === undefined) continue;
              const before = models[op.into]!.clone();
              const r = await stores[op.into]!.merge(key, ObjectType.AWSET, payload);
              models[op.into]!.joinInPlace(payload);
              // The reported new part is exactly Δ(payload, before), and changed agrees with it.
              assert.ok(AWSetLattice.equals(r.newPart as AWSet, AWSetLattice.difference(payload, before)));
              assert.equal(r.changed, !AWSetLattice.equals(before, models[op.into]!));
            } else {
              const from = 1 - op.into;
              const before = models[op.into]!.clone();
              const full = AWSetLattice.join(before, models[from]!);
              const complete = await transfer(stores[from]!, stores[op.into]!, key, op.size, op.cut);
              const got = await stored(stores[op.into]!, key);
              if (complete) {
                models[op.into] = full;
              } else {
                // A cut stream never loses or resurrects anything: before ⊑ got ⊑ before ⊔ sender.
                assert.ok(AWSetLattice.leq(before, got), "cut stream lost state");
                assert.ok(AWSetLattice.leq(got, full), "cut stream invented state");
                models[op.into] = got;
              }
            }
            for (const i of [0, 1]) {
              const got = await stored(stores[i]!, key);
              assert.ok(got.equals(models[i]!), `store ${i} differs from model after ${op.kind}`);
              const d = await stores[i]!.describe(key);
              if (d !== undefined) assert.equal(d.size, models[i]!.size);
              assert.deepEqual(await stores[i]!.verify(key), [], `store ${i} records disagree after ${op.kind}`);
            }
          }
        } finally {
          await Promise.all(stores.map((s) => s.close()));
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe("chunked transfer", () => {
  it("applies the sender's removals inside each chunk's range, and nothing outside it", async () => {
    const a = await open(newDir(), "A");
    const b = await open(newDir(), "B");
    await a.add("k", [el(1), el(2), el(3), el(4)]);
    await b.merge("k", ObjectType.AWSET, (await a.readState("k"))!.state);
    await a.remove("k", [el(1), el(3)]);
    // Cut after the first chunk (element 2 and the range before it): only element 1 is gone.
    assert.equal(await transfer(a, b, "k", 1, 1), false);
    assert.deepEqual((await stored(b, "k")).elements(), [el(2), el(3), el(4)].map((e) => Buffer.from(e)));
    assert.equal(await transfer(a, b, "k", 1), true);
    assert.deepEqual((await stored(b, "k")).elements(), [el(2), el(4)].map((e) => Buffer.from(e)));
    assert.deepEqual(await b.verify("k"), []);
    await Promise.all([a.close(), b.close()]);
  });
});

describe("dot index", () => {
  it("stays exact across bucket boundaries under local writes and the remote deltas they make", async () => {
    // Long runs of adds and removes push dot counters across many index buckets; each delta is
    // joined into a second store, whose removes must find the elements through the index, or by
    // a scan of the set when a delta removes more dots than removeLookupLimit.
    const step = fc.record({ add: fc.boolean(), els: fc.array(fc.nat(30), { minLength: 1, maxLength: 8 }) });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), fc.constantFrom(1, 4096), async (steps, removeLookupLimit) => {
        const a = await open(newDir(), "A");
        const b = await Store.open({ dir: newDir(), nodeId: "B", partitions: 8, partitionOf, sync: "buffered", removeLookupLimit });
        try {
          for (const s of steps) {
            const r = s.add ? await a.add("set", s.els.map(el)) : await a.remove("set", s.els.map(el));
            await b.merge("set", ObjectType.AWSET, r.delta);
            assert.deepEqual(await a.verify("set"), []);
            assert.deepEqual(await b.verify("set"), []);
          }
          assert.ok((await stored(b, "set")).equals(await stored(a, "set")));
        } finally {
          await Promise.all([a.close(), b.close()]);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("holds one record per bucket of consecutive dots, and none once the set is empty", async () => {
    const s = await open(newDir(), "A");
    const els = Array.from({ length: 1000 }, (_, i) => Buffer.from(`e${i}`));
    await s.add("k", els);
    const db = (s as unknown as { db: ClassicLevel<Buffer, Buffer> }).db;
    const records = async (range: { gte: Buffer; lt: Buffer }) => (await db.keys(range).all()).length;
    const prefix = objectPrefix(partitionOf("k", 8), "k");
    // Dots 1..1000 fall in buckets 0..62 of DOT_BUCKET = 16 counters.
    assert.equal(DOT_BUCKET, 16);
    assert.equal(await records(dotIndexRange(prefix)), 63);
    assert.equal(await records(elementRange(prefix)), 1000);
    assert.deepEqual(await s.verify("k"), []);
    await s.remove("k", els.slice(0, 500));
    assert.deepEqual(await s.verify("k"), []);
    await s.remove("k", els);
    assert.deepEqual(await s.verify("k"), []);
    assert.equal((await s.describe("k"))!.size, 0);
    assert.equal(await records(dotIndexRange(prefix)), 0);
    assert.equal(await records(elementRange(prefix)), 0);
    await s.close();
  });
});

describe("chunked state of a large set", () => {
  it("chunks are full until the last one, whatever LevelDB returns per read, and a transfer loses nothing", async () => {
    // Large enough that one LevelDB read (bounded by bytes) returns fewer entries than a chunk.
    const n = 5000;
    const els = Array.from({ length: n }, (_, i) => Buffer.from(`element-with-a-longish-name-${String(i).padStart(6, "0")}`));
    const a = await open(newDir(), "A");
    const b = await open(newDir(), "B");
    for (let i = 0; i < n; i += 1000) await a.add("big", els.slice(i, i + 1000));
    const chunks = [];
    for await (const c of a.stateChunks("big", { maxEntries: 1000, maxBytes: Number.MAX_SAFE_INTEGER })) chunks.push(c);
    assert.deepEqual(chunks.map((c) => (c.slice as AWSet).size), [1000, 1000, 1000, 1000, 1000, 0]);
    assert.deepEqual(chunks.map((c) => c.rangeOpen), [false, false, false, false, false, true]);
    // The receiver already holds everything (as after earlier deltas): a full transfer keeps it all.
    await b.merge("big", ObjectType.AWSET, (await a.readState("big"))!.state);
    await transfer(a, b, "big", 1000);
    assert.equal((await b.describe("big"))!.size, n);
    await Promise.all([a.close(), b.close()]);
  });
});

describe("store durability and identity", () => {
  it("keeps state, node id and sequence numbers across restarts", async () => {
    const dir = newDir();
    const s = await open(dir);
    const id = s.nodeId;
    await s.add("k", [el(1), el(2)]);
    await s.remove("k", [el(1)]);
    await s.increment("c", -3n);
    await s.persistSeqs(new Map([[5, 1000], [6, 7]]));
    await s.close();
    const s2 = await open(dir);
    assert.equal(s2.nodeId, id);
    assert.deepEqual((await s2.page("k", undefined, 10)).members, [el(2)]);
    assert.equal((await s2.counter("c"))!.value(), -3n);
    assert.deepEqual([...(await s2.loadSeqs())].sort((a, b) => a[0] - b[0]), [[5, 1000], [6, 7]]);
    // Every open mints under a new replica id (the directory may be a copy of an earlier state),
    // so no dot is ever minted twice; the old id's dots stay in the context.
    assert.notEqual(s2.replicaId, s.replicaId);
    assert.ok(s2.replicaId.startsWith(`${id}~`));
    const r = await s2.add("k", [el(3)]);
    assert.deepEqual(r.dots[0], { replica: s2.replicaId, counter: 1 });
    const ctx = (await s2.describe("k"))!.ctx;
    assert.ok(ctx.contains(s.replicaId, 2) && ctx.contains(s2.replicaId, 1));
    await s2.close();
    // The id drawn is recorded before use: an offline reader (keepReplicaId) sees the last one.
    const reader = await Store.open({ dir, partitions: "stored", partitionOf, keepReplicaId: true });
    assert.equal(reader.replicaId, s2.replicaId);
    await reader.close();
  });

  it("a copy of a data directory started after its original moved on mints dots the original never did", async () => {
    const dir = newDir();
    const s = await open(dir, "n1");
    await s.add("k", [el(1)]);
    await s.close();
    const backup = newDir();
    cpSync(dir, backup, { recursive: true });
    // The original lives on and mints more dots...
    const later = await open(dir, "n1");
    const minted = (await later.add("k", [el(2), el(3)])).dots;
    await later.close();
    // ...then the node is started on the backup (a restore, a rolled-back volume): its dots differ.
    const restored = await open(backup, "n1");
    const again = (await restored.add("k", [el(4), el(5)])).dots;
    for (const d of again) assert.ok(!minted.some((m) => m.replica === d.replica && m.counter === d.counter), `dot ${d.replica}:${d.counter} minted twice`);
    // Joined, both histories survive: no add took another's place.
    const original = await open(dir, "n1");
    await restored.merge("k", ObjectType.AWSET, (await original.readState("k"))!.state);
    await original.close();
    assert.deepEqual((await restored.page("k", undefined, 10)).members, [el(1), el(2), el(3), el(4), el(5)]);
    await restored.close();
  });

  it("mints dots under a fresh replica id when a node id comes back with a new data directory", async () => {
    const a = await open(newDir(), "pod-0");
    const b = await open(newDir(), "pod-0");
    assert.equal(a.nodeId, b.nodeId);
    assert.notEqual(a.replicaId, b.replicaId);
    assert.ok(a.replicaId.startsWith("pod-0~"));
    const da = await a.add("k", [el(1)]);
    const db = await b.add("k", [el(2)]);
    assert.notEqual(da.dots[0]!.replica, db.dots[0]!.replica);
    // b's write survives a join with a's state, as it must.
    await b.merge("k", ObjectType.AWSET, (await a.readState("k"))!.state);
    assert.deepEqual((await b.page("k", undefined, 10)).members, [el(1), el(2)]);
    await Promise.all([a.close(), b.close()]);
  });

  it("treats a directory holding only lost+found as empty", async () => {
    const dir = newDir();
    mkdirSync(join(dir, "lost+found"), { recursive: true });
    const s = await open(dir);
    await s.add("k", [el(1)]);
    await s.close();
  });

  it("refuses another node's directory, a foreign LevelDB, and a non-store directory", async () => {
    const dir = newDir();
    await (await open(dir, "node-a")).close();
    await assert.rejects(open(dir, "node-b"), (e: Error) => e instanceof StoreOpenError && /belongs to node "node-a"/.test(e.message));
    await assert.rejects(open(dir, undefined, 16), (e: Error) => e instanceof StoreOpenError && /8 partitions/.test(e.message));

    const foreign = newDir();
    const db = new ClassicLevel(foreign);
    await db.put("hello", "world");
    await db.close();
    await assert.rejects(open(foreign), (e: Error) => e instanceof StoreOpenError && /did not create/.test(e.message));

    const junk = newDir();
    mkdirSync(junk);
    writeFileSync(join(junk, "notes.txt"), "not a database");
    await assert.rejects(open(junk), (e: Error) => e instanceof StoreOpenError && /not a deltaset store/.test(e.message));
  });

  it("refuses a corrupted format record with a clear message", async () => {
    const dir = newDir();
    await (await open(dir)).close();
    const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: "buffer", valueEncoding: "buffer" });
    await db.put(Buffer.from([0x00, 0x46]), Buffer.from("{not json"));
    await db.close();
    await assert.rejects(open(dir), (e: Error) => e instanceof StoreOpenError && /corrupt/.test(e.message));
  });

  it("refuses a store whose records LevelDB finds damaged with a StoreOpenError saying what to do", async () => {
    // LevelDB reports a block that fails its checks (checksum, decompression, block type) as
    // LEVEL_CORRUPTION, from a read at start: the format record's, or the pending removes'.
    const corruption = () => Object.assign(new Error("Corruption: corrupted compressed block contents"), { code: "LEVEL_CORRUPTION" });
    for (const failing of ["get", "iterator"] as const) {
      const db = memoryDb();
      await (await Store.open({ dir: "memory", db, partitions: 8, partitionOf })).close();
      // The same database, but the one kind of read fails as LevelDB reports a damaged block.
      const broken = {
        get: async () => Promise.reject(corruption()),
        iterator: () => ({ next: async () => Promise.reject(corruption()), all: async () => Promise.reject(corruption()), close: async () => {}, [Symbol.asyncIterator]: async function* () { throw corruption(); } }),
      };
      const damaged = new Proxy(db, {
        get: (target, name, receiver) => {
          if (name === failing) return broken[failing];
          const v = Reflect.get(target, name, receiver) as unknown;
          return typeof v === "function" ? v.bind(target) : v;
        },
      });
      await assert.rejects(
        Store.open({ dir: "memory", db: damaged, partitions: 8, partitionOf }),
        (e: Error) => e instanceof StoreOpenError && /damaged: LevelDB cannot read a block/.test(e.message) && /Corruption/.test(e.message),
        failing,
      );
    }
  });

  it("answers a type mismatch with a typed error and changes nothing", async () => {
    const s = await open(newDir());
    await s.increment("c", 1n);
    await assert.rejects(s.add("c", [el(1)]), (e: Error) => e instanceof TypeMismatchError && /COUNTER/.test(e.message));
    await assert.rejects(s.contains("c", [el(1)]), TypeMismatchError);
    assert.equal((await s.counter("c"))!.value(), 1n);
    await s.add("k", [el(1)]);
    await assert.rejects(s.increment("k", 1n), TypeMismatchError);
    assert.equal((await s.describe("k"))!.size, 1);
    await s.close();
  });

  it("a remove on a missing key creates nothing", async () => {
    const s = await open(newDir());
    const r = await s.remove("nothing", [el(1)]);
    assert.equal(r.removed, 0);
    assert.equal(await s.describe("nothing"), undefined);
    await s.close();
  });

  it("lists keys per partition and pages members in byte order", async () => {
    const s = await open(newDir());
    const keys = ["a", "b", "c", "dd", "eee", "k1", "k2"];
    for (const k of keys) await s.add(k, [el(1)]);
    const found: string[] = [];
    for (let p = 0; p < s.partitions; p++) for await (const k of s.keys(p)) found.push(k);
    assert.deepEqual(found.sort(), [...keys].sort());
    const members = [Buffer.from([0]), Buffer.from([0, 0]), Buffer.from([0, 1]), Buffer.from([1]), Buffer.from([255])];
    await s.add("order", [...members].reverse());
    const p1 = await s.page("order", undefined, 2);
    assert.deepEqual(p1.members, members.slice(0, 2));
    const p2 = await s.page("order", p1.next, 2);
    assert.deepEqual(p2.members, members.slice(2, 4));
    const p3 = await s.page("order", p2.next, 2);
    assert.deepEqual(p3.members, members.slice(4));
    assert.equal(p3.next, undefined);
    await s.close();
  });
});
