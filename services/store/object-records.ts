// Reads over an object's records as a whole: the keys of a partition (jumping from header to
// header) and the consistency check of one object (its layout says what consistent means).
import type { StoreDb } from "./db.js";
import { escapeBytes, headerKey, objectPrefix, objectRange, parseObjectKey, partitionRange } from "./keys.js";
import { layoutFor } from "./layouts.js";
import { decodeHeader } from "./records.js";

/** Keys of one partition, in key order. */
export async function* partitionKeys(db: StoreDb, partition: number): AsyncGenerator<string> {
  const range = partitionRange(partition);
  let gte = range.gte;
  while (true) {
    // Find the next header record; then jump past the whole object.
    const it = db.keys({ gte, lt: range.lt, limit: 1 });
    const k = (await it.all())[0];
    if (k === undefined) return;
    const parsed = parseObjectKey(k);
    yield parsed.key;
    gte = Buffer.concat([objectPrefix(partition, parsed.key), Buffer.from([0xff])]);
  }
}

/**
 * Keys of one partition that start with prefix, in key order (UTF-8 bytes), strictly after
 * `after` when given. One seek per key: it jumps from header to header.
 */
export async function* partitionKeysWithPrefix(db: StoreDb, partition: number, prefix: string, after?: string): AsyncGenerator<string> {
  const range = partitionRange(partition);
  const escaped = escapeBytes(Buffer.from(prefix, "utf8"));
  // The escaped prefix without its terminator: every key starting with prefix sorts from here.
  const fromPrefix = Buffer.concat([range.gte, escaped.subarray(0, escaped.length - 2)]);
  let gte = fromPrefix;
  if (after !== undefined) {
    const afterObject = Buffer.concat([objectPrefix(partition, after), Buffer.from([0xff])]);
    if (Buffer.compare(afterObject, gte) > 0) gte = afterObject;
  }
  while (true) {
    const k = (await db.keys({ gte, lt: range.lt, limit: 1 }).all())[0];
    if (k === undefined) return;
    const parsed = parseObjectKey(k);
    if (!parsed.key.startsWith(prefix)) return;
    yield parsed.key;
    gte = Buffer.concat([objectPrefix(partition, parsed.key), Buffer.from([0xff])]);
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
