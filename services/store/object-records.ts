// Reads over an object's records as a whole: the keys of a partition (jumping from header to
// header) and the consistency check of one object (its layout says what consistent means).
import type { StoreDb } from "./db.js";
import { OBJECTS, escapeBytes, headerKey, objectPrefix, objectRange, parseObjectKey, partitionPrefix } from "./keys.js";
import { layoutFor } from "./layouts.js";
import { decodeHeader } from "./records.js";

/** Keys of one partition, in key order. */
export function partitionKeys(db: StoreDb, partition: number): AsyncGenerator<string> {
  return new PartitionKeyScan(db).keys(partition);
}

/** Just past every object record. */
const OBJECTS_END = Buffer.from([OBJECTS + 1]);

/**
 * The partitions holding at least one object record: one seek per such partition, and one more
 * to find none after the last.
 */
export async function partitionsWithObjects(db: StoreDb): Promise<Set<number>> {
  const out = new Set<number>();
  let gte = partitionPrefix(0);
  for (;;) {
    const k = (await db.keys({ gte, lt: OBJECTS_END, limit: 1 }).all())[0];
    if (k === undefined) return out;
    const partition = k.readUInt16BE(1);
    out.add(partition);
    if (partition === 0xffff) return out;
    gte = partitionPrefix(partition + 1);
  }
}

/**
 * Keys of several partitions read one after another (a full-state stream of every partition). One
 * seek per key, jumping from header to header; the seek that finds nothing more in its partition
 * lands on the first key of a later partition, so the partitions in between are known to hold no
 * key and cost no seek of their own. A full-state stream of 64 partitions holding a dozen keys
 * took 64 + 12 seeks, each a round trip through LevelDB's thread pool; it now takes about 13.
 * What a seek found is current as of that seek: a key made since in a partition it skipped waits
 * for the next scan, as one made in a partition already read does.
 */
export class PartitionKeyScan {
  /** Partitions in [emptyFrom, emptyTo) held no key when last sought. */
  private emptyFrom = 0;
  private emptyTo = 0;
  /** Seeks made (tests count them). */
  seeks = 0;

  constructor(private readonly db: StoreDb) {}

  /** Keys of one partition in key order; from: a position inside it to start at (a key's prefix, or past a key). */
  async *keys(partition: number, from?: Buffer): AsyncGenerator<string> {
    if (partition >= this.emptyFrom && partition < this.emptyTo) return;
    let gte = from ?? partitionPrefix(partition);
    // Partitions from here up to the next key found hold no key (this one only if read whole).
    let emptyFrom = from === undefined ? partition : partition + 1;
    for (;;) {
      this.seeks++;
      const k = (await this.db.keys({ gte, lt: OBJECTS_END, limit: 1 }).all())[0];
      const found = k === undefined ? undefined : parseObjectKey(k);
      if (found === undefined || found.partition !== partition) {
        this.emptyFrom = emptyFrom;
        this.emptyTo = found === undefined ? Number.POSITIVE_INFINITY : found.partition;
        return;
      }
      yield found.key;
      emptyFrom = partition + 1;
      // Past every record of this object: the next seek finds the next header.
      gte = Buffer.concat([objectPrefix(partition, found.key), Buffer.from([0xff])]);
    }
  }
}

/**
 * Keys of one partition that start with prefix, in key order (UTF-8 bytes), strictly after
 * `after` when given. One seek per key: it jumps from header to header.
 */
export async function* partitionKeysWithPrefix(db: StoreDb, partition: number, prefix: string, after?: string): AsyncGenerator<string> {
  const escaped = escapeBytes(Buffer.from(prefix, "utf8"));
  // The escaped prefix without its terminator: every key starting with prefix sorts from here.
  let from = Buffer.concat([partitionPrefix(partition), escaped.subarray(0, escaped.length - 2)]);
  if (after !== undefined) {
    const afterObject = Buffer.concat([objectPrefix(partition, after), Buffer.from([0xff])]);
    if (Buffer.compare(afterObject, from) > 0) from = afterObject;
  }
  for await (const key of new PartitionKeyScan(db).keys(partition, from)) {
    if (!key.startsWith(prefix)) return;
    yield key;
  }
}

/** Problems of the object at prefix, in words (empty when consistent), from one snapshot. */
export async function verifyStored(db: StoreDb, prefix: Buffer): Promise<string[]> {
  const it = db.iterator(objectRange(prefix));
  try {
    const first = await it.next();
    if (first === undefined) return [];
    if (Buffer.compare(first[0], headerKey(prefix)) !== 0) return ["records without a header"];
    const h = decodeHeader(first[1]);
    const at = prefix.length;
    async function* records(): AsyncGenerator<[number, Buffer, Buffer]> {
      for (;;) {
        const next = await it.next();
        if (next === undefined) return;
        yield [next[0][at]!, next[0].subarray(at + 1), next[1]];
      }
    }
    return await layoutFor(h.type).verify(h, records());
  } finally {
    await it.close();
  }
}
