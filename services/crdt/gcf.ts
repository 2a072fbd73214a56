// GCF: the grow-only cuckoo filter of seed 001 (section 3.3, Spec 3, Algorithm 1).
//
// State: a set S of (bucket, fingerprint) pairs in a cuckoo table. Its meaning is the universe
// U(S) = S ∪ D(S), D(S) = {(alt(i,f), f) | (i,f) ∈ S}: an entry may sit in either candidate bucket.
// The order is U(S) ⊆ U(S'); the join keeps all of S and adds the entries of S' whose pair is not
// already in U(S), S ⊔ S' = S ∪ (S' \ D(S)) (Eqs 3.2-3.6), so a merge never duplicates an element
// that the two sides placed in different buckets. Merges may overflow buckets (c is a soft limit);
// local inserts never do (cuckoo-table.ts). Equality is by universe, not layout: join keeps the
// left side's placement, so a ⊔ b and b ⊔ a are equal but may be laid out differently.
//
// Invariant ("reduced"): no pair appears twice and no pair's dual is also present (except a
// self-alternate pair, alt(i,f) = i). add checks contains first, join drops duals, kicks move entries
// without copying them, so every state built here is reduced; decode enforces it.
//
// Parameters travel with the state; the lattice bottom is the parameterless empty filter, which
// joins with any parameters. States with different parameters never join (FilterMismatchError).
import { CausalContext } from "./causal-context.js";
import { HASH_FAMILY } from "./element-hash.js";
import { DecodeError, checkFilterBytes } from "./errors.js";
import {
  ByteReader,
  ByteWriter,
  FilterKind,
  FilterParamError,
  type Random,
  checkParams,
  decoding,
  joinedParams,
  readHeader,
  writeHeader,
} from "./filter-common.js";
import { type CuckooParams, CuckooTable, altIndex, cuckooHash, cuckooParams, cuckooTableBytes, slotCount } from "./cuckoo-table.js";
import { type Lattice, ObjectType, joinIntoCopy } from "./lattice.js";

export type { CuckooParams };

const fpOf = (f: number) => f;
const ascending = (a: number, b: number) => a - b;

export class Gcf {
  private constructor(private t: CuckooTable<number> | null) {}

  /** The lattice bottom: empty and parameterless. */
  static bottom(): Gcf {
    return new Gcf(null);
  }

  static empty(params: CuckooParams): Gcf {
    return new Gcf(new CuckooTable(params, fpOf));
  }

  /**
   * A filter holding exactly these (bucket, fingerprint) pairs, in this layout. Throws RangeError
   * on an out-of-range pair, a repeated pair or a pair together with its dual (not reduced).
   */
  static fromEntries(params: CuckooParams, entries: Iterable<readonly [number, number]>): Gcf {
    const g = Gcf.empty(params);
    for (const [i, f] of entries) {
      if (!Number.isInteger(i) || i < 0 || i >= params.buckets) throw new RangeError(`bucket ${i} outside 0..${params.buckets - 1}`);
      if (!Number.isInteger(f) || f < 0 || f >= 2 ** params.fingerprintBits) throw new RangeError(`fingerprint ${f} wider than ${params.fingerprintBits} bits`);
      if (g.has(i, f)) throw new RangeError(`pair (${i}, ${f}) appears twice`);
      if (g.has(altIndex(params, i, f), f)) throw new RangeError(`pair (${i}, ${f}) and its dual are both present`);
      g.t!.push(i, f);
    }
    return g;
  }

  /**
   * Visit the non-empty buckets in index order, each with its fingerprints ascending (the codec's
   * order), without listing every entry first.
   */
  forEachBucket(visit: (i: number, fingerprints: readonly number[]) => void): void {
    this.t?.forEachBucket(ascending, visit);
  }

  /** Non-empty buckets. */
  get bucketCount(): number {
    return this.t?.usedBuckets ?? 0;
  }

  /**
   * Add (i, f), known to be in range and not stored yet (the decoder's fingerprints ascend within
   * a bucket), keeping the state reduced: RangeError when its dual is already present.
   */
  pushDecoded(i: number, f: number): void {
    const p = this.t!.params;
    const alt = altIndex(p, i, f);
    if (alt !== i && this.has(alt, f)) throw new RangeError(`pair (${i}, ${f}) and its dual are both present`);
    this.t!.push(i, f);
  }

  /** Bucket count, bucket size, fingerprint bits, kick quota and hash seed; null for the bottom. */
  get params(): CuckooParams | null {
    return this.t?.params ?? null;
  }

  clone(): Gcf {
    return new Gcf(this.t?.clone() ?? null);
  }

  /** Entries stored (each element once; this is the filter's cardinality). */
  get count(): number {
    return this.t?.count ?? 0;
  }

  /** Entries beyond c in overflowing buckets (only merges create them). */
  overflowCount(): number {
    return this.t?.overflowCount() ?? 0;
  }

  loadFactor(): number {
    return this.t?.loadFactor() ?? 0;
  }

  /** The estimated false-positive rate at the current load (seed 001, Eq 3.7). */
  estimatedFpr(): number {
    return this.t?.estimatedFpr() ?? 0;
  }

  /** The (bucket, fingerprint) pairs in this layout, by bucket then fingerprint. */
  entries(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    this.forEachBucket((i, fps) => {
      for (const f of fps) out.push([i, f]);
    });
    return out;
  }

  /** (i, f) is stored in bucket i (layout). */
  has(i: number, f: number): boolean {
    return this.t !== null && this.t.bucket(i).includes(f);
  }

  /** (i, f) ∈ U(S): stored at i or at its alternate bucket. */
  inUniverse(i: number, f: number): boolean {
    return this.t !== null && (this.has(i, f) || this.has(altIndex(this.t.params, i, f), f));
  }

  contains(element: Uint8Array): boolean {
    if (this.t === null) return false;
    const { i1, fp } = cuckooHash(this.t.params, element);
    return this.inUniverse(i1, fp);
  }

  /**
   * add^δ (pure): the new entry alone, in the bucket the insert would choose (an empty filter if
   * the element is already contained). Throws FilterFullError when the insert would fail. Joining
   * the delta into this state gives an equal state (same universe) but may overflow the bucket;
   * the replica that adds should keep add()'s result, which kicks instead, and ship the delta.
   */
  addDelta(element: Uint8Array, random: Random): Gcf {
    return this.insert(element, random, false);
  }

  /** The full add mutator (pure): a new filter with the element inserted (Algorithm 1). */
  add(element: Uint8Array, random: Random): Gcf {
    const out = this.clone();
    out.insert(element, random, true);
    return out;
  }

  /** add in place (the mutable variant); returns the delta. Unchanged if it throws FilterFullError. */
  addInPlace(element: Uint8Array, random: Random): Gcf {
    return this.insert(element, random, true);
  }

  private insert(element: Uint8Array, random: Random, keep: boolean): Gcf {
    if (this.t === null) throw new FilterParamError("GCF add: the parameterless bottom has no size; start from Gcf.empty(params)");
    const p = this.t.params;
    if (this.contains(element)) return Gcf.empty(p);
    const { i1, fp } = cuckooHash(p, element);
    const placed = this.t.insert("GCF", i1, fp, random, keep);
    return Gcf.fromEntries(p, [[placed, fp]]);
  }

  /** S := S ∪ (S' \ D(S)); true if an entry was added. */
  joinInPlace(other: Gcf): boolean {
    const params = joinedParams("GCF", this.params, other.params);
    if (other.t === null || other === this) return false;
    if (this.t === null) this.t = new CuckooTable(params!, fpOf);
    let changed = false;
    for (const [i, f] of other.entries()) {
      if (!this.inUniverse(i, f)) {
        this.t.push(i, f);
        changed = true;
      }
    }
    return changed;
  }

  /** U(S) ⊆ U(S'). */
  leq(other: Gcf): boolean {
    checkParams("GCF", this.params, other.params);
    if (this.count > other.count) return false;
    return this.entries().every(([i, f]) => other.inUniverse(i, f));
  }

  /** U(S) = U(S'): both are reduced, so equal counts and inclusion suffice. */
  equals(other: Gcf): boolean {
    if (this.count !== other.count) return false;
    if (this.count === 0) return true;
    checkParams("GCF", this.params, other.params);
    return this.entries().every(([i, f]) => other.inUniverse(i, f));
  }
}

// ------------------------------------------------------------------------------------- codec
// After the common header: buckets, bucket size, fingerprint bits, max kicks, seed; then the
// number of non-empty buckets and, for each, the gap from the previous bucket index, its entry
// count and its fingerprints ascending (first absolute, then gaps - 1). Overflowing buckets are
// simply longer. Canonical for a layout.

export function encodeGcf(s: Gcf): Uint8Array {
  const w = new ByteWriter();
  const p = s.params;
  writeHeader(w, FilterKind.GCF, HASH_FAMILY, p !== null);
  if (p === null) return w.finish();
  writeCuckooParams(w, p);
  w.varint(s.bucketCount);
  let prev = -1;
  s.forEachBucket((i, fps) => {
    w.varint(i - prev - 1).varint(fps.length);
    prev = i;
    let pf = -1;
    for (const f of fps) {
      w.varint(f - pf - 1);
      pf = f;
    }
  });
  return w.finish();
}

export function writeCuckooParams(w: ByteWriter, p: CuckooParams): void {
  w.varint(p.buckets).varint(p.bucketSize).varint(p.fingerprintBits).varint(p.maxKicks).varint(p.seed);
}

/** A cuckoo filter's parameters; a table larger than maxFilterBytes is refused (StateLimitError). */
export function readCuckooParams(r: ByteReader, what: string, maxFilterBytes?: number): CuckooParams {
  const buckets = r.varint("buckets", 2 ** 30);
  const bucketSize = r.varint("bucket size", 64);
  const fingerprintBits = r.varint("fingerprint bits", 32);
  const maxKicks = r.varint("max kicks", 1_000_000);
  const seed = r.varint("seed", 0xffffffff);
  const p = cuckooParams(buckets, fingerprintBits, { bucketSize, maxKicks, seed });
  checkFilterBytes(`a ${what}`, cuckooTableBytes(p), maxFilterBytes);
  return p;
}

export function decodeGcf(bytes: Uint8Array, maxFilterBytes?: number): Gcf {
  return decoding("GCF", () => {
    const r = new ByteReader(bytes);
    if (!readHeader(r, FilterKind.GCF, HASH_FAMILY)) {
      r.end("GCF bottom");
      return Gcf.bottom();
    }
    const p = readCuckooParams(r, "GCF", maxFilterBytes);
    const fpLimit = 2 ** p.fingerprintBits;
    const g = Gcf.empty(p);
    const nb = r.varint("bucket count", p.buckets);
    let i = -1;
    for (let b = 0; b < nb; b++) {
      i += r.varint("bucket gap") + 1;
      if (i >= p.buckets) throw new DecodeError(`GCF bucket ${i} outside 0..${p.buckets - 1}`);
      const n = r.varint("entry count", Math.min(fpLimit, 1 << 20));
      if (n === 0) throw new DecodeError(`GCF bucket ${i} listed with no entries`);
      let f = -1;
      for (let k = 0; k < n; k++) {
        // Gaps make the fingerprints of a bucket strictly ascending: no pair can repeat.
        f += r.varint("fingerprint gap") + 1;
        if (f >= fpLimit) throw new DecodeError(`GCF fingerprint ${f} wider than ${p.fingerprintBits} bits`);
        g.pushDecoded(i, f);
      }
    }
    r.end("GCF");
    return g;
  });
}

// ----------------------------------------------------------------------------------- lattice

/**
 * GCF as a Lattice (ObjectType.GCF). Not registered here (registration is wired elsewhere).
 * context() is empty: the filter records fingerprints, not events, so it has no causal context.
 */
export const GcfLattice: Lattice<Gcf> = {
  type: ObjectType.GCF,
  name: "GCF",
  bottom: () => Gcf.bottom(),
  isBottom: (s) => s.count === 0,
  clone: (s) => s.clone(),
  join: joinIntoCopy((s) => s.clone(), (t, o) => t.joinInPlace(o)),
  joinInPlace: (t, o) => t.joinInPlace(o),
  leq: (a, b) => a.leq(b),
  equals: (a, b) => a.equals(b),
  // The irreducibles are single entries (one universe pair each).
  decompose: (s) => s.entries().map((e) => Gcf.fromEntries(s.params!, [e])),
  difference(a, b) {
    const p = joinedParams("GCF", a.params, b.params);
    if (p === null) return Gcf.bottom();
    return Gcf.fromEntries(p, a.entries().filter(([i, f]) => !b.inUniverse(i, f)));
  },
  context: () => new CausalContext(),
  encode: encodeGcf,
  encodedSize: (s) => encodeGcf(s).length,
  decode: (bytes, _now, bound) => decodeGcf(bytes, bound?.maxFilterBytes),
  size: (s) => s.count,
};

/** Slots (m·c) of a parameter set, re-exported for callers sizing filters. */
export { slotCount };
