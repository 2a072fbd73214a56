// Opening a data directory: checks that it is a deltaset store of this node and version, creates
// it on first use (node id, replica id, partition count), and upgrades an older format in place.
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { SYNCED, type StoreDb, memoryDb, openLevelDb } from "./db.js";
import { StoreOpenError } from "./errors.js";
import { formatKey } from "./keys.js";
import { addLiveDigests, migrateV1ToV2, migrationProgressKey } from "./migrate.js";

export const STORE_FORMAT = "deltaset-store";
/**
 * 4: an add-wins set's header carries its live digest (records.ts, live-digest.ts), which version 3
 * nodes cannot read; 3: a large filter state may lie in a base record and a log of deltas
 * (whole-state-layout.ts), which version 2 nodes cannot read; 2: dot index in buckets
 * (dot-index.ts); version 1 had one record per dot. Opening a version 2 or 3 directory gives its
 * sets their digests (migrate.ts addLiveDigests) and records 4.
 */
export const STORE_VERSION = 4;

export interface StoreMeta {
  format: string;
  version: number;
  /** Set while an upgrade from this version runs (an older node then refuses the directory). */
  migratingFrom?: number;
  nodeId: string;
  /** Replica id that mints this data directory's dots (see Store.replicaId). */
  replicaId: string;
  partitions: number;
  createdAt: string;
}

export interface OpenOptions {
  /** The data directory, or "memory" for an in-memory database (simulations). */
  dir: string;
  /** An existing in-memory database to reopen (a simulated node restarting with its "disk"). */
  db?: StoreDb;
  nodeId?: string;
  /**
   * The replica id this open mints under; default a new one drawn at every open of a directory
   * (see keepReplicaId). A caller that fixes it must give a new one at every open (StoreOptions).
   */
  replicaId?: string;
  /**
   * Mint under the directory's recorded replica id rather than a new one (an offline reader that
   * writes nothing). A node draws a new id at every start: the directory it starts on may be a
   * copy (a restored backup, a rolled-back volume, a copy started beside its original) whose
   * recorded id has already minted dots past the ones it holds, which it would mint again.
   */
  keepReplicaId?: boolean;
  partitions: number | "stored";
  writeBufferBytes: number;
  cacheBytes: number;
  upgrade: boolean;
  onUpgrade?: (e: { objects: number; ms: number }) => void;
  onUpgradeStart?: (e: { fromVersion: number; toVersion: number }) => void;
}

export interface OpenedDb {
  db: StoreDb;
  nodeId: string;
  replicaId: string;
  partitions: number;
}

export async function openStoreDb(opts: OpenOptions): Promise<OpenedDb> {
  const inMemory = opts.dir === "memory";
  let db: StoreDb;
  let fresh: boolean;
  if (inMemory) {
    db = opts.db ?? memoryDb();
    await db.open();
    try {
      fresh = (await db.get(formatKey())) === undefined;
    } catch (err) {
      throw openFailure(opts.dir, err);
    }
  } else {
    // lost+found: a fresh filesystem volume mounted as the data directory is still empty.
    fresh = !existsSync(opts.dir) || readdirSync(opts.dir).every((f) => f === "lost+found");
    if (!fresh && !existsSync(`${opts.dir}/CURRENT`)) {
      throw new StoreOpenError(
        `data directory ${opts.dir} is not empty and is not a deltaset store (no LevelDB CURRENT file); ` +
          `point --data-dir at an empty or existing deltaset directory`,
      );
    }
    db = openLevelDb(opts.dir, opts) as unknown as StoreDb;
    try {
      await db.open();
    } catch (err) {
      const cause = (err as { cause?: Error }).cause?.message ?? (err as Error).message;
      throw new StoreOpenError(`cannot open data directory ${opts.dir}: ${cause}`);
    }
  }
  if (fresh && opts.partitions === "stored") {
    await db.close();
    throw new StoreOpenError(`data directory ${opts.dir} does not exist or is empty`);
  }
  try {
    const meta = await readMeta(db, opts.dir);
    if (meta === undefined) {
      if (!fresh) throw new StoreOpenError(`data directory ${opts.dir} holds a LevelDB database that deltaset did not create`);
      const nodeId = opts.nodeId ?? `n-${randomBytes(6).toString("hex")}`;
      const record: StoreMeta = {
        format: STORE_FORMAT,
        version: STORE_VERSION,
        nodeId,
        replicaId: opts.replicaId ?? newReplicaId(nodeId),
        partitions: opts.partitions as number,
        createdAt: new Date().toISOString(),
      };
      await db.put(formatKey(), Buffer.from(JSON.stringify(record)), SYNCED);
      return { db, nodeId, replicaId: record.replicaId, partitions: record.partitions };
    }
    if (opts.nodeId !== undefined && opts.nodeId !== meta.nodeId) {
      throw new StoreOpenError(
        `data directory ${opts.dir} belongs to node "${meta.nodeId}", not "${opts.nodeId}"; use that node id or another data directory`,
      );
    }
    if (opts.partitions !== "stored" && meta.partitions !== opts.partitions) {
      throw new StoreOpenError(`data directory ${opts.dir} was created with ${meta.partitions} partitions, not ${opts.partitions}`);
    }
    if (meta.version === 1 || meta.migratingFrom === 1) {
      if (!opts.upgrade) {
        throw new StoreOpenError(`data directory ${opts.dir} has store version 1; a node of this version upgrades it in place when it starts`);
      }
      opts.onUpgradeStart?.({ fromVersion: 1, toVersion: STORE_VERSION });
      await upgradeInPlace(db, meta, 1, opts.onUpgrade);
    } else if ((meta.version === 2 || meta.version === 3 || meta.migratingFrom === 2 || meta.migratingFrom === 3) && opts.upgrade) {
      const fromVersion = meta.migratingFrom ?? meta.version;
      opts.onUpgradeStart?.({ fromVersion, toVersion: STORE_VERSION });
      await upgradeInPlace(db, meta, fromVersion, opts.onUpgrade);
    }
    const replicaId = opts.replicaId ?? (opts.keepReplicaId === true ? meta.replicaId : newReplicaId(meta.nodeId));
    // Recorded before any dot is minted under it (dots name it; a later open draws again anyway).
    if (replicaId !== meta.replicaId) await db.put(formatKey(), Buffer.from(JSON.stringify({ ...(await readMeta(db, opts.dir))!, replicaId })), SYNCED);
    return { db, nodeId: meta.nodeId, replicaId, partitions: meta.partitions };
  } catch (err) {
    await db.close();
    throw openFailure(opts.dir, err);
  }
}

/**
 * Bring a version 1, 2 or 3 directory to the current version in place (migrate.ts): version 1's
 * records to version 2's layout, then every set's live digest (versions 2 and 3 need only that).
 * The target version is recorded first, with the version it comes from, so an older node refuses
 * the directory from the first record rewritten, and a run cut half-way runs again at the next
 * start (both steps are idempotent). It is recorded plain last.
 */
async function upgradeInPlace(db: StoreDb, meta: StoreMeta, fromVersion: number, report?: (e: { objects: number; ms: number }) => void): Promise<void> {
  const started = performance.now();
  await db.put(formatKey(), Buffer.from(JSON.stringify({ ...meta, version: STORE_VERSION, migratingFrom: fromVersion })), SYNCED);
  const objects = (fromVersion === 1 ? await migrateV1ToV2(db) : 0) + (await addLiveDigests(db));
  const { migratingFrom: _, ...upgraded } = { ...meta, version: STORE_VERSION };
  await db.batch().put(formatKey(), Buffer.from(JSON.stringify(upgraded))).del(migrationProgressKey()).write(SYNCED);
  if (objects > 0 || fromVersion === 1) report?.({ objects, ms: performance.now() - started });
}

/**
 * An error met while opening a data directory, as the node reports it: LevelDB finding a block it
 * reads at start damaged (a checksum or decompression failure) becomes a StoreOpenError saying what
 * to do; anything else is returned as it is.
 */
export function openFailure(dir: string, err: unknown): unknown {
  if ((err as { code?: string } | null)?.code !== "LEVEL_CORRUPTION") return err;
  return new StoreOpenError(
    `data directory ${dir} is damaged: LevelDB cannot read a block the node reads at start (${(err as Error).message}); ` +
      `restore it from a backup, or move it aside and start the node on an empty directory to catch up from its peers`,
  );
}

/**
 * A new replica id: the node id and 32 random bits. Two starts of one node that drew the same id
 * would still not mint a dot twice unless the later one also started from an older copy of the
 * directory: a key's next dot is one past the highest its context holds for the id.
 */
function newReplicaId(nodeId: string): string {
  return `${nodeId}~${randomBytes(4).toString("hex")}`;
}

async function readMeta(db: StoreDb, dir: string): Promise<StoreMeta | undefined> {
  const raw = await db.get(formatKey());
  if (raw === undefined) return undefined;
  let meta: StoreMeta;
  try {
    meta = JSON.parse(raw.toString("utf8")) as StoreMeta;
  } catch {
    throw new StoreOpenError(`data directory ${dir}: the store format record is corrupt`);
  }
  if (meta.format !== STORE_FORMAT) throw new StoreOpenError(`data directory ${dir} holds "${meta.format}" data, not a deltaset store`);
  if (typeof meta.replicaId !== "string" || meta.replicaId === "") {
    throw new StoreOpenError(`data directory ${dir}: the store format record has no replica id`);
  }
  if (meta.version !== STORE_VERSION && meta.version !== 1 && meta.version !== 2 && meta.version !== 3) {
    throw new StoreOpenError(`data directory ${dir} has store version ${meta.version}; this node reads version ${STORE_VERSION}`);
  }
  return meta;
}

/**
 * Draw a new replica id for a data directory and record it durably: the dots and counter entries
 * minted from then on are under it. Used before a node drops keys it handed off: a key's next dot
 * is one past the highest the key's context holds for the replica, so after its copy is gone the
 * old id would mint dots its peers have already seen (and would take as known, or removed).
 */
export async function rotateReplicaId(db: StoreDb, dir: string): Promise<string> {
  const meta = await readMeta(db, dir);
  if (meta === undefined) throw new StoreOpenError(`data directory ${dir} has no store format record`);
  const replicaId = newReplicaId(meta.nodeId);
  await db.put(formatKey(), Buffer.from(JSON.stringify({ ...meta, replicaId })), SYNCED);
  return replicaId;
}
