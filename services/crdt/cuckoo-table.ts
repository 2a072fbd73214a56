// The cuckoo hash table shared by GCF and ORCF (seed 001, section 2.2.2 and Algorithm 1).
//
// m buckets (a power of two) of c slots hold l-bit fingerprints. Partial-key cuckoo hashing:
// i1 = h_I(e), f = h_F(e), i2 = alt(i1, f) = i1 XOR (h_A(f) mod m), an involution for a fixed f
// (seed 001, Eqs 2.6-2.9). h_I, h_F and h_A are the element-hash family's hash32 under three
// distinct seeds mixed with the filter's seed.
//
// c is a soft limit: merges may leave a bucket with more than c entries ("overflowing"); a local
// insert never creates one and drains the ones it meets (Algorithm 1). Buckets live in a Map, so a
// delta of one entry costs one bucket, not m. An insert that exhausts its kick quota restores
// every bucket it touched and throws FilterFullError (seed 001: a mutable implementation must roll
// back its partial displacements).
import { hash32 } from "./element-hash.js";
import { FilterFullError, FilterParamError, type Random, randomInt } from "./filter-common.js";

export interface CuckooParams {
  /** m, the number of buckets (a power of two, for the XOR alternate index). */
  readonly buckets: number;
  /** c, slots per bucket. */
  readonly bucketSize: number;
  /** l, fingerprint bits (fingerprints are 0..2^l-1; no value is reserved for "empty"). */
  readonly fingerprintBits: number;
  /** Kicks an insert may make before the filter reports full (500 in seed 001's experiments). */
  readonly maxKicks: number;
  /** Seed of the element-hash family (uint32); replicas must agree on it. */
  readonly seed: number;
}

export const DEFAULT_MAX_KICKS = 500; // seed 001, section 6.1
/** Widest fingerprint a cuckoo entry holds. */
export const MAX_FINGERPRINT_BITS = 32;
export const DEFAULT_BUCKET_SIZE = 4; // seed 001, section 6.1 (GCF_4 / ORCF_4)
/** Highest load a c = 4 table reaches before inserts fail (about 95%, seed 001 section 6.2). */
export const MAX_LOAD = 0.95;

const MAX_BUCKETS = 2 ** 30;
const MAX_BUCKET_SIZE = 64;

export interface CuckooOptions {
  bucketSize?: number;
  maxKicks?: number;
  seed?: number;
}

/** Validated cuckoo parameters given directly. */
export function cuckooParams(buckets: number, fingerprintBits: number, opts: CuckooOptions = {}): CuckooParams {
  const bucketSize = opts.bucketSize ?? DEFAULT_BUCKET_SIZE;
  const maxKicks = opts.maxKicks ?? DEFAULT_MAX_KICKS;
  const seed = opts.seed ?? 0;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > MAX_BUCKETS || (buckets & (buckets - 1)) !== 0) {
    throw new FilterParamError(`cuckoo buckets ${buckets} must be a power of two in 1..2^30`);
  }
  if (!Number.isInteger(bucketSize) || bucketSize < 1 || bucketSize > MAX_BUCKET_SIZE) {
    throw new FilterParamError(`cuckoo bucket size ${bucketSize} not in 1..${MAX_BUCKET_SIZE}`);
  }
  if (!Number.isInteger(fingerprintBits) || fingerprintBits < 1 || fingerprintBits > MAX_FINGERPRINT_BITS) {
    throw new FilterParamError(`cuckoo fingerprint bits ${fingerprintBits} not in 1..${MAX_FINGERPRINT_BITS}`);
  }
  if (!Number.isInteger(maxKicks) || maxKicks < 0 || maxKicks > 1_000_000) {
    throw new FilterParamError(`cuckoo max kicks ${maxKicks} not in 0..1000000`);
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new FilterParamError(`cuckoo seed ${seed} not a uint32`);
  return { buckets, bucketSize, fingerprintBits, maxKicks, seed };
}

/**
 * Parameters for `capacity` elements at false-positive rate `fpr`: fingerprint bits from
 * ε ≈ 2c/2^l (seed 001, Eq 2.10), so l = ceil(log2(2c/ε)) (l = 8 for c = 4, ε = 1/32), and
 * enough buckets to hold capacity at load MAX_LOAD, rounded up to a power of two.
 */
export function cuckooParamsFor(capacity: number, fpr: number, opts: CuckooOptions = {}): CuckooParams {
  if (!(capacity >= 1) || !(fpr > 0 && fpr < 1)) throw new FilterParamError(`cuckoo needs capacity >= 1 and 0 < fpr < 1`);
  const c = opts.bucketSize ?? DEFAULT_BUCKET_SIZE;
  const l = fingerprintBitsFor(fpr, c);
  let m = 1;
  while (m * c * MAX_LOAD < capacity) m *= 2;
  return cuckooParams(m, Math.min(l, MAX_FINGERPRINT_BITS), opts);
}

/** Fingerprint bits a false-positive rate needs with buckets of c slots (may exceed MAX_FINGERPRINT_BITS). */
export function fingerprintBitsFor(fpr: number, bucketSize: number): number {
  return Math.max(1, Math.ceil(Math.log2((2 * bucketSize) / fpr) - 1e-9));
}

/** Slots of the table, m·c. */
export function slotCount(p: CuckooParams): number {
  return p.buckets * p.bucketSize;
}

/** Bytes the table's fingerprints take when every slot holds one (what --max-filter-bytes bounds). */
export function cuckooTableBytes(p: CuckooParams): number {
  return Math.ceil((slotCount(p) * p.fingerprintBits) / 8);
}

const SEED_INDEX = 0x1c0ffee1;
const SEED_FP = 0x2badf00d;
const SEED_ALT = 0x3dec0de5;
const scratch = new Uint8Array(4);

/** The element's first bucket and fingerprint. */
export function cuckooHash(p: CuckooParams, element: Uint8Array): { i1: number; fp: number } {
  const i1 = hash32(element, (p.seed ^ SEED_INDEX) >>> 0) & (p.buckets - 1);
  const fp = hash32(element, (p.seed ^ SEED_FP) >>> 0) >>> (32 - p.fingerprintBits);
  return { i1, fp };
}

/** alt(i, f): the other candidate bucket of fingerprint f in bucket i (an involution). */
export function altIndex(p: CuckooParams, i: number, fp: number): number {
  scratch[0] = fp & 0xff;
  scratch[1] = (fp >>> 8) & 0xff;
  scratch[2] = (fp >>> 16) & 0xff;
  scratch[3] = fp >>> 24;
  return (i ^ hash32(scratch, (p.seed ^ SEED_ALT) >>> 0)) & (p.buckets - 1);
}

/** The orbit of (i, f) under alt: the lower of its two buckets names it (universe equality). */
export function homeBucket(p: CuckooParams, i: number, fp: number): number {
  return Math.min(i, altIndex(p, i, fp));
}

/** Entries in buckets keyed by index; E carries a fingerprint (GCF: the number itself). */
export class CuckooTable<E> {
  constructor(
    readonly params: CuckooParams,
    readonly fpOf: (e: E) => number,
    private readonly map: Map<number, E[]> = new Map(),
    private n = 0,
  ) {}

  /** Entries stored (the cardinality of GCF/ORCF in seed 001, section 3.5). */
  get count(): number {
    return this.n;
  }

  /** Entries beyond c in overflowing buckets. */
  overflowCount(): number {
    let k = 0;
    for (const b of this.map.values()) if (b.length > this.params.bucketSize) k += b.length - this.params.bucketSize;
    return k;
  }

  /** count / (m·c); above 1 only after merges that overflow buckets. */
  loadFactor(): number {
    return this.n / slotCount(this.params);
  }

  /** ε ≈ 1 - (1 - 2^-l)^(2cα) at the current load α (seed 001, Eqs 3.7 and 3.18). */
  estimatedFpr(): number {
    return 1 - (1 - 2 ** -this.params.fingerprintBits) ** (2 * this.params.bucketSize * this.loadFactor());
  }

  bucket(i: number): readonly E[] {
    return this.map.get(i) ?? [];
  }

  /** Non-empty bucket indexes, ascending: a typed array's numeric sort (a comparator costs ~10x). */
  private sortedIndexes(): Uint32Array {
    return Uint32Array.from(this.map.keys()).sort();
  }

  /** How many buckets hold entries. */
  get usedBuckets(): number {
    return this.map.size;
  }

  /**
   * Visit the non-empty buckets in index order, each with its entries in `order` (a copy; slots
   * keep their layout): the canonical order codecs and listings use.
   */
  forEachBucket(order: (a: E, b: E) => number, visit: (i: number, entries: readonly E[]) => void): void {
    const inOrder = (b: E[]) => (b.length > 1 ? sortedView(b, order) : b);
    // Many used buckets: place them by index in one pass over the map (a Map lookup per index
    // costs ~10x a step of the map's own iteration), then walk the indexes.
    if (this.map.size * 8 >= this.params.buckets) {
      const byIndex: Array<E[] | undefined> = new Array(this.params.buckets).fill(undefined);
      for (const [i, b] of this.map) byIndex[i] = b;
      for (let i = 0; i < byIndex.length; i++) {
        const b = byIndex[i];
        if (b !== undefined) visit(i, inOrder(b));
      }
      return;
    }
    for (const i of this.sortedIndexes()) visit(i, inOrder(this.map.get(i)!));
  }

  *entries(): IterableIterator<[number, E]> {
    for (const [i, b] of this.map) for (const e of b) yield [i, e];
  }

  push(i: number, e: E): void {
    const b = this.map.get(i);
    if (b === undefined) this.map.set(i, [e]);
    else b.push(e);
    this.n++;
  }

  /** Remove the entry at a slot of bucket i. */
  removeAt(i: number, slot: number): E {
    const b = this.map.get(i)!;
    const [e] = b.splice(slot, 1);
    if (b.length === 0) this.map.delete(i);
    this.n--;
    return e!;
  }

  clone(): CuckooTable<E> {
    const m = new Map<number, E[]>();
    for (const [i, b] of this.map) m.set(i, b.slice());
    return new CuckooTable(this.params, this.fpOf, m, this.n);
  }

  /**
   * Algorithm 1 (cuckooInsert): put e, whose first bucket is i1, into the table, kicking entries
   * to their alternate buckets as needed, within the kick quota. Returns the bucket e went to.
   * On exhaustion every touched bucket is restored and FilterFullError (naming `kind`) is thrown.
   * With keep = false the table is restored on success too (a dry run, for pure delta mutators).
   */
  insert(kind: string, i1: number, e: E, random: Random, keep = true): number {
    const c = this.params.bucketSize;
    const i2 = altIndex(this.params, i1, this.fpOf(e));
    const n1 = this.bucket(i1).length;
    const n2 = this.bucket(i2).length;
    const i = n1 < c && n2 >= c ? i1 : n2 < c && n1 >= c ? i2 : randomInt(random, 2) === 0 ? i1 : i2;
    const saved = new Map<number, E[] | undefined>();
    const savedCount = this.n;
    const restore = () => {
      for (const [j, b] of saved) {
        if (b === undefined) this.map.delete(j);
        else this.map.set(j, b);
      }
      this.n = savedCount;
    };
    try {
      this.insertImpl(i, e, this.params.maxKicks, random, saved);
    } catch (err) {
      if (!(err instanceof QuotaExhausted)) throw err;
      restore();
      throw new FilterFullError(kind, this.params.maxKicks, slotCount(this.params));
    }
    if (!keep) restore();
    return i;
  }

  // cuckooInsertImpl: returns the remaining quota. One quota is shared by the whole recursion.
  private insertImpl(i: number, e: E, quota: number, random: Random, saved: Map<number, E[] | undefined>): number {
    if (quota < 0) throw new QuotaExhausted();
    const c = this.params.bucketSize;
    if (!saved.has(i)) saved.set(i, this.map.get(i)?.slice());
    const b = this.map.get(i);
    const size = b?.length ?? 0;
    if (size < c) {
      this.push(i, e);
      return quota;
    }
    const slot = randomInt(random, size);
    const victim = b![slot]!;
    if (size === c) {
      // Full: swap e in, re-home the victim.
      b![slot] = e;
      return this.insertImpl(altIndex(this.params, i, this.fpOf(victim)), victim, quota - 1, random, saved);
    }
    // Overflowing: evict the victim without inserting e, re-home it, then retry e here.
    this.removeAt(i, slot);
    const left = this.insertImpl(altIndex(this.params, i, this.fpOf(victim)), victim, quota - 1, random, saved);
    return this.insertImpl(i, e, left, random, saved);
  }
}

class QuotaExhausted extends Error {}

/**
 * A bucket in order: itself when already sorted, else a sorted copy (insertion sort, as buckets
 * hold a few entries: c, or a little more after merges). Callers only read it.
 */
function sortedView<E>(b: E[], order: (a: E, b: E) => number): readonly E[] {
  let sorted = true;
  for (let j = 1; j < b.length && sorted; j++) sorted = order(b[j - 1]!, b[j]!) <= 0;
  if (sorted) return b;
  const out = b.slice();
  for (let j = 1; j < out.length; j++) {
    const x = out[j]!;
    let k = j - 1;
    while (k >= 0 && order(out[k]!, x) > 0) {
      out[k + 1] = out[k]!;
      k--;
    }
    out[k + 1] = x;
  }
  return out;
}
