// The key-value database a store runs on: LevelDB on disk (classic-level) in a node, or an
// in-memory database with the same interface (memory-level) in the gossip simulator, so that the
// simulator runs the store's own code: its joins, chunked transfers and durability.
import type { AbstractLevel } from "abstract-level";
import { ClassicLevel } from "classic-level";
import { MemoryLevel } from "memory-level";

/** Write options asking LevelDB to fsync (memory-level ignores them). */
export const SYNCED = { sync: true } as {};

export type StoreDb = AbstractLevel<string | Buffer | Uint8Array, Buffer, Buffer>;

/** A consistent view of the database at one moment (db.snapshot()); closed by its user. */
export type DbSnapshot = ReturnType<StoreDb["snapshot"]>;

export function openLevelDb(dir: string, o: { writeBufferBytes: number; cacheBytes: number }): ClassicLevel<Buffer, Buffer> {
  return new ClassicLevel<Buffer, Buffer>(dir, {
    keyEncoding: "buffer",
    valueEncoding: "buffer",
    writeBufferSize: o.writeBufferBytes,
    cacheSize: o.cacheBytes,
  });
}

/** One record of a batch: the shape the store builds and LevelDB takes. */
export type BatchOp = { type: "put"; key: Buffer; value: Buffer } | { type: "del"; key: Buffer };

/** classic-level's chained batch below abstract-level's checks: the implementor's interface. */
interface NativeChainedBatch {
  _put(key: Buffer, value: Buffer): void;
  _del(key: Buffer): void;
  _write(options: { sync: boolean }): Promise<void>;
}

/**
 * Write ops as one atomic batch. On LevelDB the records go straight to classic-level's native
 * batch: abstract-level's put() builds an operation object, validates and encodes each record
 * (about 100 bytes and a fifth of a µs per record, which group commit pays for every element
 * record), while the store's keys and values are Buffers already. Elsewhere (memory-level),
 * the public chained batch.
 */
export async function writeBatch(db: StoreDb, ops: readonly BatchOp[], options: { sync: boolean }): Promise<void> {
  const batch = db.batch();
  if (db instanceof ClassicLevel) {
    const native = batch as unknown as NativeChainedBatch;
    try {
      for (const op of ops) {
        if (op.type === "put") native._put(op.key, op.value);
        else native._del(op.key);
      }
      await native._write(options);
    } finally {
      // Detaches the batch from the database (nothing was put through the public API, so close writes nothing).
      await batch.close();
    }
    return;
  }
  // A chained batch: abstract-level's array form copies its options into every operation.
  for (const op of ops) {
    if (op.type === "put") batch.put(op.key, op.value);
    else batch.del(op.key);
  }
  await batch.write(options);
}

/** An empty in-memory database (lost with the process; a simulated node's "disk"). */
export function memoryDb(): StoreDb {
  return new MemoryLevel<Buffer, Buffer>({ keyEncoding: "buffer", valueEncoding: "buffer", storeEncoding: "buffer" }) as unknown as StoreDb;
}

/** LevelDB's size estimate of a key range, or undefined on a database that has none (in memory). */
export async function approximateBytes(db: StoreDb, gte: Buffer, lt: Buffer): Promise<number | undefined> {
  const sized = db as unknown as { approximateSize?: (a: Buffer, b: Buffer) => Promise<number> };
  return typeof sized.approximateSize === "function" ? sized.approximateSize(gte, lt) : undefined;
}
