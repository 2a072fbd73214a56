// The group commit under a real store (LevelDB in a temporary directory, fsync): writes queued in
// one turn of the event loop share one batch, a write queued while a batch is written goes into the
// next one, a batch's worth of records or a long burst of operations starts at once, and every write is acknowledged only once
// its batch is durable, also a write that changes nothing because it repeats one still queued.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Store } from "../../services/store/store.ts";
import { GroupCommit } from "../../services/store/group-commit.ts";
import { memoryDb } from "../../services/store/db.ts";
import { StoreClosedError, StoreWriteError } from "../../services/store/errors.ts";
import { AWSet, CausalContext, ObjectType, retryFilterParams } from "../../services/crdt/index.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-group-commit-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const open = () => Store.open({ dir: join(root, `db${dirs++}`), partitions: 4, partitionOf: (k, p) => k.length % p, sync: "fsync" });
const el = (s: string) => Buffer.from(s);

describe("group commit", () => {
  it("a write after the store closed is refused as closed, not as a storage failure that stops the node", async () => {
    const failures: Error[] = [];
    const store = await Store.open({ dir: join(root, `db${dirs++}`), partitions: 4, partitionOf: (k, p) => k.length % p, sync: "fsync", onWriteFailure: (e) => failures.push(e) });
    await store.add("k", [el("1")]);
    await store.close();
    // What gossip's durable sequence numbers write, with no check of their own (a shutdown that
    // lands while a peer's stream is being joined writes so too).
    await assert.rejects(store.persistSeqs(new Map([[0, 5]])), StoreClosedError);
    assert.deepEqual(failures, []);
  });

  it("adds started in one turn share one batch", async () => {
    const store = await open();
    const { batches } = store.stats();
    await Promise.all(["a", "b", "c", "d"].map((k) => store.add(k, [el("1")])));
    assert.equal(store.stats().batches - batches, 1);
    await store.close();
  });

  it("an add started while a batch is written goes into the next batch, with the others waiting then", async () => {
    const store = await open();
    const { batches } = store.stats();
    const first = store.add("a", [el("1")]);
    // The first add's batch starts at the end of a turn; the adds below come after it started.
    for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
    const rest = ["b", "c", "d"].map((k) => store.add(k, [el("1")]));
    await Promise.all([first, ...rest]);
    assert.equal(store.stats().batches - batches, 2);
    for (const k of ["a", "b", "c", "d"]) assert.deepEqual(await store.contains(k, [el("1")]), [true]);
    await store.close();
  });

  it("a batch writes each key once: records a later operation of the batch overwrites are left out, and what is read back is the last", async () => {
    const store = await open();
    const before = store.stats();
    // Four adds to one set in one turn: one batch, in which each add rewrites the set's header
    // and its dot-index bucket; only the last of each goes to LevelDB.
    const dots = await Promise.all(["1", "2", "3", "4"].map((e) => store.add("same", [el(e)])));
    const after = store.stats();
    assert.equal(after.batches - before.batches, 1);
    assert.equal(after.supersededRecords - before.supersededRecords, 6, "3 headers and 3 buckets overwritten in the batch");
    assert.deepEqual(await store.contains("same", [el("1"), el("2"), el("3"), el("4")]), [true, true, true, true]);
    await store.close();
    // Read back from disk: the header counts every add, the records agree (dot index included),
    // and a remote remove naming the third add's dot finds its element through the index.
    const reopened = await Store.open({ dir: join(root, `db${dirs - 1}`), partitions: 4, partitionOf: (k, p) => k.length % p, sync: "fsync" });
    assert.equal((await reopened.describe("same"))?.size, 4);
    assert.deepEqual(await reopened.verify("same"), []);
    const seen = new CausalContext();
    seen.addDot(dots[2]!.dots[0]!);
    await reopened.merge("same", ObjectType.AWSET, AWSet.fromParts(new Map(), seen));
    assert.deepEqual(await reopened.contains("same", [el("1"), el("2"), el("3"), el("4")]), [true, true, false, true]);
    await reopened.close();
  });

  it("every add is acknowledged only after its batch is written", async () => {
    const store = await open();
    const before = store.stats().batches;
    const acked: number[] = [];
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.add(`k${i % 3}`, [el(String(i))]).then(() => acked.push(store.stats().batches))));
    assert.ok(acked.every((b) => b > before), "no add answered before a batch holding it was written");
    await store.close();
  });
});

describe("writes that change nothing", () => {
  // Each is the retry of a write still queued: it reads that write's effects (queued writes are
  // visible to later operations) and so changes nothing, but a crash before the batch is durable
  // would lose what its answer acknowledges. It must be answered only after that batch.
  async function answeredAfterTheBatch(run: (s: Store) => Promise<unknown>, setup?: (s: Store) => Promise<unknown>) {
    const store = await open();
    await setup?.(store);
    const before = store.stats().batches;
    const first = run(store);
    let batchesAtRetry = -1;
    const retry = run(store).then(() => (batchesAtRetry = store.stats().batches));
    await Promise.all([first, retry]);
    assert.ok(batchesAtRetry > before, "the retry was answered before the batch of the write it repeats was durable");
    await store.close();
  }

  it("a Merge repeated while the first is queued", () =>
    answeredAfterTheBatch((s) => s.merge("k", ObjectType.AWSET, AWSet.bottom().add("r1", [el("m")]))));

  it("a Remove repeated while the first is queued", () =>
    answeredAfterTheBatch(
      (s) => s.remove("k", [el("x")]),
      (s) => s.add("k", [el("x")]),
    ));

  it("an Increment with a request id repeated while the first is queued (a duplicate)", async () => {
    const params = retryFilterParams({ idsPerPeriod: 100, falsePositiveRate: 0.001, periodMs: 60_000, pastEpochs: 2 });
    await answeredAfterTheBatch((s) => s.incrementOnce("c", 1n, { id: "req-1", now: 1_700_000_000_000, params, explicit: false }));
  });
});

describe("GroupCommit start of a batch", () => {
  const put = (i: number) => ({ type: "put" as const, key: Buffer.from(`k${i}`), value: Buffer.from("v") });

  it("a few records wait for the end of the turn; a batch's worth starts at once", async () => {
    const commit = new GroupCommit(memoryDb(), { sync: false, maxBatch: 256, syncReadMax: 8, startAtRecords: 100, startAtOperations: 1000 });
    const small = commit.write([put(0), put(1)]);
    assert.equal(commit.queued, 1, "queued until the end of the turn");
    await small;
    assert.equal(commit.batches, 1);
    const large = commit.write(Array.from({ length: 100 }, (_, i) => put(i)));
    assert.equal(commit.queued, 0, "taken into a batch at once");
    await large;
    assert.equal(commit.batches, 2);
    assert.deepEqual(await commit.get(Buffer.from("k99")), Buffer.from("v"));
  });

  it("a burst of startAtOperations small writes starts a batch at once; the rest of the turn's go in the next", async () => {
    const db = memoryDb();
    await db.open();
    const commit = new GroupCommit(db, { sync: false, maxBatch: 256, syncReadMax: 8, startAtRecords: 100, startAtOperations: 4 });
    const first = [0, 1, 2].map((i) => commit.write([put(i)]));
    assert.equal(commit.queued, 3, "three wait for the end of the turn");
    first.push(commit.write([put(3)]));
    assert.equal(commit.queued, 0, "the fourth starts the batch at once");
    const rest = [4, 5].map((i) => commit.write([put(i)]));
    await Promise.all([...first, ...rest]);
    assert.equal(commit.batches, 2, "the writes after it share the next batch");
    assert.deepEqual(await commit.get(Buffer.from("k5")), Buffer.from("v"));
  });

  it("a failed batch rejects its writes and every later one with a StoreWriteError, and tells the owner once", async () => {
    const db = memoryDb();
    await db.open();
    // The database's batch write fails as LevelDB's does on a full disk.
    const batch = db.batch.bind(db);
    let failing = false;
    (db as { batch: unknown }).batch = () => {
      const b = batch();
      if (failing) b.write = async () => Promise.reject(new Error("IO error: 000003.log: No space left on device"));
      return b;
    };
    const told: StoreWriteError[] = [];
    const commit = new GroupCommit(db, { sync: false, maxBatch: 2, syncReadMax: 8, startAtRecords: 100, startAtOperations: 100, onFailure: (e) => told.push(e) });
    await commit.write([put(0)]);
    failing = true;
    // Three writes: the first batch takes two of them and fails; the third, queued behind, is refused too.
    const writes = [1, 2, 3].map((i) => commit.write([put(i)]));
    for (const w of writes) await assert.rejects(w, (e: Error) => e instanceof StoreWriteError && /storage failed to write \(IO error: .*No space left on device\)/.test(e.message));
    await assert.rejects(commit.write([put(4)]), StoreWriteError);
    await assert.rejects(commit.written(), StoreWriteError);
    assert.equal(told.length, 1);
    assert.equal(commit.batches, 1, "only the batch before the failure was written");
  });
});
