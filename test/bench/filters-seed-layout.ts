// The byte layout seed 001's library serialised its cuckoo filters in, rebuilt from our states so
// Tables 6.1 and 6.2 can be compared layout for layout (filters.bench.ts reports it beside our own
// codec, which is a different, varint bucket-list layout).
//
// What the seed states (seed 001 §3.3.1, §5.3, §6.3.2; shared/notes/seed-001.md sections 4, 8, 9.2):
//  - the c regular slots of every bucket are a fixed-width array: a GCF slot is a `byte` for
//    l <= 8; an ORCF slot is a `long` packing a 16-bit fingerprint, 16-bit replica id and 32-bit
//    timestamp (its table's constant 8.39 MB = 2^20 slots x 8 B confirms the long form was used);
//  - entries beyond c in an overflowing bucket live in "a map from indexes to byte arrays", which
//    "is serialised much less efficiently than the main buckets backed by an array".
// What it does not state, and is assumed here: the serialiser. We take Java's default object
// serialisation (java.io.ObjectOutputStream, protocol version 2), the default for a JVM library,
// of the slot array followed by a java.util.HashMap<Integer, byte[]> (ORCF: <Integer, long[]>)
// holding each overflowing bucket's extra entries. Field order within an ORCF long is not stated:
// fingerprint, replica, timestamp from the high bits down, in the order the text lists them. An
// empty slot is 0. The few dozen bytes of the enclosing object's own class descriptor and the
// ORCF's small version vector are left out.
import type { CuckooParams } from "../../services/crdt/cuckoo-table.js";
import { ByteWriter } from "../../services/crdt/filter-common.js";

const TC_NULL = 0x70;
const TC_REFERENCE = 0x71;
const TC_CLASSDESC = 0x72;
const TC_OBJECT = 0x73;
const TC_ARRAY = 0x75;
const TC_BLOCKDATA = 0x77;
const TC_ENDBLOCKDATA = 0x78;
const BASE_HANDLE = 0x7e0000;
const SC_SERIALIZABLE = 0x02;
const SC_WRITE_METHOD = 0x01;

interface ClassDesc {
  name: string;
  suid: bigint;
  flags: number;
  fields: Array<[string, string]>; // [type code, name]
  superDesc: ClassDesc | null;
}

// serialVersionUIDs of the JDK classes involved (fixed by the JDK's serialised form).
const NUMBER: ClassDesc = { name: "java.lang.Number", suid: -8742448824652078965n, flags: SC_SERIALIZABLE, fields: [], superDesc: null };
const INTEGER: ClassDesc = { name: "java.lang.Integer", suid: 1360826667806852920n, flags: SC_SERIALIZABLE, fields: [["I", "value"]], superDesc: NUMBER };
const BYTE_ARRAY: ClassDesc = { name: "[B", suid: -5984413125824719648n, flags: SC_SERIALIZABLE, fields: [], superDesc: null };
const LONG_ARRAY: ClassDesc = { name: "[J", suid: 8655923659555304851n, flags: SC_SERIALIZABLE, fields: [], superDesc: null };
const HASH_MAP: ClassDesc = {
  name: "java.util.HashMap",
  suid: 362498820763181265n,
  flags: SC_SERIALIZABLE | SC_WRITE_METHOD,
  fields: [
    ["F", "loadFactor"],
    ["I", "threshold"],
  ],
  superDesc: null,
};

/** A minimal java.io.ObjectOutputStream: the records this layout needs, byte for byte. */
export class JavaObjectStream {
  private readonly w = new ByteWriter();
  private nextHandle = BASE_HANDLE;
  private readonly descHandles = new Map<ClassDesc, number>();

  constructor() {
    this.u16(0xaced).u16(5); // STREAM_MAGIC, STREAM_VERSION
  }

  u8(v: number): this {
    this.w.byte(v & 0xff);
    return this;
  }
  u16(v: number): this {
    return this.u8(v >>> 8).u8(v);
  }
  i32(v: number): this {
    return this.u16((v >>> 16) & 0xffff).u16(v & 0xffff);
  }
  i64(v: bigint): this {
    const u = BigInt.asUintN(64, v);
    return this.i32(Number(u >> 32n) >>> 0).i32(Number(u & 0xffffffffn) >>> 0);
  }
  utf(s: string): this {
    const b = new TextEncoder().encode(s);
    return this.u16(b.length).bytes(b);
  }
  bytes(b: Uint8Array): this {
    this.w.bytes(b);
    return this;
  }

  private classDesc(d: ClassDesc | null): void {
    if (d === null) {
      this.u8(TC_NULL);
      return;
    }
    const h = this.descHandles.get(d);
    if (h !== undefined) {
      this.u8(TC_REFERENCE).i32(h);
      return;
    }
    this.u8(TC_CLASSDESC).utf(d.name).i64(d.suid);
    this.descHandles.set(d, this.nextHandle++);
    this.u8(d.flags).u16(d.fields.length);
    for (const [code, name] of d.fields) this.u8(code.charCodeAt(0)).utf(name);
    this.u8(TC_ENDBLOCKDATA); // no class annotation
    this.classDesc(d.superDesc);
  }

  byteArray(data: Uint8Array): this {
    this.u8(TC_ARRAY);
    this.classDesc(BYTE_ARRAY);
    this.nextHandle++;
    return this.i32(data.length).bytes(data);
  }

  longArray(values: readonly bigint[]): this {
    this.u8(TC_ARRAY);
    this.classDesc(LONG_ARRAY);
    this.nextHandle++;
    this.i32(values.length);
    for (const v of values) this.i64(v);
    return this;
  }

  integer(v: number): this {
    this.u8(TC_OBJECT);
    this.classDesc(INTEGER);
    this.nextHandle++;
    return this.i32(v);
  }

  /** A java.util.HashMap written by its own writeObject: fields, then capacity, size and the pairs. */
  hashMap<V>(entries: ReadonlyArray<[number, V]>, writeValue: (v: V) => void): this {
    this.u8(TC_OBJECT);
    this.classDesc(HASH_MAP);
    this.nextHandle++;
    let capacity = 16;
    while (entries.length > capacity * 0.75) capacity *= 2;
    // defaultWriteObject: loadFactor (float 0.75 = 0x3f400000), threshold.
    this.i32(0x3f400000).i32(Math.floor(capacity * 0.75));
    this.u8(TC_BLOCKDATA).u8(8).i32(capacity).i32(entries.length);
    // Integer keys hash to themselves: HashMap iterates them by index modulo its capacity.
    const ordered = [...entries].sort((a, b) => (a[0] & (capacity - 1)) - (b[0] & (capacity - 1)) || a[0] - b[0]);
    for (const [k, v] of ordered) {
      this.integer(k);
      writeValue(v);
    }
    return this.u8(TC_ENDBLOCKDATA);
  }

  finish(): Uint8Array {
    return this.w.finish();
  }
}

/** The seed's layout of a GCF: one byte per slot (l <= 8), overflow in a map index -> byte[]. */
export function gcfSeedLayout(params: CuckooParams, entries: ReadonlyArray<readonly [number, number]>): Uint8Array {
  if (params.fingerprintBits > 8) throw new RangeError("the byte-per-slot layout needs l <= 8");
  const c = params.bucketSize;
  const slots = new Uint8Array(params.buckets * c);
  const fill = new Uint16Array(params.buckets);
  const extra = new Map<number, number[]>();
  for (const [i, f] of entries) {
    const k = fill[i]!++;
    if (k < c) slots[i * c + k] = f;
    else {
      const list = extra.get(i);
      if (list === undefined) extra.set(i, [f]);
      else list.push(f);
    }
  }
  const out = new JavaObjectStream().byteArray(slots);
  out.hashMap([...extra], (fps) => out.byteArray(Uint8Array.from(fps)));
  return out.finish();
}

export interface SeedOrcfEntry {
  bucket: number;
  fp: number;
  /** The replica's number (the seed numbers its replicas; 16 bits in the long form). */
  replica: number;
  t: number;
}

/** fingerprint (16) | replica (16) | timestamp (32), high bits first. */
export function orcfSeedWord(e: SeedOrcfEntry): bigint {
  return (BigInt(e.fp & 0xffff) << 48n) | (BigInt(e.replica & 0xffff) << 32n) | BigInt(e.t >>> 0);
}

/** The seed's layout of an ORCF: one long per slot, overflow in a map index -> long[]. */
export function orcfSeedLayout(params: CuckooParams, entries: readonly SeedOrcfEntry[]): Uint8Array {
  const c = params.bucketSize;
  const words = new BigUint64Array(params.buckets * c);
  const fill = new Uint16Array(params.buckets);
  const extra = new Map<number, bigint[]>();
  for (const e of entries) {
    const k = fill[e.bucket]!++;
    const w = orcfSeedWord(e);
    if (k < c) words[e.bucket * c + k] = w;
    else {
      const list = extra.get(e.bucket);
      if (list === undefined) extra.set(e.bucket, [w]);
      else list.push(w);
    }
  }
  // A long[] is written big-endian, 8 bytes a slot, like the map's long arrays.
  const out = new JavaObjectStream();
  out.longArray(words as unknown as bigint[]);
  out.hashMap([...extra], (ws) => out.longArray(ws));
  return out.finish();
}
