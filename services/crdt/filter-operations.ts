// Client operations of the seed-001 filters (operations.ts): how an Add creates a filter key from
// its parameters, inserts, removes (ORCF, SCORCF) and answers membership.
import { type CuckooParams, DEFAULT_BUCKET_SIZE, MAX_FINGERPRINT_BITS, cuckooParams, cuckooParamsFor, cuckooTableBytes, fingerprintBitsFor } from "./cuckoo-table.js";
import { FilterParamError } from "./filter-common.js";
import { siblingOperations } from "./filter-siblings.js";
import { Gbf, GbfLattice, type GbfParams, MAX_HASHES, gbfBytes, gbfHashesFor, gbfParams, gbfParamsFor } from "./gbf.js";
import { Gcf, GcfLattice } from "./gcf.js";
import { type Lattice, ObjectType } from "./lattice.js";
import { type ClientOperations, type CreateParams, registerOperations } from "./operations.js";
import { Orcf, OrcfLattice } from "./orcf.js";
import { ScGbf, ScGbfLattice, ScGcf, ScGcfLattice, ScOrcf, ScOrcfLattice, type SeriesParams, bloomSeriesBytes, cuckooSeriesBytes, seriesParams, subFpr } from "./scalable-filter.js";

export const DEFAULT_FILTER_CAPACITY = 10_000;
export const DEFAULT_FALSE_POSITIVE_RATE = 0.01;

const capacityOf = (p: CreateParams) => (p.capacity !== undefined && p.capacity > 0 ? p.capacity : DEFAULT_FILTER_CAPACITY);
const rateOf = (p: CreateParams) => {
  const r = p.falsePositiveRate !== undefined && p.falsePositiveRate !== 0 ? p.falsePositiveRate : DEFAULT_FALSE_POSITIVE_RATE;
  if (!(r > 0 && r < 0.5)) throw new FilterParamError(`false_positive_rate ${r} is not in (0, 0.5)`);
  return r;
};

function bloomParams(p: CreateParams): GbfParams {
  if ((p.bits ?? 0) > 0 || (p.hashes ?? 0) > 0) {
    if (!((p.bits ?? 0) > 0 && (p.hashes ?? 0) > 0)) throw new FilterParamError("give both bits and hashes, or neither");
    return gbfParams(p.bits!, p.hashes!);
  }
  const rate = rateOf(p);
  // Refused rather than built with fewer hashes, which would answer at a higher rate than asked.
  const hashes = gbfHashesFor(rate);
  if (hashes > MAX_HASHES) {
    throw new FilterParamError(`false_positive_rate ${rate} needs ${hashes} hash functions; a Bloom filter has at most ${MAX_HASHES} (rates down to about 1e-19)`);
  }
  return gbfParamsFor(capacityOf(p), rate);
}

function cuckoo(p: CreateParams): CuckooParams {
  const opts = (p.bucketSize ?? 0) > 0 ? { bucketSize: p.bucketSize } : {};
  const rate = rateOf(p);
  if ((p.fingerprintBits ?? 0) === 0) reachableByCuckoo(rate, opts.bucketSize ?? DEFAULT_BUCKET_SIZE);
  const base = cuckooParamsFor(capacityOf(p), rate, opts);
  return (p.fingerprintBits ?? 0) > 0 ? cuckooParams(base.buckets, p.fingerprintBits!, opts) : base;
}

/** Refuse a rate a cuckoo filter cannot reach (its fingerprints would be capped, its rate higher than asked). */
function reachableByCuckoo(rate: number, bucketSize: number): void {
  const bits = fingerprintBitsFor(rate, bucketSize);
  if (bits > MAX_FINGERPRINT_BITS) {
    const floor = (2 * bucketSize) / 2 ** MAX_FINGERPRINT_BITS;
    throw new FilterParamError(`false_positive_rate ${rate} needs ${bits}-bit fingerprints with buckets of ${bucketSize}; a cuckoo filter's are at most ${MAX_FINGERPRINT_BITS} bits (rates down to ${floor.toPrecision(2)}): ask for a higher rate, or a GBF`);
  }
}

function series(p: CreateParams): SeriesParams {
  return seriesParams(capacityOf(p), rateOf(p), (p.bucketSize ?? 0) > 0 ? { bucketSize: p.bucketSize } : {});
}

/**
 * Insert each element in place and gather the deltas. Each delta is a new value the mutator made
 * for this call, so they are gathered in place into the first: a batch of k elements costs k
 * small joins, not k copies of a growing delta.
 */
function addAll<S>(s: S, elements: readonly Uint8Array[], insert: (s: S, e: Uint8Array) => S, L: Pick<Lattice<S>, "joinInPlace">): S {
  let delta: S | undefined;
  for (const e of elements) {
    const d = insert(s, e);
    if (delta === undefined) delta = d;
    else L.joinInPlace(delta, d);
  }
  return delta!;
}

interface FilterLike {
  contains(e: Uint8Array): boolean;
  estimatedFpr(): number;
  readonly params: unknown;
}

function figures(s: FilterLike, loadFactor: number, count: number) {
  return { estimatedFalsePositiveRate: s.estimatedFpr(), loadFactor, estimatedCount: Math.round(count), parameters: s.params };
}

/**
 * A series' figures: its parameters (those its sub-filters use: `shown`) and how many sub-filters
 * it has grown to.
 */
function seriesFigures<P extends object>(
  s: FilterLike & { cardinality(): number; readonly subFilters: readonly unknown[]; readonly params: P | null },
  loadFactor: number,
  shown: (p: P) => object = (p) => p,
) {
  const f = figures(s, loadFactor, s.cardinality());
  return s.params === null ? f : { ...f, parameters: { ...shown(s.params), subFilters: s.subFilters.length } };
}

/** A Bloom series' parameters: its SeriesParams carry cuckoo fields (buckets, kicks) it never uses. */
const bloomSeriesShown = ({ capacity, fpr, tightening, seed }: SeriesParams) => ({ capacity, fpr, tightening, seed });

const contains = (s: FilterLike, elements: readonly Uint8Array[]) => elements.map((e) => s.contains(e));

const gbfOps: ClientOperations<Gbf> = {
  create: (p) => Gbf.empty(bloomParams(p)),
  sizeOf: (p) => gbfBytes(bloomParams(p)),
  add: (s, els) => addAll(s, els, (x, e) => x.addInPlace(e), GbfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, 0, s.cardinality()),
  isUnset: (s) => s.params === null,
};

const gcfOps: ClientOperations<Gcf> = {
  create: (p) => Gcf.empty(cuckoo(p)),
  sizeOf: (p) => cuckooTableBytes(cuckoo(p)),
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.random), GcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, s.loadFactor(), s.count),
  isUnset: (s) => s.params === null,
};

const orcfOps: ClientOperations<Orcf> = {
  create: (p) => Orcf.empty(cuckoo(p)),
  sizeOf: (p) => cuckooTableBytes(cuckoo(p)),
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.replica, env.random), OrcfLattice),
  remove: (s, els, env) => addAll(s, els, (x, e) => x.removeInPlace(e, env.random), OrcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, s.loadFactor(), s.count),
  isUnset: (s) => s.params === null,
};

/** A series whose first sub-filter can reach its rate (later ones tighten it; see MAX_SUBFILTERS). */
function bloomSeries(p: CreateParams): SeriesParams {
  const s = series(p);
  bloomParams({ capacity: s.capacity, falsePositiveRate: subFpr(s, 0) });
  return s;
}
function cuckooSeries(p: CreateParams): SeriesParams {
  const s = series(p);
  reachableByCuckoo(subFpr(s, 0), s.bucketSize);
  return s;
}
/** A series' size when it holds its first sub-filter (it grows by one sub-filter per capacity). */
const seriesBloomBytes = (p: CreateParams) => bloomSeriesBytes(bloomSeries(p), 1);
const seriesCuckooBytes = (p: CreateParams) => cuckooSeriesBytes(cuckooSeries(p), 1);
/** What a series' sub-filters take when full, as it grows (--max-state-bytes). */
const bloomSeriesState = (s: ScGbf) => (s.params === null ? 0 : bloomSeriesBytes(s.params, s.subFilters.length));
const cuckooSeriesState = (s: ScGcf | ScOrcf) => (s.params === null ? 0 : cuckooSeriesBytes(s.params, s.subFilters.length));
const seriesLoad = (s: { subFilters: readonly { loadFactor(): number }[] }) => s.subFilters.at(-1)?.loadFactor() ?? 0;

const scGbfOps: ClientOperations<ScGbf> = {
  create: (p) => ScGbf.empty(bloomSeries(p)),
  sizeOf: seriesBloomBytes,
  stateBytes: bloomSeriesState,
  add: (s, els) => addAll(s, els, (x, e) => x.addInPlace(e), ScGbfLattice),
  contains,
  probabilistic: true,
  describe: (s) => seriesFigures(s, 0, bloomSeriesShown),
  isUnset: (s) => s.params === null,
};

const scGcfOps: ClientOperations<ScGcf> = {
  create: (p) => ScGcf.empty(cuckooSeries(p)),
  sizeOf: seriesCuckooBytes,
  stateBytes: cuckooSeriesState,
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.random), ScGcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => seriesFigures(s, seriesLoad(s)),
  isUnset: (s) => s.params === null,
};

const scOrcfOps: ClientOperations<ScOrcf> = {
  create: (p) => ScOrcf.empty(cuckooSeries(p)),
  sizeOf: seriesCuckooBytes,
  stateBytes: cuckooSeriesState,
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.replica, env.random), ScOrcfLattice),
  remove: (s, els, env) => addAll(s, els, (x, e) => x.removeInPlace(e, env.random), ScOrcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => seriesFigures(s, seriesLoad(s)),
  isUnset: (s) => s.params === null,
};

// Keys hold siblings of filters (filter-siblings.ts): the operations of each type run over them.
registerOperations(ObjectType.GBF, siblingOperations(gbfOps));
registerOperations(ObjectType.GCF, siblingOperations(gcfOps));
registerOperations(ObjectType.ORCF, siblingOperations(orcfOps));
registerOperations(ObjectType.SCGBF, siblingOperations(scGbfOps));
registerOperations(ObjectType.SCGCF, siblingOperations(scGcfOps));
registerOperations(ObjectType.SCORCF, siblingOperations(scOrcfOps));
