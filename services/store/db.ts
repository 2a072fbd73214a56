// The key-value database a store runs on: LevelDB on disk (classic-level) in a node, or an
// in-memory database with the same interface (memory-level) in the gossip simulator, so that the
// simulator runs the store's own code: its joins, chunked transfers and durability.
import type { AbstractLevel } from "abstract-level";
import { ClassicLevel } from "classic-level";
import { MemoryLevel } from "memory-level";

/** Write options asking LevelDB to fsync (memory-level ignores them). */
export const SYNCED = { sync: true } as {};

export type StoreDb = AbstractLevel<string | Buffer | Uint8Array, Buffer, Buffer>;

export function openLevelDb(dir: string, o: { writeBufferBytes: number; cacheBytes: number }): ClassicLevel<Buffer, Buffer> {
  return new ClassicLevel<Buffer, Buffer>(dir, {
    keyEncoding: "buffer",
    valueEncoding: "buffer",
    writeBufferSize: o.writeBufferBytes,
    cacheSize: o.cacheBytes,
  });
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
