// Age-Partitioned Bloom Filter (APBF; Shtul, Baquero, Almeida 2020; seed 000 §3.8, digest 4.4):
// a sliding-window Bloom filter that remembers roughly the last `capacity` insertions and forgets
// older ones a generation at a time. Unions live in apbf-union.ts, the codec in apbf-codec.ts.
//
// Layout. k + l slices of m bits in a circular buffer of physical slots 0..n-1 (n = k+l). Logical
// slice i is physical slot (base + i) mod n; logical 0..k-1 are the active slices, the rest are
// older generations kept for queries. Every physical slot has a hash index that names the hash
// function of its bits, so that an element stays findable while its slices age and so that a
// union can match slices by hash (digest 5.3):
//   - Whole Filter: hash index = physical slot, all k+l distinct (the whole filter is merged);
//   - Active Slices / Current Generation: logical i has hash (h0 + i) mod k, where h0 is the hash
//     of logical 0; a shift gives the new logical 0 the hash h0 - 1 (mod k), so the k active
//     slices always carry the k distinct hashes (digest 5.3 [ref-code]).
// Current Generation also keeps k shadow slices: the bits set since the last shift, per active
// slice (shadow i belongs to logical slice i; shifts clear them).
//
// Generations (the rule chosen, recorded here as the digest asks in 5.3): an insertion counts
// towards the current generation and the filter shifts once `count` reaches g = ⌊m·ln2/k⌋ (seed
// Eq. 3), so that k generations fill a slice to about 1/2 and the window is l·g >= capacity.
// Unions can set many bits at once; for them apbf-union.ts applies a fill check with the same
// budget expressed in insertions (a slice at logical i may hold fewer than (i+1)·g).
//
// Pure and deterministic: no clock, no randomness; hashing is element-hash.ts's seeded hash32.
import { JoinConflictError } from "./errors.js";
import { HASH_FAMILY, hash32 } from "./element-hash.js";
import { runProbability } from "./apbf-fp.js";
import {
  type ApbfParams,
  UnionStrategy,
  apbfByteSize,
  checkParams,
  generationSize,
  paramsFor,
  sameParams,
} from "./apbf-params.js";

/** Set bits of each byte value. */
const POPCOUNT = new Uint8Array(256);
for (let i = 1; i < 256; i++) POPCOUNT[i] = (i & 1) + POPCOUNT[i >> 1]!;

/**
 * The hash32 seed of hash index h. Each slice gets its own seeded hash rather than one double-
 * hashed pair: with double hashing every position depends only on (h1 mod m, h2 mod m), about
 * m²/2 ≈ 350 000 patterns for m = 832, so a probe would match some inserted element on all slices
 * with probability ≈ 4096/350 000 ≈ 1 %, as large as the target FP rate itself.
 */
function hashSeed(h: number): number {
  return (Math.imul(h + 1, 0x9e3779b1) ^ 0x41504246) >>> 0;
}

export class Apbf {
  readonly params: ApbfParams;
  readonly k: number;
  readonly l: number;
  readonly m: number;
  /** k + l, the number of (physical) slices. */
  readonly n: number;
  /** Insertions per generation. */
  readonly g: number;
  readonly strategy: UnionStrategy;
  /** The hash family the bits were computed with (element-hash.ts HASH_FAMILY). */
  readonly hashFamily: number;
  /** Bytes per slice. */
  readonly sliceBytes: number;
  /** The slices, physical slot p at bytes [p·sliceBytes, (p+1)·sliceBytes), bit j at byte j>>3, mask 1<<(j&7). */
  readonly bits: Uint8Array;
  /** Current Generation only: shadow of logical active slice i at [i·sliceBytes, …); empty otherwise. */
  readonly shadows: Uint8Array;
  /** Hash index of each physical slot. */
  readonly hashIndex: Uint8Array;
  /** Physical slot of logical slice 0. Mutated by shifts and unions only. */
  base: number;
  /** Insertions counted towards the current generation, 0 <= count < g. */
  count: number;
  /** Scratch cache of computed bit positions per hash index during one query (-1 = not yet). */
  private readonly positions: Int32Array;

  protected constructor(params: ApbfParams, hashFamily: number) {
    this.params = checkParams(params);
    this.k = params.k;
    this.l = params.l;
    this.m = params.m;
    this.n = params.k + params.l;
    this.g = generationSize(params);
    this.strategy = params.strategy;
    this.hashFamily = hashFamily;
    this.sliceBytes = params.m / 8;
    this.bits = new Uint8Array(this.n * this.sliceBytes);
    this.shadows = new Uint8Array(params.strategy === UnionStrategy.CurrentGeneration ? this.k * this.sliceBytes : 0);
    this.hashIndex = new Uint8Array(this.n);
    for (let p = 0; p < this.n; p++) this.hashIndex[p] = this.wholeFilter ? p : p % this.k;
    this.base = 0;
    this.count = 0;
    this.positions = new Int32Array(this.wholeFilter ? this.n : this.k);
  }

  /** An empty filter from (k, l, m) and a strategy. */
  static create(params: ApbfParams): Apbf {
    return new Apbf({ k: params.k, l: params.l, m: params.m, strategy: params.strategy }, HASH_FAMILY);
  }

  /** An empty filter from the seed's (error, capacity, level): FP 10^-error, window >= capacity. */
  static fromConfig(error: number, capacity: number, level: number, strategy: UnionStrategy): Apbf {
    return Apbf.create(paramsFor(error, capacity, level, strategy));
  }

  /** For the codec: an empty filter of a (checked) hash family, to be filled in by the caller. */
  static blank(params: ApbfParams, hashFamily: number): Apbf {
    return new Apbf(params, hashFamily);
  }

  clone(): Apbf {
    const c = new Apbf(this.params, this.hashFamily);
    c.copyFrom(this);
    return c;
  }

  /** Become a copy of other (same shape; used by unions into an empty filter). */
  copyFrom(other: Apbf): void {
    this.bits.set(other.bits);
    this.shadows.set(other.shadows);
    this.hashIndex.set(other.hashIndex);
    this.base = other.base;
    this.count = other.count;
  }

  private get wholeFilter(): boolean {
    return this.strategy === UnionStrategy.WholeFilter;
  }

  /** Physical slot of logical slice i. */
  slot(i: number): number {
    return (this.base + i) % this.n;
  }

  /** Bit position of an item in slices of hash index h. */
  position(item: Uint8Array, h: number): number {
    return hash32(item, hashSeed(h)) % this.m;
  }

  private testBit(slot: number, pos: number): boolean {
    return (this.bits[slot * this.sliceBytes + (pos >>> 3)]! & (1 << (pos & 7))) !== 0;
  }

  /** Insert into the k active slices (and their shadows); shifts when the generation is full. */
  insert(item: Uint8Array): void {
    for (let i = 0; i < this.k; i++) {
      const slot = this.slot(i);
      const pos = this.position(item, this.hashIndex[slot]!);
      const mask = 1 << (pos & 7);
      this.bits[slot * this.sliceBytes + (pos >>> 3)]! |= mask;
      if (this.shadows.length > 0) this.shadows[i * this.sliceBytes + (pos >>> 3)]! |= mask;
    }
    this.count++;
    if (this.count >= this.g) this.shift(1);
  }

  /**
   * Is there a window of k consecutive logical slices whose bits for item are all set?
   *
   * Fast scan (own formulation of the seed's skip query): try the window starting at `start`,
   * testing its slices from the last one backwards. A miss at slice p rules out every window that
   * contains p, so the next candidate starts at p+1; the slices between p+1 and the old window's
   * end are already known to hit and are not tested again. Each slice is tested at most once.
   */
  query(item: Uint8Array): boolean {
    return this.scan(item, undefined);
  }

  /**
   * query for many items while this filter does not change (the walks of a join): a slice with no
   * bit set misses whatever the item, so it is not hashed. A delta's filter has bits in its k
   * active slices at most, so most items cost one hash instead of one per window tried.
   */
  querier(): (item: Uint8Array) => boolean {
    const empty = new Uint8Array(this.n);
    for (let slot = 0; slot < this.n; slot++) {
      let any = 0;
      const from = slot * this.sliceBytes;
      for (let b = from; b < from + this.sliceBytes && any === 0; b++) any = this.bits[b]!;
      empty[slot] = any === 0 ? 1 : 0;
    }
    return (item) => this.scan(item, empty);
  }

  private scan(item: Uint8Array, empty: Uint8Array | undefined): boolean {
    const { k, n } = this;
    this.positions.fill(-1);
    let start = 0;
    let knownEnd = -1; // slices start..knownEnd are known to hit
    while (start + k <= n) {
      let p = start + k - 1;
      while (p > knownEnd && this.hitsAt(item, p, empty)) p--;
      if (p <= knownEnd) return true;
      knownEnd = start + k - 1;
      start = p + 1;
    }
    return false;
  }

  private hitsAt(item: Uint8Array, logical: number, empty: Uint8Array | undefined): boolean {
    const slot = this.slot(logical);
    if (empty !== undefined && empty[slot] === 1) return false;
    const h = this.hashIndex[slot]!;
    let pos = this.positions[h]!;
    if (pos < 0) {
      pos = this.position(item, h);
      this.positions[h] = pos;
    }
    return this.testBit(slot, pos);
  }

  /**
   * Shift `times` generations: each shift turns the oldest slice into an empty logical slice 0
   * (forgetting the oldest generation) and starts a new current generation.
   */
  shift(times = 1): void {
    if (!Number.isInteger(times) || times < 0) throw new RangeError(`shift count must be a non-negative integer, got ${times}`);
    for (let t = 0; t < times; t++) {
      const old = this.base;
      this.base = (old - 1 + this.n) % this.n;
      this.bits.fill(0, this.base * this.sliceBytes, (this.base + 1) * this.sliceBytes);
      if (!this.wholeFilter) this.hashIndex[this.base] = (this.hashIndex[old]! - 1 + this.k) % this.k;
    }
    if (times > 0) {
      this.shadows.fill(0);
      this.count = 0;
    }
  }

  /** Set bits of logical slice i. */
  setBits(i: number): number {
    return popcount(this.bits, this.slot(i) * this.sliceBytes, this.sliceBytes);
  }

  /** The oldest logical slice with a bit set (-1: none), so how many generations the bits span. */
  lastSetSlice(): number {
    for (let i = this.n - 1; i >= 0; i--) if (this.setBits(i) > 0) return i;
    return -1;
  }

  /** Fill ratio of every slice, in logical order (newest first). */
  fillRatios(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.n; i++) out.push(this.setBits(i) / this.m);
    return out;
  }

  /** Estimated FP probability from the current fill ratios (run-length model, apbf-fp.ts). */
  estimatedFp(): number {
    return runProbability(this.fillRatios(), this.k);
  }

  /** Bytes of the bit arrays as the seed counts them (apbf-params.ts apbfByteSize). */
  byteSize(): number {
    return apbfByteSize(this.params);
  }

  /** No bit set anywhere (a filter that never saw an element, or forgot them all). */
  isEmpty(): boolean {
    for (let i = 0; i < this.bits.length; i++) if (this.bits[i] !== 0) return false;
    return true;
  }

  /** Same shape and same state (bits, shadows, base, hash indices, generation count). */
  equals(o: Apbf): boolean {
    return (
      sameParams(this.params, o.params) &&
      this.hashFamily === o.hashFamily &&
      this.base === o.base &&
      this.count === o.count &&
      bytesEqual(this.hashIndex, o.hashIndex) &&
      bytesEqual(this.bits, o.bits) &&
      bytesEqual(this.shadows, o.shadows)
    );
  }
}

/** A union (or a join carrying a union) of filters whose shapes or hash families differ. */
export class ApbfMismatchError extends JoinConflictError {
  override readonly name = "ApbfMismatchError";
  constructor(readonly field: string, readonly local: number, readonly remote: number) {
    super(`cannot union APBFs with different ${field}: local ${local}, remote ${remote}`);
  }
}

/** Throw ApbfMismatchError unless the two filters have the same k, l, m, strategy and hash family. */
export function checkCompatible(local: Apbf, remote: Apbf): void {
  const fields = [
    ["k", local.k, remote.k],
    ["l", local.l, remote.l],
    ["m", local.m, remote.m],
    ["union strategy", local.strategy, remote.strategy],
    ["hash family", local.hashFamily, remote.hashFamily],
  ] as const;
  for (const [field, a, b] of fields) if (a !== b) throw new ApbfMismatchError(field, a, b);
}

export function popcount(bytes: Uint8Array, from: number, length: number): number {
  let c = 0;
  for (let i = from; i < from + length; i++) c += POPCOUNT[bytes[i]!]!;
  return c;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export { UnionStrategy, type ApbfParams } from "./apbf-params.js";
