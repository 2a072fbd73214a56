// Shared pieces of the replicated probabilistic filters (gbf.ts, gcf.ts, orcf.ts,
// scalable-filter.ts): their typed errors, the injected randomness, and a small varint byte
// writer/reader for their versioned binary codecs.
//
// The filters follow seed 001 (conflict-free replicated probabilistic filters, chapter 3). They
// are pure: no clock, no I/O, no Math.random. Cuckoo insertion needs random choices; callers pass
// a Random (Math.random fits; common/prng.ts seededRandom gives a reproducible stream for tests).
import { DecodeError, JoinConflictError } from "./errors.js";
import { writeVarint, varintSize } from "../common/varint.js";
import { ownedCopy } from "./owned-copy.js";

// The injected randomness is the project's one seeded source (common/prng.ts).
export { type Random, randomInt, seededRandom } from "../common/prng.js";

/** Two filters (or a filter and a delta) built with different parameters cannot be joined. */
export class FilterMismatchError extends JoinConflictError {
  override readonly name = "FilterMismatchError";
  constructor(kind: string, a: unknown, b: unknown) {
    super(`cannot join ${kind} filters with different parameters: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
}

/** A cuckoo insert ran out of its kick quota. The filter was left unchanged. */
export class FilterFullError extends Error {
  override readonly name = "FilterFullError";
  /** why: a message of its own, when the cause is not the table running out of room. */
  constructor(kind: string, maxKicks: number, capacitySlots: number, why?: string) {
    super(
      why !== undefined
        ? `${kind} cannot take this element: ${why}`
        : `${kind} is full: no free slot after ${maxKicks} kicks (${capacitySlots} slots); the filter is ` +
            `unchanged. Build it with a larger capacity, or use the scalable variant (Sc${kind}), which adds sub-filters`,
    );
  }
}

/** A parameter outside its allowed range (at construction, not decoding). */
export class FilterParamError extends RangeError {
  override readonly name = "FilterParamError";
}

/** Every field of a and b is identical (parameters are flat records of numbers and booleans). */
export function sameParams<P extends object>(a: P, b: P): boolean {
  const ka = Object.keys(a) as (keyof P)[];
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => a[k] === b[k]);
}

/** Refuse to combine states with different parameters; a parameterless bottom (null) fits all. */
export function checkParams<P extends object>(kind: string, a: P | null, b: P | null): void {
  if (a !== null && b !== null && !sameParams(a, b)) throw new FilterMismatchError(kind, a, b);
}

/** The parameters of a join: either side's (they match, or one is the parameterless bottom). */
export function joinedParams<P extends object>(kind: string, a: P | null, b: P | null): P | null {
  checkParams(kind, a, b);
  return a ?? b;
}

// ------------------------------------------------------------------------------------- codec
// Every encoded filter starts with a common header:
//   byte 0: codec format version (FILTER_FORMAT)
//   byte 1: filter kind (FilterKind)
//   byte 2: hash family (element-hash.ts HASH_FAMILY)
//   byte 3: flags (bit 0: parameters present; the parameterless bottom has none)
// followed by the kind's parameters and body as unsigned varints.

export const FILTER_FORMAT = 1;

export enum FilterKind {
  GBF = 1,
  GCF = 2,
  ORCF = 3,
  SCGBF = 4,
  SCGCF = 5,
  SCORCF = 6,
  /** A key's filters of one type with different parameters (filter-siblings.ts). */
  SIBLINGS = 7,
  /** A key's filters with the retry filter of its Adds' request ids (filter-siblings.ts). */
  WITH_RETRY = 8,
}

/** Growable byte buffer with varint and raw-byte writes. */
export class ByteWriter {
  private buf = new Uint8Array(64);
  private at = 0;

  private reserve(n: number): void {
    if (this.at + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.at + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
  }

  byte(b: number): this {
    this.reserve(1);
    this.buf[this.at++] = b;
    return this;
  }

  varint(n: number): this {
    this.reserve(varintSize(n));
    this.at = writeVarint(this.buf, this.at, n);
    return this;
  }

  bytes(b: Uint8Array): this {
    this.reserve(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
    return this;
  }

  /** A length-prefixed UTF-8 string. */
  string(s: string): this {
    const b = new TextEncoder().encode(s);
    return this.varint(b.length).bytes(b);
  }

  /** A float64, little-endian (false-positive targets). */
  float(x: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, x, true);
    return this.bytes(b);
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.at);
  }
}

/** Reader over an encoded filter; every failure is a DecodeError naming what was being read. */
export class ByteReader {
  private at = 0;
  constructor(private readonly buf: Uint8Array) {}

  get done(): boolean {
    return this.at >= this.buf.length;
  }

  byte(what: string): number {
    if (this.at >= this.buf.length) throw new DecodeError(`${what}: truncated input`);
    return this.buf[this.at++]!;
  }

  varint(what: string, max = Number.MAX_SAFE_INTEGER): number {
    let n = 0;
    let scale = 1;
    for (let i = 0; ; i++) {
      if (i >= 8) throw new DecodeError(`${what}: varint too long`);
      const b = this.byte(what);
      n += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) throw new DecodeError(`${what}: non-minimal varint`);
        break;
      }
      scale *= 128;
    }
    if (n > max) throw new DecodeError(`${what}: ${n} exceeds ${max}`);
    return n;
  }

  /** A copy (input given as a Node Buffer would hand out a view of it: see ownedCopy). */
  bytes(n: number, what: string): Uint8Array {
    if (this.at + n > this.buf.length) throw new DecodeError(`${what}: truncated input`);
    const out = ownedCopy(this.buf.subarray(this.at, this.at + n));
    this.at += n;
    return out;
  }

  string(what: string): string {
    const n = this.varint(what, 1 << 16);
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(this.bytes(n, what));
    } catch (e) {
      if (e instanceof DecodeError) throw e;
      throw new DecodeError(`${what}: invalid UTF-8`);
    }
  }

  float(what: string): number {
    const b = this.bytes(8, what);
    return new DataView(b.buffer, b.byteOffset, 8).getFloat64(0, true);
  }

  end(what: string): void {
    if (!this.done) throw new DecodeError(`${what}: ${this.buf.length - this.at} trailing bytes`);
  }
}

/** Write the common header. */
export function writeHeader(w: ByteWriter, kind: FilterKind, hashFamily: number, hasParams: boolean): void {
  w.byte(FILTER_FORMAT).byte(kind).byte(hashFamily).byte(hasParams ? 1 : 0);
}

/** Read and check the common header; returns whether parameters follow. */
export function readHeader(r: ByteReader, kind: FilterKind, hashFamily: number): boolean {
  const name = FilterKind[kind];
  const format = r.byte("format version");
  if (format !== FILTER_FORMAT) throw new DecodeError(`unsupported filter format version ${format} (expected ${FILTER_FORMAT})`);
  const k = r.byte("filter kind");
  if (k !== kind) throw new DecodeError(`expected a ${name} encoding, got filter kind ${k}`);
  const fam = r.byte("hash family");
  if (fam !== hashFamily) throw new DecodeError(`${name} built with hash family ${fam}; this node has family ${hashFamily}`);
  const flags = r.byte("flags");
  if (flags > 1) throw new DecodeError(`unknown flags ${flags}`);
  return flags === 1;
}

/** Run a decoder, turning stray RangeErrors from checks into DecodeErrors. */
export function decoding<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof DecodeError) throw e;
    if (e instanceof RangeError) throw new DecodeError(`${what}: ${e.message}`);
    throw e;
  }
}
