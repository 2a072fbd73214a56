// The scalable filter series of seed 001 (section 3.5, Specs 5-8): ScGBF, ScGCF and ScORCF.
//
// A series is a list of sub-filters of one type. contains is the OR over them; an add goes to the
// last sub-filter, after appending a new one when the last has reached its capacity (expand).
// Sub-filter i targets ε_i = ε_0·q^i with ε_0 = ε·(1 - q), so the compounded rate stays below ε
// (seed 001 Eqs 2.11-2.12; q = 0.5 gives ε_0 = ε/2). A Bloom sub-filter is sized for ε_i by Eqs
// 2.3-2.4; a cuckoo sub-filter gains one fingerprint bit per halving. Every sub-filter has the same
// capacity (the seed's evaluation, section 6.1: no capacity growth). Sub-filter parameters are a
// pure function of the series parameters and the index, so replicas agree on them.
//
// Join is sub-filter by sub-filter, the shorter series padded with empty sub-filters (Spec 5).
// shrink() is not provided: dropping a trailing empty sub-filter is not an inflation, and for
// ScORCF it would forget tombstones (the digest's concern in section 6); a series only grows.
//
// ScORCF (Spec 8) keeps one history H for the whole series. Here every sub-filter carries the same
// H (the seed copies it into each), and a missing sub-filter pads as (∅, H): tags are global and
// an entry never leaves the sub-filter it was added to, so each sub-filter's OR-Set join is right.
//
// Lattices: ScGbfLattice, ScGcfLattice and ScOrcfLattice are the types SCGBF, SCGCF and SCORCF;
// the codec's kind byte (header byte 1, FilterKind.SCGBF etc., see filterKindOf) says the same.
import { CausalContext } from "./causal-context.js";
import { makeDot } from "./dot.js";
import { HASH_FAMILY } from "./element-hash.js";
import { DecodeError, checkFilterBytes } from "./errors.js";
import {
  ByteReader,
  ByteWriter,
  FilterFullError,
  FilterKind,
  FilterParamError,
  type Random,
  decoding,
  joinedParams,
  randomInt,
  readHeader,
  sameParams,
  writeHeader,
} from "./filter-common.js";
import { type CuckooParams, cuckooParams, cuckooParamsFor, cuckooTableBytes } from "./cuckoo-table.js";
import { Gbf, type GbfParams, GbfLattice, gbfBytes, gbfParamsFor } from "./gbf.js";
import { Gcf, GcfLattice } from "./gcf.js";
import { Orcf, OrcfLattice } from "./orcf.js";
import { type DecodeBound, type Lattice, ObjectType } from "./lattice.js";

export interface SeriesParams {
  /** Elements per sub-filter before the next is appended. */
  readonly capacity: number;
  /** Target compounded false-positive rate ε of the whole series. */
  readonly fpr: number;
  /** q, the tightening ratio of successive sub-filters' rates (0.5 in seed 001). */
  readonly tightening: number;
  /** Element-hash seed of every sub-filter. */
  readonly seed: number;
  /** Cuckoo series: slots per bucket, kick quota, and buckets per sub-filter (0: from capacity). */
  readonly bucketSize: number;
  readonly maxKicks: number;
  readonly buckets: number;
}

/**
 * Most sub-filters a series may hold. Each sub-filter's rate is half the one before, so the 64th
 * targets ε_0·2^-63, far below any useful rate (a Bloom sub-filter's hashes and bits per element
 * grow with every halving; a cuckoo one's fingerprint stops at 32 bits); decoding refuses more, so
 * raising it would make series that nodes of earlier versions cannot read. A full series refuses
 * Adds of new elements (SeriesFullError).
 */
export const MAX_SUBFILTERS = 64;

/**
 * An Add that needs a sub-filter past MAX_SUBFILTERS: the series has grown as far as it can and
 * nothing was added. Not a FilterFullError (a cuckoo table out of kicks), which the series itself
 * answers by starting its next sub-filter.
 */
export class SeriesFullError extends Error {
  override readonly name = "SeriesFullError";
  /** The message without its subject (the type), for callers that name the key as well. */
  readonly detail: string;
  constructor(
    /** The series type, as the API names it (SCGBF, SCGCF, SCORCF). */
    readonly type: string,
    /** Elements the series holds (estimated for Bloom sub-filters). */
    elements: number,
    capacity: number,
  ) {
    const detail =
      `has all its ${MAX_SUBFILTERS} sub-filters full (about ${elements} elements at capacity ${capacity} each): ` +
      "a series grows no further, and nothing of this Add was added; create a key with a larger capacity";
    super(`${type} ${detail}`);
    this.detail = detail;
  }
}

export interface SeriesOptions {
  tightening?: number;
  seed?: number;
  bucketSize?: number;
  maxKicks?: number;
  buckets?: number;
}

export function seriesParams(capacity: number, fpr: number, opts: SeriesOptions = {}): SeriesParams {
  const p: SeriesParams = {
    capacity,
    fpr,
    tightening: opts.tightening ?? 0.5,
    seed: opts.seed ?? 0,
    bucketSize: opts.bucketSize ?? 4,
    maxKicks: opts.maxKicks ?? 500,
    buckets: opts.buckets ?? 0,
  };
  if (!Number.isInteger(capacity) || capacity < 1) throw new FilterParamError(`series capacity ${capacity} not a positive integer`);
  if (!(fpr > 0 && fpr < 1)) throw new FilterParamError(`series fpr ${fpr} not in (0, 1)`);
  if (!(p.tightening > 0 && p.tightening < 1)) throw new FilterParamError(`tightening ${p.tightening} not in (0, 1)`);
  // Validate the cuckoo fields once through the sub-filter constructor.
  cuckooSubParams(p, 0);
  return p;
}

/** ε_i = ε·(1 - q)·q^i. */
export function subFpr(p: SeriesParams, i: number): number {
  return p.fpr * (1 - p.tightening) * p.tightening ** i;
}

export function gbfSubParams(p: SeriesParams, i: number): GbfParams {
  return gbfParamsFor(p.capacity, subFpr(p, i), p.seed);
}

export function cuckooSubParams(p: SeriesParams, i: number): CuckooParams {
  const opts = { bucketSize: p.bucketSize, maxKicks: p.maxKicks, seed: p.seed };
  const derived = cuckooParamsFor(p.capacity, subFpr(p, i), opts);
  return p.buckets === 0 ? derived : cuckooParams(p.buckets, derived.fingerprintBits, opts);
}

/** The filter kind of an encoded filter (header byte 1): tells a series from a plain filter. */
export function filterKindOf(bytes: Uint8Array): FilterKind {
  if (bytes.length < 2) throw new DecodeError("filter encoding shorter than its header");
  return bytes[1] as FilterKind;
}

/** Bytes the first n sub-filters of a series take when full. */
function seriesBytes<F>(k: SubKind<F>, p: SeriesParams, n: number): number {
  let total = 0;
  for (let i = 0; i < n; i++) total += k.subBytes(p, i);
  return total;
}

/**
 * Bytes the first n sub-filters of a Bloom (ScGBF) or cuckoo (ScGCF, ScORCF) series take when
 * full: n = 1 is what --max-filter-bytes bounds at creation, all of them what --max-state-bytes bounds.
 */
export const bloomSeriesBytes = (p: SeriesParams, n: number): number => seriesBytes(gbfKind, p, n);
export const cuckooSeriesBytes = (p: SeriesParams, n: number): number => seriesBytes(gcfKind, p, n);

/** What a series needs to know of its sub-filter type. */
interface SubKind<F> {
  readonly name: string;
  readonly kind: FilterKind;
  readonly sub: Lattice<F>;
  subParams(p: SeriesParams, i: number): object;
  paramsOf(f: F): object | null;
  empty(p: SeriesParams, i: number): F;
  /** Bytes sub-filter i takes when full (the first is what --max-filter-bytes bounds, as at creation). */
  subBytes(p: SeriesParams, i: number): number;
  /** Elements in a sub-filter, against capacity (Eq 3.20 for Bloom, entries for cuckoo). */
  cardinality(f: F): number;
}

/** The shared body of the three series: parameters and sub-filters. */
abstract class Series<F> {
  constructor(
    readonly params: SeriesParams | null,
    protected subs: F[],
  ) {}

  protected abstract get k(): SubKind<F>;

  /** The sub-filters (read-only view). */
  get subFilters(): readonly F[] {
    return this.subs;
  }

  /** A missing sub-filter i (padding): empty; ScORCF overrides it to carry the series history. */
  pad(p: SeriesParams, i: number): F {
    return this.k.empty(p, i);
  }

  at(p: SeriesParams, i: number): F {
    return this.subs[i] ?? this.pad(p, i);
  }

  protected requireParams(op: string): SeriesParams {
    if (this.params === null) throw new FilterParamError(`${this.k.name} ${op}: the parameterless bottom has no size; start from empty(params)`);
    return this.params;
  }

  /** Append sub-filters until one below capacity ends the series (expand, Spec 5). */
  protected expand(p: SeriesParams): void {
    const last = this.subs[this.subs.length - 1];
    if (last === undefined || this.k.cardinality(last) >= p.capacity) this.forceExpand(p);
  }

  protected forceExpand(p: SeriesParams): void {
    if (this.subs.length >= MAX_SUBFILTERS) throw new SeriesFullError(this.k.name.toUpperCase(), Math.round(this.cardinality()), p.capacity);
    this.subs.push(this.pad(p, this.subs.length));
  }

  /** Entries (or estimated elements) over all sub-filters. */
  cardinality(): number {
    return this.subs.reduce((n, f) => n + this.k.cardinality(f), 0);
  }

  /** Compounded rate of the current sub-filters, 1 - ∏(1 - ε_i) (seed 001 Eq 2.12). */
  estimatedFpr(): number {
    return 1 - this.subs.reduce((acc, f) => acc * (1 - (f as { estimatedFpr(): number }).estimatedFpr()), 1);
  }
}

/** Build the lattice of a series type from its constructor and sub-filter kind. */
function seriesLattice<F, S extends Series<F>>(
  type: ObjectType,
  k: SubKind<F>,
  make: (p: SeriesParams | null, subs: F[]) => S,
  extra: { context?: (s: S) => CausalContext; normalize?: (subs: F[]) => F[] } = {},
): Lattice<S> {
  const norm = extra.normalize ?? ((x: F[]) => x);
  const both = (a: S, b: S) => {
    const p = joinedParams(k.name, a.params, b.params);
    return { p, n: Math.max(a.subFilters.length, b.subFilters.length) };
  };
  const L: Lattice<S> = {
    type,
    name: k.name.toUpperCase(),
    bottom: () => make(null, []),
    isBottom: (s) => s.subFilters.every((f) => k.sub.isBottom(f)),
    clone: (s) => make(s.params, s.subFilters.map((f) => k.sub.clone(f))),
    join(a, b) {
      const { p, n } = both(a, b);
      if (p === null) return make(null, []);
      const subs: F[] = [];
      for (let i = 0; i < n; i++) subs.push(k.sub.join(a.at(p, i), b.at(p, i)));
      return make(p, subs);
    },
    joinInPlace(t, o) {
      // A series whose sub-filters share state across them (ScORCF's history) joins by copy.
      if (extra.normalize !== undefined) {
        const j = L.join(t, o);
        const changed = !L.equals(j, t);
        (t as unknown as { subs: F[] }).subs = (j as unknown as { subs: F[] }).subs;
        (t as { params: SeriesParams | null }).params = j.params;
        return changed;
      }
      // The others sub-filter by sub-filter, in place: a batch gathering its elements' deltas
      // into one joins each small delta into a growing one, which a copy per join made quadratic
      // (10 000 adds to a series took 37 s).
      const { p, n } = both(t, o);
      if (p === null) return false;
      (t as { params: SeriesParams | null }).params = p;
      const subs = (t as unknown as { subs: F[] }).subs;
      let changed = false;
      for (let i = 0; i < n; i++) {
        const theirs = o.subFilters[i];
        if (i < subs.length) {
          if (theirs !== undefined && k.sub.joinInPlace(subs[i]!, theirs)) changed = true;
        } else {
          const f = theirs !== undefined ? k.sub.clone(theirs) : t.pad(p, i);
          subs.push(f);
          if (!k.sub.isBottom(f)) changed = true;
        }
      }
      return changed;
    },
    leq(a, b) {
      const { p, n } = both(a, b);
      if (p === null) return true;
      for (let i = 0; i < n; i++) if (!k.sub.leq(a.at(p, i), b.at(p, i))) return false;
      return true;
    },
    equals(a, b) {
      if (L.isBottom(a) || L.isBottom(b)) return L.isBottom(a) && L.isBottom(b);
      const { p, n } = both(a, b);
      for (let i = 0; i < n; i++) if (!k.sub.equals(a.at(p!, i), b.at(p!, i))) return false;
      return true;
    },
    decompose(s) {
      const p = s.params;
      if (p === null) return [];
      const out: S[] = [];
      s.subFilters.forEach((f, i) => {
        for (const part of k.sub.decompose(f)) {
          const subs: F[] = [];
          for (let j = 0; j < i; j++) subs.push(k.empty(p, j));
          subs.push(part);
          out.push(make(p, norm(subs)));
        }
      });
      return out;
    },
    difference(a, b) {
      const p = joinedParams(k.name, a.params, b.params);
      if (p === null) return make(null, []);
      return make(p, norm(a.subFilters.map((f, i) => k.sub.difference(f, b.at(p, i)))));
    },
    context: extra.context ?? (() => new CausalContext()),
    encode: (s) => encodeSeries(k, s),
    encodedSize: (s) => encodeSeries(k, s).length,
    decode: (bytes, _now, bound) => {
      const { p, subs } = decodeSeries(k, bytes, bound);
      return make(p, subs);
    },
    size: (s) => s.subFilters.reduce((n, f) => n + (k.sub.size?.(f) ?? 1), 0),
  };
  return L;
}

// ------------------------------------------------------------------------------------- codec
// After the common header: capacity, fpr (float64), tightening (float64), seed, bucket size,
// max kicks, buckets; then the sub-filter count and each sub-filter's own encoding, length-
// prefixed. Each sub-filter must carry exactly the parameters its index derives.

function encodeSeries<F>(k: SubKind<F>, s: Series<F>): Uint8Array {
  const w = new ByteWriter();
  const p = s.params;
  writeHeader(w, k.kind, HASH_FAMILY, p !== null);
  if (p === null) return w.finish();
  w.varint(p.capacity).float(p.fpr).float(p.tightening).varint(p.seed).varint(p.bucketSize).varint(p.maxKicks).varint(p.buckets);
  w.varint(s.subFilters.length);
  for (const f of s.subFilters) {
    const b = k.sub.encode(f);
    w.varint(b.length).bytes(b);
  }
  return w.finish();
}

function decodeSeries<F>(k: SubKind<F>, bytes: Uint8Array, bound: DecodeBound | undefined): { p: SeriesParams | null; subs: F[] } {
  return decoding(k.name, () => {
    const r = new ByteReader(bytes);
    if (!readHeader(r, k.kind, HASH_FAMILY)) {
      r.end(`${k.name} bottom`);
      return { p: null, subs: [] };
    }
    const capacity = r.varint("capacity");
    const fpr = r.float("fpr");
    const tightening = r.float("tightening");
    const seed = r.varint("seed", 0xffffffff);
    const bucketSize = r.varint("bucket size", 64);
    const maxKicks = r.varint("max kicks", 1_000_000);
    const buckets = r.varint("buckets", 2 ** 30);
    const p = seriesParams(capacity, fpr, { tightening, seed, bucketSize, maxKicks, buckets });
    // Later sub-filters grow as the series fills, as they do at the node that created it.
    checkFilterBytes(`a ${k.name} whose first sub-filter`, k.subBytes(p, 0), bound?.maxFilterBytes);
    const n = r.varint("sub-filter count", MAX_SUBFILTERS);
    // Its sub-filters, each allocated as it fills: together no more than a state may take.
    if (bound !== undefined) checkFilterBytes(`a ${k.name} of ${n} sub-filters`, seriesBytes(k, p, n), bound.maxStateBytes, "--max-state-bytes");
    const subs: F[] = [];
    for (let i = 0; i < n; i++) {
      const f = k.sub.decode(r.bytes(r.varint("sub-filter length"), `sub-filter ${i}`));
      const fp = k.paramsOf(f);
      if (fp === null || !sameParams(fp, k.subParams(p, i))) {
        throw new DecodeError(`${k.name} sub-filter ${i} parameters ${JSON.stringify(fp)} differ from the series' ${JSON.stringify(k.subParams(p, i))}`);
      }
      subs.push(f);
    }
    r.end(k.name);
    return { p, subs };
  });
}

// ------------------------------------------------------------------------------------- ScGBF

const gbfKind: SubKind<Gbf> = {
  name: "ScGBF",
  kind: FilterKind.SCGBF,
  sub: GbfLattice,
  subParams: gbfSubParams,
  paramsOf: (f) => f.params,
  empty: (p, i) => Gbf.empty(gbfSubParams(p, i)),
  subBytes: (p, i) => gbfBytes(gbfSubParams(p, i)),
  cardinality: (f) => f.cardinality(),
};

/** Scalable grow-only Bloom filter (Spec 6). */
export class ScGbf extends Series<Gbf> {
  protected get k(): SubKind<Gbf> {
    return gbfKind;
  }

  static empty(p: SeriesParams): ScGbf {
    return new ScGbf(p, []);
  }

  contains(element: Uint8Array): boolean {
    return this.subs.some((f) => f.contains(element));
  }

  /** add in place; returns the delta (nothing if some sub-filter already contains the element). */
  addInPlace(element: Uint8Array): ScGbf {
    const p = this.requireParams("add");
    if (this.contains(element)) return ScGbf.empty(p);
    this.expand(p);
    const i = this.subs.length - 1;
    const d = this.subs[i]!.addInPlace(element);
    return new ScGbf(p, [...this.subs.slice(0, i).map((_, j) => this.pad(p, j)), d]);
  }

  add(element: Uint8Array): ScGbf {
    const out = ScGbfLattice.clone(this);
    out.addInPlace(element);
    return out;
  }

  addDelta(element: Uint8Array): ScGbf {
    return ScGbfLattice.clone(this).addInPlace(element);
  }
}

export const ScGbfLattice: Lattice<ScGbf> = seriesLattice(ObjectType.SCGBF, gbfKind, (p, subs) => new ScGbf(p, subs));

// ------------------------------------------------------------------------------------- ScGCF

const gcfKind: SubKind<Gcf> = {
  name: "ScGCF",
  kind: FilterKind.SCGCF,
  sub: GcfLattice,
  subParams: cuckooSubParams,
  paramsOf: (f) => f.params,
  empty: (p, i) => Gcf.empty(cuckooSubParams(p, i)),
  subBytes: (p, i) => cuckooTableBytes(cuckooSubParams(p, i)),
  cardinality: (f) => f.count,
};

/** Scalable grow-only cuckoo filter (Spec 7): a full last sub-filter makes a new one. */
export class ScGcf extends Series<Gcf> {
  protected get k(): SubKind<Gcf> {
    return gcfKind;
  }

  static empty(p: SeriesParams): ScGcf {
    return new ScGcf(p, []);
  }

  contains(element: Uint8Array): boolean {
    return this.subs.some((f) => f.contains(element));
  }

  /** add in place; returns the delta. Throws SeriesFullError past MAX_SUBFILTERS. */
  addInPlace(element: Uint8Array, random: Random): ScGcf {
    const p = this.requireParams("add");
    if (this.contains(element)) return ScGcf.empty(p);
    this.expand(p);
    let d: Gcf;
    try {
      d = this.subs[this.subs.length - 1]!.addInPlace(element, random);
    } catch (e) {
      if (!(e instanceof FilterFullError)) throw e;
      // The table can report full below its capacity: start the next sub-filter.
      this.forceExpand(p);
      d = this.subs[this.subs.length - 1]!.addInPlace(element, random);
    }
    const i = this.subs.length - 1;
    return new ScGcf(p, [...this.subs.slice(0, i).map((_, j) => this.pad(p, j)), d]);
  }

  add(element: Uint8Array, random: Random): ScGcf {
    const out = ScGcfLattice.clone(this);
    out.addInPlace(element, random);
    return out;
  }

  addDelta(element: Uint8Array, random: Random): ScGcf {
    return ScGcfLattice.clone(this).addInPlace(element, random);
  }
}

export const ScGcfLattice: Lattice<ScGcf> = seriesLattice(ObjectType.SCGCF, gcfKind, (p, subs) => new ScGcf(p, subs));

// ------------------------------------------------------------------------------------ ScORCF

const orcfKind: SubKind<Orcf> = {
  name: "ScORCF",
  kind: FilterKind.SCORCF,
  sub: OrcfLattice,
  subParams: cuckooSubParams,
  paramsOf: (f) => f.params,
  empty: (p, i) => Orcf.empty(cuckooSubParams(p, i)),
  subBytes: (p, i) => cuckooTableBytes(cuckooSubParams(p, i)),
  cardinality: (f) => f.count,
};

/** Give every sub-filter the union of their histories (the series' H). */
function shareHistory(subs: Orcf[]): Orcf[] {
  const h = new CausalContext();
  for (const f of subs) h.joinInPlace(f.history);
  return subs.map((f) => {
    const missing = h.subtract(f.history);
    // The missing tags are not live in f (live tags are in f's history), so this only grows H.
    return missing.isEmpty() ? f : OrcfLattice.join(f, Orcf.fromParts(f.params!, [], missing));
  });
}

/** Scalable observed-remove cuckoo filter (Spec 8), one history shared by all sub-filters. */
export class ScOrcf extends Series<Orcf> {
  protected get k(): SubKind<Orcf> {
    return orcfKind;
  }

  static empty(p: SeriesParams): ScOrcf {
    return new ScOrcf(p, []);
  }

  /** H, the tags observed by the series. */
  get history(): CausalContext {
    return this.subs[0]?.history ?? new CausalContext();
  }

  override pad(p: SeriesParams, i: number): Orcf {
    return Orcf.fromParts(cuckooSubParams(p, i), [], this.history);
  }

  contains(element: Uint8Array): boolean {
    return this.subs.some((f) => f.contains(element));
  }

  /**
   * add in place; returns the delta. The element goes to the last sub-filter below capacity that
   * accepts it (a new one if none does); the new tag joins every sub-filter's history.
   */
  addInPlace(element: Uint8Array, replica: string, random: Random): ScOrcf {
    const p = this.requireParams("add");
    this.expand(p);
    let j = -1;
    let d: Orcf | undefined;
    for (let i = this.subs.length - 1; i >= 0 && d === undefined; i--) {
      if (this.subs[i]!.count >= p.capacity) continue;
      try {
        d = this.subs[i]!.addInPlace(element, replica, random);
        j = i;
      } catch (e) {
        if (!(e instanceof FilterFullError)) throw e;
      }
    }
    if (d === undefined) {
      this.forceExpand(p);
      j = this.subs.length - 1;
      d = this.subs[j]!.addInPlace(element, replica, random);
    }
    const tag = d.history;
    this.subs = this.subs.map((f, i) => (i === j ? f : OrcfLattice.join(f, Orcf.fromParts(f.params!, [], tag))));
    const delta: Orcf[] = [];
    for (let i = 0; i < j; i++) delta.push(Orcf.fromParts(cuckooSubParams(p, i), [], tag));
    delta.push(d);
    return new ScOrcf(p, delta);
  }

  /** remove in place: one copy from one randomly chosen sub-filter holding the element; the delta. */
  removeInPlace(element: Uint8Array, random: Random): ScOrcf {
    const p = this.requireParams("remove");
    const holders = this.subs.map((f, i) => [f, i] as const).filter(([f]) => f.contains(element));
    if (holders.length === 0) return ScOrcf.empty(p);
    const [f] = holders[randomInt(random, holders.length)]!;
    const d = f.removeInPlace(element, random);
    // A tombstone is global (tags are): carried by sub-filter 0 it pads every other one.
    return new ScOrcf(p, [Orcf.fromParts(cuckooSubParams(p, 0), [], d.history)]);
  }

  add(element: Uint8Array, replica: string, random: Random): ScOrcf {
    const out = ScOrcfLattice.clone(this);
    out.addInPlace(element, replica, random);
    return out;
  }

  remove(element: Uint8Array, random: Random): ScOrcf {
    const out = ScOrcfLattice.clone(this);
    out.removeInPlace(element, random);
    return out;
  }
}

const scOrcfBase = seriesLattice(ObjectType.SCORCF, orcfKind, (p, subs) => new ScOrcf(p, subs), {
  context: (s) => s.history,
  normalize: shareHistory,
});

/**
 * ScORCF's lattice: the generic series lattice, except that decomposition is global (a removed tag
 * is one tombstone for the series, not one per sub-filter) and decode checks the shared history.
 */
export const ScOrcfLattice: Lattice<ScOrcf> = {
  ...scOrcfBase,
  decompose(s) {
    const p = s.params;
    if (p === null) return [];
    const out: ScOrcf[] = [];
    const live = new CausalContext();
    s.subFilters.forEach((f, i) => {
      for (const e of f.entries()) {
        const tag = CausalContext.of([makeDot(e.replica, e.t)]);
        live.joinInPlace(tag);
        const subs: Orcf[] = [];
        for (let j = 0; j < i; j++) subs.push(Orcf.fromParts(cuckooSubParams(p, j), [], tag));
        subs.push(Orcf.fromParts(f.params!, [e], tag));
        out.push(new ScOrcf(p, subs));
      }
    });
    for (const d of s.history.subtract(live).dots()) {
      out.push(new ScOrcf(p, [Orcf.fromParts(cuckooSubParams(p, 0), [], CausalContext.of([d]))]));
    }
    return out;
  },
  decode(bytes, nowMs, bound) {
    const s = scOrcfBase.decode(bytes, nowMs, bound);
    const h = s.history;
    if (!s.subFilters.every((f) => f.history.equals(h))) throw new DecodeError("ScORCF sub-filters do not share one history");
    return s;
  },
};

