// Order-preserving binary keys for LevelDB (plain bytewise comparator, no custom comparator).
//
//   meta:      0x00 'F'                                  → store format record (JSON)
//              0x00 'S' u32be(partition)                 → reserved sequence number (u64be)
//   objects:   0x01 u16be(partition) esc(key) SUFFIX ...
//     header   ... 0x01                                  → type + causal context + size
//     element  ... 0x02 esc(element)                     → the element's live dots
//     dots     ... 0x03 esc(replica) u64be(bucket)       → the elements holding that replica's live
//                                                          dots bucket*B .. bucket*B+B-1 (dot-index.ts)
//     state    ... 0x04 0x00                             → base of a logged whole state (records.ts StateLog)
//              ... 0x04 0x01 u64be(seq)                  → a delta joined after the base, in seq order
//   expiry:    0x02 u64be(expiresAt) u16be(partition) esc(key) esc(element)
//                                                        → (empty) an element holds a dot that expires
//                                                          then (ms); expiry.ts sweeps them in time order
//
// esc() makes byte strings order-preserving and self-delimiting: 0x00 becomes 0x00 0xFF and the
// string ends with 0x00 0x01, so a prefix sorts before its extensions and keys of one object are
// contiguous, header first, then elements in byte order, then the dot index.

export const META = 0x00;
export const OBJECTS = 0x01;
export const EXPIRY = 0x02;
export const SUFFIX_HEADER = 0x01;
export const SUFFIX_ELEMENT = 0x02;
export const SUFFIX_DOTS = 0x03;
export const SUFFIX_STATE = 0x04;

export function escapeBytes(b: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(escapedLength(b));
  writeEscaped(out, 0, b);
  return out;
}

/** Bytes esc(b) takes. */
function escapedLength(b: Uint8Array): number {
  let zeros = 0;
  for (let i = 0; i < b.length; i++) if (b[i] === 0) zeros++;
  return b.length + zeros + 2;
}

/** Write esc(b) at offset; returns the offset after it. */
function writeEscaped(out: Buffer, offset: number, b: Uint8Array): number {
  let i = offset;
  for (let j = 0; j < b.length; j++) {
    const x = b[j]!;
    out[i++] = x;
    if (x === 0) out[i++] = 0xff;
  }
  out[i++] = 0x00;
  out[i++] = 0x01;
  return i;
}

/** Decode an escaped string at offset; returns the bytes and the offset after the terminator. */
export function unescapeBytes(buf: Uint8Array, offset: number): { bytes: Buffer; next: number } {
  const parts: number[] = [];
  let i = offset;
  while (i < buf.length) {
    const x = buf[i]!;
    if (x === 0) {
      const y = buf[i + 1];
      if (y === 0x01) return { bytes: Buffer.from(parts), next: i + 2 };
      if (y === 0xff) {
        parts.push(0);
        i += 2;
        continue;
      }
      throw new Error("malformed escaped key");
    }
    parts.push(x);
    i++;
  }
  throw new Error("unterminated escaped key");
}

export function formatKey(): Buffer {
  return Buffer.from([META, 0x46]);
}

export function seqKey(partition: number): Buffer {
  const b = Buffer.alloc(6);
  b[0] = META;
  b[1] = 0x53;
  b.writeUInt32BE(partition, 2);
  return b;
}

export function seqKeyRange(): { gte: Buffer; lt: Buffer } {
  return { gte: Buffer.from([META, 0x53]), lt: Buffer.from([META, 0x54]) };
}

/** 0x01 u16be(partition) */
export function partitionPrefix(partition: number): Buffer {
  const b = Buffer.alloc(3);
  b[0] = OBJECTS;
  b.writeUInt16BE(partition, 1);
  return b;
}

export function partitionRange(partition: number): { gte: Buffer; lt: Buffer } {
  const lt = Buffer.alloc(3);
  if (partition + 1 > 0xffff) {
    lt[0] = OBJECTS + 1;
  } else {
    lt[0] = OBJECTS;
    lt.writeUInt16BE(partition + 1, 1);
  }
  return { gte: partitionPrefix(partition), lt };
}

/** The prefix shared by every record of one object. */
export function objectPrefix(partition: number, key: string): Buffer {
  return Buffer.concat([partitionPrefix(partition), escapeBytes(Buffer.from(key, "utf8"))]);
}

export function headerKey(prefix: Buffer): Buffer {
  return Buffer.concat([prefix, Buffer.from([SUFFIX_HEADER])]);
}

export function elementRecordKey(prefix: Buffer, element: Uint8Array): Buffer {
  // One allocation: this runs for every element of every write.
  const out = Buffer.allocUnsafe(prefix.length + 1 + escapedLength(element));
  prefix.copy(out, 0);
  out[prefix.length] = SUFFIX_ELEMENT;
  writeEscaped(out, prefix.length + 1, element);
  return out;
}

/** Every record of one kind (suffix) of an object. */
function suffixRange(prefix: Buffer, suffix: number): { gte: Buffer; lt: Buffer } {
  return { gte: Buffer.concat([prefix, Buffer.from([suffix])]), lt: Buffer.concat([prefix, Buffer.from([suffix + 1])]) };
}

/** All element records of an object. */
export function elementRange(prefix: Buffer): { gte: Buffer; lt: Buffer } {
  return suffixRange(prefix, SUFFIX_ELEMENT);
}

const replicaBytes = new Map<string, Buffer>();

/** UTF-8 bytes of a replica id. Replica ids are few and long-lived: their bytes are kept. */
export function replicaUtf8(replica: string): Buffer {
  let r = replicaBytes.get(replica);
  if (r === undefined) {
    r = Buffer.from(replica, "utf8");
    if (replicaBytes.size < 10_000) replicaBytes.set(replica, r);
  }
  return r;
}

/** prefix 0x03 esc(replica): the start of every dot-index key of one replica in one object. */
export function dotIndexPrefix(prefix: Buffer, replica: string): Buffer {
  const r = replicaUtf8(replica);
  const out = Buffer.allocUnsafe(prefix.length + 1 + escapedLength(r));
  prefix.copy(out, 0);
  out[prefix.length] = SUFFIX_DOTS;
  writeEscaped(out, prefix.length + 1, r);
  return out;
}

/** The key of one dot-index bucket, after dotIndexPrefix. */
export function dotBucketKey(replicaPrefix: Buffer, bucket: number): Buffer {
  const out = Buffer.allocUnsafe(replicaPrefix.length + 8);
  replicaPrefix.copy(out, 0);
  writeU64(out, replicaPrefix.length, bucket);
  return out;
}

/** A number below 2^53 as u64be (high and low 32-bit words), as dot counters and buckets are keyed. */
export function writeU64(out: Buffer, at: number, n: number): void {
  out.writeUInt32BE(Math.floor(n / 0x1_0000_0000), at);
  out.writeUInt32BE(n >>> 0, at + 4);
}

export function readU64(b: Buffer, at: number): number {
  return b.readUInt32BE(at) * 0x1_0000_0000 + b.readUInt32BE(at + 4);
}

/** The base record of a logged whole state (whole-state-layout.ts). */
export function stateBaseKey(prefix: Buffer): Buffer {
  return Buffer.concat([prefix, Buffer.from([SUFFIX_STATE, 0x00])]);
}

/** The record of the delta at seq in the log of a whole state. */
export function stateDeltaKey(prefix: Buffer, seq: number): Buffer {
  const out = Buffer.alloc(prefix.length + 10);
  prefix.copy(out, 0);
  out[prefix.length] = SUFFIX_STATE;
  out[prefix.length + 1] = 0x01;
  writeU64(out, prefix.length + 2, seq);
  return out;
}

/** Every dot-index bucket of an object. */
export function dotIndexRange(prefix: Buffer): { gte: Buffer; lt: Buffer } {
  return suffixRange(prefix, SUFFIX_DOTS);
}

/** Everything of an object (header, elements, dots). */
export function objectRange(prefix: Buffer): { gte: Buffer; lt: Buffer } {
  return { gte: prefix, lt: Buffer.concat([prefix, Buffer.from([0xff])]) };
}

/** Parse an object record key: partition, key, suffix and the offset of what follows the suffix. */
export function parseObjectKey(k: Uint8Array): { partition: number; key: string; suffix: number; rest: number } {
  if (k[0] !== OBJECTS || k.length < 6) throw new Error("not an object key");
  const partition = (k[1]! << 8) | k[2]!;
  const { bytes, next } = unescapeBytes(k, 3);
  return { partition, key: bytes.toString("utf8"), suffix: k[next]!, rest: next + 1 };
}

/** The expiry-index key of an element of the object at prefix holding a dot that expires at expiresAt. */
export function expiryKey(expiresAt: number, prefix: Buffer, element: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(9 + prefix.length - 1 + escapedLength(element));
  out[0] = EXPIRY;
  writeU64(out, 1, expiresAt);
  prefix.copy(out, 9, 1);
  writeEscaped(out, 9 + prefix.length - 1, element);
  return out;
}

/** Every expiry-index key of a time at or before upTo. */
export function expiryRange(upTo: number): { gte: Buffer; lt: Buffer } {
  const lt = Buffer.alloc(9);
  lt[0] = EXPIRY;
  writeU64(lt, 1, upTo + 1);
  return { gte: Buffer.from([EXPIRY]), lt };
}

/** Parse an expiry-index key: the time, the object's key and partition, and the element. */
export function parseExpiryKey(k: Buffer): { expiresAt: number; partition: number; key: string; element: Buffer } {
  if (k[0] !== EXPIRY || k.length < 12) throw new Error("not an expiry key");
  const expiresAt = readU64(k, 1);
  const partition = k.readUInt16BE(9);
  const key = unescapeBytes(k, 11);
  const element = unescapeBytes(k, key.next);
  return { expiresAt, partition, key: key.bytes.toString("utf8"), element: element.bytes };
}
