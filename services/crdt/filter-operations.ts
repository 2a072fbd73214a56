// Client operations of the seed-001 filters (operations.ts): how an Add creates a filter key from
// its parameters, inserts, removes (ORCF, SCORCF) and answers membership.
import { type CuckooParams, cuckooParams, cuckooParamsFor, slotCount } from "./cuckoo-table.js";
import { FilterParamError } from "./filter-common.js";
import { Gbf, GbfLattice, type GbfParams, gbfParams, gbfParamsFor } from "./gbf.js";
import { Gcf, GcfLattice } from "./gcf.js";
import { type Lattice, ObjectType } from "./lattice.js";
import { type ClientOperations, type CreateParams, registerOperations } from "./operations.js";
import { Orcf, OrcfLattice } from "./orcf.js";
import { ScGbf, ScGbfLattice, ScGcf, ScGcfLattice, ScOrcf, ScOrcfLattice, type SeriesParams, cuckooSubParams, gbfSubParams, seriesParams } from "./scalable-filter.js";

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
  return gbfParamsFor(capacityOf(p), rateOf(p));
}

function cuckoo(p: CreateParams): CuckooParams {
  const opts = (p.bucketSize ?? 0) > 0 ? { bucketSize: p.bucketSize } : {};
  const base = cuckooParamsFor(capacityOf(p), rateOf(p), opts);
  return (p.fingerprintBits ?? 0) > 0 ? cuckooParams(base.buckets, p.fingerprintBits!, opts) : base;
}

function series(p: CreateParams): SeriesParams {
  return seriesParams(capacityOf(p), rateOf(p), (p.bucketSize ?? 0) > 0 ? { bucketSize: p.bucketSize } : {});
}

const cuckooBytes = (c: CuckooParams) => Math.ceil((slotCount(c) * c.fingerprintBits) / 8);

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

const contains = (s: FilterLike, elements: readonly Uint8Array[]) => elements.map((e) => s.contains(e));

const gbfOps: ClientOperations<Gbf> = {
  create: (p) => Gbf.empty(bloomParams(p)),
  sizeOf: (p) => Math.ceil(bloomParams(p).bits / 8),
  add: (s, els) => addAll(s, els, (x, e) => x.addInPlace(e), GbfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, 0, s.cardinality()),
  isUnset: (s) => s.params === null,
};

const gcfOps: ClientOperations<Gcf> = {
  create: (p) => Gcf.empty(cuckoo(p)),
  sizeOf: (p) => cuckooBytes(cuckoo(p)),
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.random), GcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, s.loadFactor(), s.count),
  isUnset: (s) => s.params === null,
};

const orcfOps: ClientOperations<Orcf> = {
  create: (p) => Orcf.empty(cuckoo(p)),
  sizeOf: (p) => cuckooBytes(cuckoo(p)),
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.replica, env.random), OrcfLattice),
  remove: (s, els, env) => addAll(s, els, (x, e) => x.removeInPlace(e, env.random), OrcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, s.loadFactor(), s.count),
  isUnset: (s) => s.params === null,
};

/** A series' size when it holds its first sub-filter (it grows by one sub-filter per capacity). */
const seriesBloomBytes = (p: CreateParams) => Math.ceil(gbfSubParams(series(p), 0).bits / 8);
const seriesCuckooBytes = (p: CreateParams) => cuckooBytes(cuckooSubParams(series(p), 0));
const seriesLoad = (s: { subFilters: readonly { loadFactor(): number }[] }) => s.subFilters.at(-1)?.loadFactor() ?? 0;

const scGbfOps: ClientOperations<ScGbf> = {
  create: (p) => ScGbf.empty(series(p)),
  sizeOf: seriesBloomBytes,
  add: (s, els) => addAll(s, els, (x, e) => x.addInPlace(e), ScGbfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, 0, s.cardinality()),
  isUnset: (s) => s.params === null,
};

const scGcfOps: ClientOperations<ScGcf> = {
  create: (p) => ScGcf.empty(series(p)),
  sizeOf: seriesCuckooBytes,
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.random), ScGcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, seriesLoad(s), s.cardinality()),
  isUnset: (s) => s.params === null,
};

const scOrcfOps: ClientOperations<ScOrcf> = {
  create: (p) => ScOrcf.empty(series(p)),
  sizeOf: seriesCuckooBytes,
  add: (s, els, env) => addAll(s, els, (x, e) => x.addInPlace(e, env.replica, env.random), ScOrcfLattice),
  remove: (s, els, env) => addAll(s, els, (x, e) => x.removeInPlace(e, env.random), ScOrcfLattice),
  contains,
  probabilistic: true,
  describe: (s) => figures(s, seriesLoad(s), s.cardinality()),
  isUnset: (s) => s.params === null,
};

registerOperations(ObjectType.GBF, gbfOps);
registerOperations(ObjectType.GCF, gcfOps);
registerOperations(ObjectType.ORCF, orcfOps);
registerOperations(ObjectType.SCGBF, scGbfOps);
registerOperations(ObjectType.SCGCF, scGcfOps);
registerOperations(ObjectType.SCORCF, scOrcfOps);
