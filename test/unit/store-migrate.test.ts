// Opening a version 1 data directory (one dot-index record per dot) upgrades it in place to the
// bucketed index, and an upgrade cut half-way resumes without misreading converted objects. A
// version 2 or 3 directory's sets get their live digests.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ClassicLevel } from "classic-level";
import { type AWSet, ObjectType } from "../../services/crdt/index.ts";
import { DOT_BUCKET, decodeBucket } from "../../services/store/dot-index.ts";
import { dotIndexRange, formatKey, headerKey, objectPrefix, readU64, writeU64 } from "../../services/store/keys.ts";
import { decodeHeader, encodeHeader } from "../../services/store/records.ts";
import { migrateV1ToV2, migrationProgressKey } from "../../services/store/migrate.ts";
import { STORE_VERSION, Store, StoreOpenError } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-migrate-"));
after(() => rmSync(root, { recursive: true, force: true }));
const partitionOf = (key: string, p: number) => Buffer.from(key).reduce((a, b) => (a * 31 + b) % p, 7);
const open = (dir: string, onUpgrade?: (e: { objects: number }) => void, onUpgradeStart?: (e: { fromVersion: number }) => void) =>
  Store.open({ dir, nodeId: "A", partitions: 8, partitionOf, sync: "buffered", onUpgrade, onUpgradeStart });
const KEYS = ["alpha", "beta", "gamma"];

async function openRaw(dir: string): Promise<ClassicLevel<Buffer, Buffer>> {
  const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: "buffer", valueEncoding: "buffer" });
  await db.open();
  return db;
}

/** Rewrite one object's bucketed dot index as version 1 wrote it: one record per dot. */
async function writeV1Index(db: ClassicLevel<Buffer, Buffer>, key: string): Promise<void> {
  // All deletes before the puts: bucket b and dot b have the same key.
  const batch = db.batch();
  const puts: Array<[Buffer, Buffer]> = [];
  for await (const [k, v] of db.iterator(dotIndexRange(objectPrefix(partitionOf(key, 8), key)))) {
    batch.del(k);
    const bucketAt = k.length - 8;
    const bucket = readU64(k, bucketAt);
    for (const [offset, element] of decodeBucket(v)) {
      const dotKey = Buffer.from(k);
      writeU64(dotKey, bucketAt, bucket * DOT_BUCKET + offset);
      puts.push([dotKey, Buffer.from(element)]);
    }
  }
  for (const [k, v] of puts) batch.put(k, v);
  await batch.write();
}

/** Rewrite the headers of the first n of KEYS without their live digests, as versions 2 and 3 wrote them; returns n. */
async function stripDigests(db: ClassicLevel<Buffer, Buffer>, n: number): Promise<number> {
  for (const key of KEYS.slice(0, n)) {
    const hk = headerKey(objectPrefix(partitionOf(key, 8), key));
    await db.put(hk, encodeHeader({ ...decodeHeader((await db.get(hk))!), live: undefined }));
  }
  return n;
}

async function setMeta(db: ClassicLevel<Buffer, Buffer>, change: Record<string, unknown>): Promise<void> {
  const meta = JSON.parse((await db.get(formatKey()))!.toString()) as Record<string, unknown>;
  await db.put(formatKey(), Buffer.from(JSON.stringify({ ...meta, ...change })));
}

/** Three sets with adds and removes, so buckets are partly empty; returns their states. */
async function populate(dir: string): Promise<AWSet[]> {
  const s = await open(dir);
  for (const [i, key] of KEYS.entries()) {
    const els = Array.from({ length: 100 + 37 * i }, (_, j) => Buffer.from(`${key}-${j}`));
    await s.add(key, els);
    await s.remove(key, els.filter((_, j) => j % 3 === 0));
    await s.add(key, els.slice(0, 10));
  }
  const states = await Promise.all(KEYS.map(async (k) => (await s.readState(k))!.state as AWSet));
  await s.close();
  return states;
}

async function expectUpgraded(dir: string, states: AWSet[], objects: number): Promise<void> {
  const seen: number[] = [];
  const started: number[] = [];
  const s = await open(dir, (e) => seen.push(e.objects), (e) => started.push(e.fromVersion));
  assert.deepEqual(seen, [objects]);
  assert.deepEqual(started, [1]);
  for (const [i, key] of KEYS.entries()) {
    assert.deepEqual(await s.verify(key), []);
    assert.ok(((await s.readState(key))!.state as AWSet).equals(states[i]!));
  }
  // Remote removes find their elements through the upgraded index.
  const victim = (await s.page("alpha", undefined, 1)).members[0]!;
  const before = (await s.describe("alpha"))!.size;
  const alpha = (await s.readState("alpha"))!.state as AWSet;
  await s.merge("alpha", ObjectType.AWSET, alpha.removeDelta([victim]));
  assert.equal((await s.describe("alpha"))!.size, before - 1);
  assert.deepEqual(await s.verify("alpha"), []);
  await s.close();
  const db = await openRaw(dir);
  const meta = JSON.parse((await db.get(formatKey()))!.toString()) as { version: number; migratingFrom?: number };
  assert.equal(meta.version, STORE_VERSION);
  assert.equal(meta.migratingFrom, undefined);
  assert.equal(await db.get(migrationProgressKey()), undefined);
  await db.close();
  // A second open has nothing to upgrade.
  const again: number[] = [];
  await (await open(dir, (e) => again.push(e.objects))).close();
  assert.deepEqual(again, []);
}

describe("store format upgrade 1 → 2", () => {
  it("converts every object's dot index in place", async () => {
    const dir = join(root, "full");
    const states = await populate(dir);
    const db = await openRaw(dir);
    for (const key of KEYS) await writeV1Index(db, key);
    await setMeta(db, { version: 1 });
    await db.close();
    await expectUpgraded(dir, states, KEYS.length);
  });

  it("converts object by object when every object fills a batch", async () => {
    const dir = join(root, "small-batches");
    const states = await populate(dir);
    const db = await openRaw(dir);
    for (const key of KEYS) await writeV1Index(db, key);
    assert.equal(await migrateV1ToV2(db, 1), KEYS.length);
    await setMeta(db, { version: STORE_VERSION });
    await db.del(migrationProgressKey());
    await db.close();
    const s = await open(dir);
    for (const [i, key] of KEYS.entries()) {
      assert.deepEqual(await s.verify(key), []);
      assert.ok(((await s.readState(key))!.state as AWSet).equals(states[i]!));
    }
    await s.close();
  });

  it("resumes after the last object an interrupted upgrade finished", async () => {
    const dir = join(root, "resume");
    const states = await populate(dir);
    const db = await openRaw(dir);
    // Objects sort by partition, then key: the first one stays converted, the others go back to v1.
    const prefixes = KEYS.map((k) => ({ k, p: objectPrefix(partitionOf(k, 8), k) })).sort((a, b) => Buffer.compare(a.p, b.p));
    for (const { k } of prefixes.slice(1)) await writeV1Index(db, k);
    await db.put(migrationProgressKey(), prefixes[0]!.p);
    await setMeta(db, { version: STORE_VERSION, migratingFrom: 1 });
    await db.close();
    await expectUpgraded(dir, states, KEYS.length - 1);
  });

  it("opens a version 2 or 3 directory (or one cut half-way) with its data, gives its sets their live digests and records version 4, unless asked not to upgrade", async () => {
    for (const from of [{ version: 2 }, { version: 3 }, { version: STORE_VERSION, migratingFrom: 3, keep: 1 }]) {
      const dir = join(root, `v${from.version}-${from.migratingFrom ?? ""}`);
      const states = await populate(dir);
      const db = await openRaw(dir);
      // Headers as versions 2 and 3 wrote them: no digest (all but `keep` of them, for a run cut half-way).
      const stripped = await stripDigests(db, KEYS.length - (from.keep ?? 0));
      await setMeta(db, { version: from.version, ...(from.migratingFrom === undefined ? {} : { migratingFrom: from.migratingFrom }) });
      await db.close();
      const version = async () => {
        const raw = await openRaw(dir);
        const v = (JSON.parse((await raw.get(formatKey()))!.toString()) as { version: number }).version;
        await raw.close();
        return v;
      };
      const readOnly = await Store.open({ dir, partitions: "stored", partitionOf, upgrade: false });
      assert.ok(((await readOnly.readState(KEYS[0]!))!.state as AWSet).equals(states[0]!));
      assert.equal((await readOnly.describe(KEYS[0]!))!.live, undefined);
      await readOnly.close();
      assert.equal(await version(), from.version, "a read-only open leaves the version");
      const upgrades: number[] = [];
      const s = await open(dir, (e) => upgrades.push(e.objects));
      for (const [i, key] of KEYS.entries()) {
        assert.ok(((await s.readState(key))!.state as AWSet).equals(states[i]!));
        assert.ok((await s.describe(key))!.live !== undefined, `${key} has its digest`);
        // verify checks each digest against the element records.
        assert.deepEqual(await s.verify(key), []);
      }
      await s.close();
      assert.deepEqual(upgrades, [stripped], "sets given a digest");
      assert.equal(await version(), STORE_VERSION);
    }
  });

  it("refuses a directory written by a newer version, and leaves it as it was", async () => {
    const dir = join(root, "newer");
    await populate(dir);
    const db = await openRaw(dir);
    await setMeta(db, { version: STORE_VERSION + 1 });
    await db.close();
    const refused = new RegExp(`store version ${STORE_VERSION + 1}; this node reads version ${STORE_VERSION}`);
    await assert.rejects(open(dir), (e: Error) => e instanceof StoreOpenError && refused.test(e.message));
    const again = await openRaw(dir);
    assert.equal((JSON.parse((await again.get(formatKey()))!.toString()) as { version: number }).version, STORE_VERSION + 1);
    await again.close();
  });
});
