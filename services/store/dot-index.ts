// The dot index: which element holds a live dot. A remote remove names dots, not elements, so the
// store must find each dot's element with a point read. The live dots of one replica are grouped
// in buckets of DOT_BUCKET consecutive counters, one record per bucket listing the elements of its
// live dots. A local batch of n adds then writes about n / DOT_BUCKET index records instead of n
// (the write path's largest cost after the element records), and a lookup is still one point
// read. A bucket holds live dots only: a dot leaves its bucket when it leaves its element, and an
// empty bucket is deleted, so the index never outgrows the set.

import { varintSize, writeVarint } from "../common/varint.js";

/** Consecutive counters per bucket. Part of the on-disk format (STORE_VERSION). */
export const DOT_BUCKET = 16;

export function bucketOf(counter: number): number {
  return Math.floor(counter / DOT_BUCKET);
}

export function offsetOf(counter: number): number {
  return counter % DOT_BUCKET;
}

/** offset → element bytes of the live dots of one bucket. */
export type Bucket = Map<number, Uint8Array>;

/** Value of a bucket record: per live dot, in offset order, u8 offset, varint length, element bytes. */
export function encodeBucket(bucket: Bucket): Buffer {
  return encodeEntries(bucket, Buffer.alloc(0));
}

/**
 * A bucket record holding the entries of before (a record's bytes, unread) followed by those of
 * added, whose offsets must all be above before's: the record of a bucket that only gained dots
 * newer than any it held (a local add), written without decoding what it held.
 */
export function appendToBucket(before: Uint8Array, added: Bucket): Buffer {
  return encodeEntries(added, before);
}

function encodeEntries(bucket: Bucket, before: Uint8Array): Buffer {
  // Offsets are below DOT_BUCKET: walking them in order spares sorting the keys.
  let size = before.length;
  for (const el of bucket.values()) size += 1 + varintSize(el.length) + el.length;
  const out = Buffer.allocUnsafe(size);
  out.set(before, 0);
  let at = before.length;
  for (let o = 0; o < DOT_BUCKET; o++) {
    const el = bucket.get(o);
    if (el === undefined) continue;
    out[at++] = o;
    at = writeVarint(out, at, el.length);
    out.set(el, at);
    at += el.length;
  }
  return out;
}

export function decodeBucket(b: Uint8Array): Bucket {
  const out: Bucket = new Map();
  let at = 0;
  let last = -1;
  while (at < b.length) {
    const offset = b[at++]!;
    if (offset <= last) throw new Error("malformed dot-index bucket (offsets out of order)");
    last = offset;
    let n = 0;
    let shift = 1;
    for (;;) {
      if (at >= b.length) throw new Error("truncated dot-index bucket");
      const x = b[at++]!;
      if (x === 0 && shift > 1) throw new Error("malformed dot-index bucket (overlong length)");
      n += (x & 0x7f) * shift;
      if (x < 0x80) break;
      shift *= 128;
    }
    if (offset >= DOT_BUCKET || at + n > b.length) throw new Error("malformed dot-index bucket");
    out.set(offset, b.subarray(at, at + n));
    at += n;
  }
  return out;
}
