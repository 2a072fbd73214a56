// GBF: the grow-only Bloom filter of seed 001 (section 3.2, Spec 2), a G-Set of bit indexes.
//
// State: the set of set bits of an m-bit Bloom filter with k hashes. add sets the element's k bits,
// contains checks them, join is union (bitwise OR), the order is inclusion. Its false-positive rate
// is a plain Bloom filter's with n = all adds that happened-before the query (seed 001, Eq 3.1).
//
// Parameters travel with the state (m, k, hash seed; the codec adds the hash family). The lattice
// bottom is the parameterless empty filter: it joins with any parameters and adopts them, so that
// Lattice.bottom() needs no arguments. Two states with different parameters never join
// (FilterMismatchError). Bits are held sparse (a Set) while few and dense (a byte array) beyond
// m/256, so a one-element delta of a large filter costs k numbers, not m/8 bytes.
import { CausalContext } from "./causal-context.js";
import { HASH_FAMILY, bloomIndexes } from "./element-hash.js";
import {
  ByteReader,
  ByteWriter,
  FilterKind,
  FilterParamError,
  checkParams,
  decoding,
  joinedParams,
  readHeader,
  sameParams,
  writeHeader,
} from "./filter-common.js";
import { DecodeError, checkFilterBytes } from "./errors.js";
import { type Lattice, ObjectType, joinIntoCopy } from "./lattice.js";
import { varintSize } from "../common/varint.js";

export interface GbfParams {
  /** m, the number of bits. */
  readonly bits: number;
  /** k, the number of hash functions (bits set per element). */
  readonly hashes: number;
  /** Seed of the element-hash family (uint32); replicas must agree on it. */
  readonly seed: number;
}

const MAX_BITS = 2 ** 32;
export const MAX_HASHES = 64;

/** Validated GBF parameters given directly. */
export function gbfParams(bits: number, hashes: number, seed = 0): GbfParams {
  if (!Number.isInteger(bits) || bits < 1 || bits > MAX_BITS) throw new FilterParamError(`GBF bits ${bits} not in 1..2^32`);
  if (!Number.isInteger(hashes) || hashes < 1 || hashes > MAX_HASHES) {
    throw new FilterParamError(`GBF hashes ${hashes} not in 1..${MAX_HASHES}`);
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new FilterParamError(`GBF seed ${seed} not a uint32`);
  return { bits, hashes, seed };
}

/** Bytes of a GBF's bit array: its dense size, and what --max-filter-bytes bounds. */
export function gbfBytes(p: GbfParams): number {
  return Math.ceil(p.bits / 8);
}

/** Hash functions the optimum gives for a false-positive rate (may exceed MAX_HASHES). */
export function gbfHashesFor(fpr: number): number {
  return Math.max(1, Math.round(-Math.log(fpr) / Math.LN2));
}

/**
 * Parameters for `capacity` elements at false-positive rate `fpr`, by the optimum of seed 001
 * Eqs 2.3-2.4: m = -n ln ε / (ln 2)^2, k = -ln ε / ln 2 (rounded; k = 5 for ε = 1/32).
 */
export function gbfParamsFor(capacity: number, fpr: number, seed = 0): GbfParams {
  if (!(capacity >= 1) || !(fpr > 0 && fpr < 1)) throw new FilterParamError(`GBF needs capacity >= 1 and 0 < fpr < 1`);
  const k = gbfHashesFor(fpr);
  // With k rounded, size m for the target: ε = (1 - e^{-kn/m})^k  =>  m = -kn / ln(1 - ε^{1/k}).
  const m = Math.ceil((-k * capacity) / Math.log(1 - fpr ** (1 / k)));
  // Refused rather than capped: a capped filter would answer at a far higher rate than asked.
  if (m > MAX_BITS) throw new FilterParamError(`a GBF of capacity ${capacity} at false-positive rate ${fpr} needs ${m} bits, above the 2^32 a GBF can have: use a scalable filter or a higher rate`);
  return gbfParams(m, Math.min(k, MAX_HASHES), seed);
}

/**
 * A sparse bit costs a Set entry, some 20 bytes where the dense array spends one bit: past m/256
 * set bits the sparse form would already take more than the dense one, so it turns dense there.
 */
const SPARSE_BITS_PER_BIT = 256;

/** The bit set: sparse while small, dense once above m/256 bits (never converted back). */
class Bits {
  constructor(
    public sparse: Set<number> | null,
    public dense: Uint8Array | null,
    public count: number,
  ) {}

  static empty(): Bits {
    return new Bits(new Set(), null, 0);
  }

  has(i: number): boolean {
    return this.dense !== null ? (this.dense[i >>> 3]! & (1 << (i & 7))) !== 0 : this.sparse!.has(i);
  }

  /** Set bit i; true if it was clear. */
  set(i: number, m: number): boolean {
    if (this.has(i)) return false;
    if (this.dense !== null) this.dense[i >>> 3]! |= 1 << (i & 7);
    else {
      this.sparse!.add(i);
      if (this.sparse!.size * SPARSE_BITS_PER_BIT > m) this.densify(m);
    }
    this.count++;
    return true;
  }

  private densify(m: number): void {
    const d = new Uint8Array(Math.ceil(m / 8));
    for (const i of this.sparse!) d[i >>> 3]! |= 1 << (i & 7);
    this.dense = d;
    this.sparse = null;
  }

  /** The set bits, ascending. */
  indexes(): number[] {
    if (this.sparse !== null) return [...this.sparse].sort((a, b) => a - b);
    const out: number[] = [];
    const d = this.dense!;
    for (let byte = 0; byte < d.length; byte++) {
      const v = d[byte]!;
      if (v === 0) continue;
      for (let bit = 0; bit < 8; bit++) if ((v & (1 << bit)) !== 0) out.push(byte * 8 + bit);
    }
    return out;
  }

  clone(): Bits {
    return new Bits(this.sparse && new Set(this.sparse), this.dense && this.dense.slice(), this.count);
  }

  /** A set held as the given bytes (bit i at byte i>>3, bit i&7), which it takes over. */
  static fromDense(d: Uint8Array): Bits {
    let count = 0;
    for (let i = 0; i < d.length; i++) count += POPCOUNT[d[i]!]!;
    return new Bits(null, d, count);
  }

  /** The set as ceil(m/8) bytes: the dense array itself when dense (do not change it). */
  denseBytes(m: number): Uint8Array {
    if (this.dense !== null) return this.dense;
    const d = new Uint8Array(Math.ceil(m / 8));
    for (const i of this.sparse!) d[i >>> 3]! |= 1 << (i & 7);
    return d;
  }
}

const POPCOUNT = Uint8Array.from({ length: 256 }, (_, v) => {
  let n = 0;
  for (let b = v; b !== 0; b &= b - 1) n++;
  return n;
});

export class Gbf {
  private constructor(
    private p: GbfParams | null,
    private readonly bitset: Bits,
  ) {}

  /** m, k and seed; null only for the parameterless bottom (which has no bits). */
  get params(): GbfParams | null {
    return this.p;
  }

  /** The lattice bottom: empty and parameterless. */
  static bottom(): Gbf {
    return new Gbf(null, Bits.empty());
  }

  static empty(params: GbfParams): Gbf {
    return new Gbf(params, Bits.empty());
  }

  /** A filter with exactly these bits set (decoding, decomposition, tests). */
  static fromIndexes(params: GbfParams, indexes: Iterable<number>): Gbf {
    const g = Gbf.empty(params);
    for (const i of indexes) {
      if (!Number.isInteger(i) || i < 0 || i >= params.bits) throw new RangeError(`bit ${i} outside 0..${params.bits - 1}`);
      g.bitset.set(i, params.bits);
    }
    return g;
  }

  clone(): Gbf {
    return new Gbf(this.p, this.bitset.clone());
  }

  /** A filter whose bits are these bytes (the dense codec form; the filter takes them over). */
  static fromDense(params: GbfParams, bytes: Uint8Array): Gbf {
    if (bytes.length !== gbfBytes(params)) throw new RangeError(`${bytes.length} bytes for ${params.bits} bits`);
    return new Gbf(params, Bits.fromDense(bytes));
  }

  /** The bits as ceil(m/8) bytes (the dense codec form); read only. */
  denseBytes(): Uint8Array {
    return this.bitset.denseBytes(this.requireParams("denseBytes").bits);
  }

  /** The element's k bit positions. */
  indexesOf(element: Uint8Array): number[] {
    const p = this.requireParams("indexesOf");
    return bloomIndexes(element, p.hashes, p.bits, p.seed);
  }

  contains(element: Uint8Array): boolean {
    if (this.params === null) return false;
    return this.indexesOf(element).every((i) => this.bitset.has(i));
  }

  /** add^δ (pure): the element's bits that are not yet set (bottom-with-params if none). */
  addDelta(element: Uint8Array): Gbf {
    const p = this.requireParams("add");
    return Gbf.fromIndexes(p, this.indexesOf(element).filter((i) => !this.bitset.has(i)));
  }

  /** The full add mutator (pure): a new filter with the element's bits set. */
  add(element: Uint8Array): Gbf {
    const out = this.clone();
    out.addInPlace(element);
    return out;
  }

  /** add in place (the mutable variant); returns the delta. */
  addInPlace(element: Uint8Array): Gbf {
    const p = this.requireParams("add");
    const fresh = this.indexesOf(element).filter((i) => this.bitset.set(i, p.bits));
    return Gbf.fromIndexes(p, fresh);
  }

  /** Number of set bits, |S|. */
  get setBits(): number {
    return this.bitset.count;
  }

  hasBit(i: number): boolean {
    return this.bitset.has(i);
  }

  /** The set bits, ascending. */
  bitIndexes(): number[] {
    return this.bitset.indexes();
  }

  /** Estimated number of distinct elements added, n ≈ -(m/k) ln(1 - |S|/m) (seed 001, Eq 3.20). */
  cardinality(): number {
    if (this.params === null) return 0;
    const { bits: m, hashes: k } = this.params;
    if (this.bitset.count >= m) return Infinity;
    return (-m / k) * Math.log(1 - this.bitset.count / m);
  }

  /** The false-positive rate of the current state: (|S|/m)^k (the exact chance k bits are all set). */
  estimatedFpr(): number {
    if (this.params === null) return 0;
    return (this.bitset.count / this.params.bits) ** this.params.hashes;
  }

  /** Join other into this filter; true if a bit was set. */
  joinInPlace(other: Gbf): boolean {
    const params = joinedParams("GBF", this.params, other.params);
    this.p = params;
    let changed = false;
    for (const i of other.bitset.indexes()) if (this.bitset.set(i, params!.bits)) changed = true;
    return changed;
  }

  /** Same set of bits (an empty filter equals the parameterless bottom). */
  equals(other: Gbf): boolean {
    if (this.bitset.count !== other.bitset.count) return false;
    if (this.bitset.count === 0) return true;
    if (!sameParams(this.params!, other.params!)) return false;
    return this.bitset.indexes().every((i) => other.bitset.has(i));
  }

  /** S ⊆ S' (throws FilterMismatchError on different parameters). */
  leq(other: Gbf): boolean {
    checkParams("GBF", this.params, other.params);
    if (this.bitset.count > other.bitset.count) return false;
    return this.bitset.indexes().every((i) => other.bitset.has(i));
  }

  private requireParams(op: string): GbfParams {
    if (this.params === null) throw new FilterParamError(`GBF ${op}: the parameterless bottom has no size; start from Gbf.empty(params)`);
    return this.params;
  }
}

// ------------------------------------------------------------------------------------- codec
// After the common header (filter-common.ts): bits, hashes, seed; then the body, form 0 (sparse:
// count, then ascending indexes as gaps) or form 1 (dense: ceil(m/8) bytes, bit i at byte i>>3,
// bit i&7). The encoder picks the shorter form (sparse on a tie), so encodings are canonical.

function sparseBodySize(indexes: number[]): number {
  let n = varintSize(indexes.length);
  let prev = -1;
  for (const i of indexes) {
    n += varintSize(i - prev - 1);
    prev = i;
  }
  return n;
}

export function encodeGbf(s: Gbf): Uint8Array {
  const w = new ByteWriter();
  writeHeader(w, FilterKind.GBF, HASH_FAMILY, s.params !== null);
  if (s.params === null) return w.finish();
  const p = s.params;
  w.varint(p.bits).varint(p.hashes).varint(p.seed);
  const denseSize = gbfBytes(p);
  // A sparse body takes at least a byte per set bit: past the dense size it cannot be the shorter,
  // and listing millions of set bits only to find that out is what made large filters slow.
  const count = s.setBits;
  const idx = count + varintSize(count) > denseSize ? undefined : s.bitIndexes();
  if (idx !== undefined && sparseBodySize(idx) <= denseSize) {
    w.byte(0).varint(idx.length);
    let prev = -1;
    for (const i of idx) {
      w.varint(i - prev - 1);
      prev = i;
    }
  } else {
    w.byte(1).bytes(s.denseBytes());
  }
  return w.finish();
}

export function decodeGbf(bytes: Uint8Array, maxFilterBytes?: number): Gbf {
  return decoding("GBF", () => {
    const r = new ByteReader(bytes);
    if (!readHeader(r, FilterKind.GBF, HASH_FAMILY)) {
      r.end("GBF bottom");
      return Gbf.bottom();
    }
    const p = gbfParams(r.varint("bits", MAX_BITS), r.varint("hashes", MAX_HASHES), r.varint("seed", 0xffffffff));
    checkFilterBytes("a GBF", gbfBytes(p), maxFilterBytes);
    const form = r.byte("body form");
    if (form === 1) {
      const d = r.bytes(gbfBytes(p), "dense bits");
      const spare = d.length * 8 - p.bits;
      if (spare > 0 && d[d.length - 1]! >>> (8 - spare) !== 0) {
        throw new DecodeError(`GBF padding bit set beyond m = ${p.bits}`);
      }
      r.end("GBF");
      return Gbf.fromDense(p, d); // r.bytes hands out a copy this state owns
    }
    const idx: number[] = [];
    if (form === 0) {
      const n = r.varint("bit count", p.bits);
      let prev = -1;
      for (let j = 0; j < n; j++) {
        prev += r.varint("bit gap") + 1;
        if (prev >= p.bits) throw new DecodeError(`GBF bit ${prev} outside 0..${p.bits - 1}`);
        idx.push(prev);
      }
    } else throw new DecodeError(`GBF unknown body form ${form}`);
    r.end("GBF");
    return Gbf.fromIndexes(p, idx);
  });
}

// ----------------------------------------------------------------------------------- lattice

/**
 * GBF as a Lattice (ObjectType.GBF). Not registered here (registration is wired elsewhere).
 * context() is empty: a Bloom filter records no events, only bits, so it has no causal context.
 */
export const GbfLattice: Lattice<Gbf> = {
  type: ObjectType.GBF,
  name: "GBF",
  bottom: () => Gbf.bottom(),
  isBottom: (s) => s.setBits === 0,
  clone: (s) => s.clone(),
  join: joinIntoCopy((s) => s.clone(), (t, o) => t.joinInPlace(o)),
  joinInPlace: (t, o) => t.joinInPlace(o),
  leq: (a, b) => a.leq(b),
  equals: (a, b) => a.equals(b),
  // The irreducibles are the single bits.
  decompose: (s) => s.bitIndexes().map((i) => Gbf.fromIndexes(s.params!, [i])),
  difference(a, b) {
    const params = joinedParams("GBF", a.params, b.params);
    if (params === null) return Gbf.bottom();
    return Gbf.fromIndexes(params, a.bitIndexes().filter((i) => !b.hasBit(i)));
  },
  context: () => new CausalContext(),
  encode: encodeGbf,
  encodedSize: (s) => encodeGbf(s).length,
  decode: (bytes, _now, bound) => decodeGbf(bytes, bound?.maxFilterBytes),
  size: (s) => s.setBits,
};
