// Workloads of the filters reproduction (seed 001 chapter 6; shared/notes/seed-001.md section 9):
// two replicas of one filter type, a stream of adds split between them, merges every `interval`
// operations, and the false-positive rate of the merged state on fresh keys (Fig 6.1); and the
// encoded size of the states of the memory workloads (Tables 6.1 and 6.2). Pure functions of their
// configuration and seed: filters.bench.ts runs them in child processes and aggregates.
//
// Merges. Both replicas end every merge with the join of the two states. For the plain filters
// (GBF, GCF, ORCF) the merge ships, in each direction, the join of the add-deltas the sender made
// since the previous merge (what anti-entropy with deltas ships) instead of the whole state: the
// receiver's state after it has the same meaning as after a full-state join (same bits; same
// universe of (bucket, fingerprint) pairs; same live tags and history), because right after a
// merge both replicas hold equal states and an add changes the meaning only by its delta. The
// layout is the same too: each shipped cuckoo entry goes where the sender holds it at the merge
// (kicks may have moved it since it was added), which is where a full-state join would put it,
// since that join adds exactly the entries the receiver's universe lacks, at the sender's
// placement. The layout matters: it decides which buckets overflow and so when later adds fail
// (shipping entries where they were first put left 2-3x more overflow at frequent merges, and
// lower loads). A full-state join of a million-entry filter every thousand operations would not
// fit in the time of a run. The scalable series are merged by full-state joins (their joins are pure and
// per sub-filter); the unit test test/unit/filters-bench.test.ts checks the two forms agree.
//
// Keys are 128-bit random byte strings (the seed: 128-bit random integers), from a seeded PRNG.
import { CausalContext } from "../../services/crdt/causal-context.js";
import { makeDot, type Dot } from "../../services/crdt/dot.js";
import { AWSet } from "../../services/crdt/awset.js";
import { AWSetLattice } from "../../services/crdt/awset-lattice.js";
import { altIndex, cuckooParams, type CuckooParams } from "../../services/crdt/cuckoo-table.js";
import { FilterFullError, type Random, randomInt, seededRandom } from "../../services/crdt/filter-common.js";
import { Gbf, GbfLattice, type GbfParams, gbfParamsFor } from "../../services/crdt/gbf.js";
import { Gcf, GcfLattice } from "../../services/crdt/gcf.js";
import type { Lattice } from "../../services/crdt/lattice.js";
import { Orcf, type OrcfEntry, OrcfLattice } from "../../services/crdt/orcf.js";
import {
  ScGbf,
  ScGbfLattice,
  ScGcf,
  ScGcfLattice,
  ScOrcf,
  ScOrcfLattice,
  type SeriesParams,
  seriesParams,
} from "../../services/crdt/scalable-filter.js";
import { gzipSync } from "node:zlib";
import { gcfSeedLayout, orcfSeedLayout } from "./filters-seed-layout.js";

/** The six configurations of seed 001 section 6.1; all target a rate of 1/32. */
export const CONFIGS = ["GBF_5", "GCF_4", "ORCF_4", "ScGBF_5", "ScGCF_4", "ScORCF_4"] as const;
export type ConfigName = (typeof CONFIGS)[number];

/** The seed's workload size, 2^20 operations. */
export const SEED_OPS = 2 ** 20;
export const TARGET_FPR = 1 / 32;
/** The seed's merge intervals (operations of a 2^20 workload); 10^7 > 2^20 means the final merge only. */
export const SEED_INTERVALS = [1e3, 1e4, 1e5, 1e6, 1e7];

/** A run's own interval: the seed's, scaled to its n (the same number of merges per workload). */
export function runInterval(seedInterval: number, n: number): number {
  return Math.max(1, Math.round((seedInterval * n) / SEED_OPS));
}
/** Probe keys drawn at a time (fresh keys for the false-positive rate). */
const PROBE_BATCH = 1 << 16;
/** Replica ids (ORCF tags and AWSet dots). */
export const REPLICAS = ["a", "b"] as const;

// ------------------------------------------------------------------------- keys

/** n random 16-byte keys. */
export function randomKeys(n: number, random: Random): Uint8Array[] {
  const out: Uint8Array[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const b = new Uint8Array(16);
    for (let j = 0; j < 16; j += 4) {
      const v = Math.floor(random() * 4294967296);
      b[j] = v & 0xff;
      b[j + 1] = (v >>> 8) & 0xff;
      b[j + 2] = (v >>> 16) & 0xff;
      b[j + 3] = v >>> 24;
    }
    out[i] = b;
  }
  return out;
}

// ------------------------------------------------------------------------- parameters

/** Cuckoo parameters of GCF_4 / ORCF_4 for a workload of n: n slots (n/4 buckets of 4), l = 8. */
export function cuckooFor(n: number): CuckooParams {
  return cuckooParams(Math.max(1, n / 4), 8, { bucketSize: 4, maxKicks: 500 });
}

export function gbfFor(n: number): GbfParams {
  return gbfParamsFor(n, TARGET_FPR);
}

/** A scalable series for a workload of n: sub-filters of n/4 (cuckoo: n/4 slots), compounded 1/32. */
export function seriesFor(n: number): SeriesParams {
  return seriesParams(n / 4, TARGET_FPR, { bucketSize: 4, maxKicks: 500, buckets: Math.max(1, n / 16) });
}

// ------------------------------------------------------------------------- replicas

/** One filter type driven by the FPR experiment: two replicas, adds, merges, queries. */
export interface Pair {
  /** Add key at replica r; false when the replica's filter reported full (FilterFullError). */
  add(r: 0 | 1, key: Uint8Array): boolean;
  /** Both replicas end with the join of the two states. */
  merge(): void;
  /** Query replica r. */
  contains(r: 0 | 1, key: Uint8Array): boolean;
  /** Stored entries (cuckoo) or estimated elements (Bloom) of replica r, and its overflow entries. */
  stats(r: 0 | 1): { count: number; overflow: number; subFilters: number };
  /** A replica's state as its lattice encodes it (for convergence checks in tests). */
  encoded(r: 0 | 1): Uint8Array;
  /** The two states are equal in the lattice's sense (after a merge). */
  converged(): boolean;
}

function full<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch (e) {
    if (e instanceof FilterFullError) return undefined;
    throw e;
  }
}

/** A pair merged by shipping joined deltas (see the header). */
class DeltaPair<S> implements Pair {
  private readonly states: [S, S];
  private pending: [S, S];
  constructor(
    private readonly L: Lattice<S>,
    private readonly fresh: () => S,
    private readonly addFn: (s: S, r: 0 | 1, key: Uint8Array) => S,
    private readonly joinPending: (acc: S, delta: S) => S,
    private readonly containsFn: (s: S, key: Uint8Array) => boolean,
    private readonly statsFn: (s: S) => { count: number; overflow: number; subFilters: number },
    // Where the sender holds the delta's content now (kicks move entries after they were made):
    // shipped there, the receiver gets the layout a full-state join would give it.
    private readonly relocate: (sender: S, delta: S) => S = (_s, d) => d,
  ) {
    this.states = [fresh(), fresh()];
    this.pending = [fresh(), fresh()];
  }
  add(r: 0 | 1, key: Uint8Array): boolean {
    const d = full(() => this.addFn(this.states[r], r, key));
    if (d === undefined) return false;
    this.pending[r] = this.joinPending(this.pending[r], d);
    return true;
  }
  merge(): void {
    const [d0, d1] = [this.relocate(this.states[0], this.pending[0]), this.relocate(this.states[1], this.pending[1])];
    this.L.joinInPlace(this.states[0], d1);
    this.L.joinInPlace(this.states[1], d0);
    this.pending = [this.fresh(), this.fresh()];
  }
  contains(r: 0 | 1, key: Uint8Array): boolean {
    return this.containsFn(this.states[r], key);
  }
  stats(r: 0 | 1) {
    return this.statsFn(this.states[r]);
  }
  encoded(r: 0 | 1): Uint8Array {
    return this.L.encode(this.states[r]);
  }
  converged(): boolean {
    return this.L.equals(this.states[0], this.states[1]);
  }
}

/** A pair merged by full-state pure joins. */
class StatePair<S> implements Pair {
  private states: [S, S];
  constructor(
    private readonly L: Lattice<S>,
    fresh: () => S,
    private readonly addFn: (s: S, r: 0 | 1, key: Uint8Array) => unknown,
    private readonly containsFn: (s: S, key: Uint8Array) => boolean,
    private readonly statsFn: (s: S) => { count: number; overflow: number; subFilters: number },
  ) {
    this.states = [fresh(), fresh()];
  }
  add(r: 0 | 1, key: Uint8Array): boolean {
    return full(() => this.addFn(this.states[r], r, key)) !== undefined;
  }
  merge(): void {
    const [a, b] = this.states;
    this.states = [this.L.join(a, b), this.L.join(b, a)];
  }
  contains(r: 0 | 1, key: Uint8Array): boolean {
    return this.containsFn(this.states[r], key);
  }
  stats(r: 0 | 1) {
    return this.statsFn(this.states[r]);
  }
  encoded(r: 0 | 1): Uint8Array {
    return this.L.encode(this.states[r]);
  }
  converged(): boolean {
    return this.L.equals(this.states[0], this.states[1]);
  }
}

/**
 * ORCF's pending deltas: add-deltas of distinct fresh tags, so their join is the union of their
 * entries and of their tags. Kept as lists and joined at the merge (joining into an accumulating
 * ORCF costs the accumulator's size per add); the unit test checks it equals the lattice join.
 */
class OrcfPending {
  entries: OrcfEntry[] = [];
  dots: Dot[] = [];
}

class OrcfDeltaPair implements Pair {
  private readonly states: [Orcf, Orcf];
  private pending: [OrcfPending, OrcfPending] = [new OrcfPending(), new OrcfPending()];
  constructor(
    private readonly p: CuckooParams,
    private readonly random: Random,
  ) {
    this.states = [Orcf.empty(p), Orcf.empty(p)];
  }
  add(r: 0 | 1, key: Uint8Array): boolean {
    const d = full(() => this.states[r].addInPlace(key, REPLICAS[r], this.random));
    if (d === undefined) return false;
    for (const e of d.entries()) {
      this.pending[r].entries.push(e);
      this.pending[r].dots.push(makeDot(e.replica, e.t));
    }
    return true;
  }
  /** The join of the pending add-deltas of replica r, each entry where r holds it now (see DeltaPair). */
  pendingDelta(r: 0 | 1): Orcf {
    const q = this.pending[r];
    const s = this.states[r];
    const entries = q.entries.map((e) => ({ ...e, bucket: s.bucketOf(e.replica, e.t) ?? e.bucket }));
    return Orcf.fromParts(this.p, entries, CausalContext.of(q.dots));
  }
  merge(): void {
    const [d0, d1] = [this.pendingDelta(0), this.pendingDelta(1)];
    this.states[0].joinInPlace(d1);
    this.states[1].joinInPlace(d0);
    this.pending = [new OrcfPending(), new OrcfPending()];
  }
  contains(r: 0 | 1, key: Uint8Array): boolean {
    return this.states[r].contains(key);
  }
  stats(r: 0 | 1) {
    return { count: this.states[r].count, overflow: this.states[r].overflowCount(), subFilters: 1 };
  }
  encoded(r: 0 | 1): Uint8Array {
    return OrcfLattice.encode(this.states[r]);
  }
  converged(): boolean {
    return OrcfLattice.equals(this.states[0], this.states[1]);
  }
}

export type MergeForm = "delta" | "state";

/** Two fresh replicas of a configuration for a workload of n operations. */
export function makePair(config: ConfigName, n: number, random: Random, form: MergeForm = "delta"): Pair {
  switch (config) {
    case "GBF_5": {
      const p = gbfFor(n);
      const stats = (s: Gbf) => ({ count: s.cardinality(), overflow: 0, subFilters: 1 });
      if (form === "state") return new StatePair(GbfLattice, () => Gbf.empty(p), (s, _r, k) => s.addInPlace(k), (s, k) => s.contains(k), stats);
      return new DeltaPair<Gbf>(
        GbfLattice,
        () => Gbf.empty(p),
        (s, _r, k) => s.addInPlace(k),
        (acc, d) => (acc.joinInPlace(d), acc),
        (s, k) => s.contains(k),
        stats,
      );
    }
    case "GCF_4": {
      const p = cuckooFor(n);
      const stats = (s: Gcf) => ({ count: s.count, overflow: s.overflowCount(), subFilters: 1 });
      if (form === "state") return new StatePair(GcfLattice, () => Gcf.empty(p), (s, _r, k) => s.addInPlace(k, random), (s, k) => s.contains(k), stats);
      return new DeltaPair<Gcf>(
        GcfLattice,
        () => Gcf.empty(p),
        (s, _r, k) => s.addInPlace(k, random),
        (acc, d) => (acc.joinInPlace(d), acc),
        (s, k) => s.contains(k),
        stats,
        (sender, d) => Gcf.fromEntries(p, d.entries().map(([i, f]) => (sender.has(i, f) ? [i, f] : [altIndex(p, i, f), f]))),
      );
    }
    case "ORCF_4": {
      const p = cuckooFor(n);
      if (form === "state") {
        return new StatePair(
          OrcfLattice,
          () => Orcf.empty(p),
          (s, r, k) => s.addInPlace(k, REPLICAS[r], random),
          (s, k) => s.contains(k),
          (s) => ({ count: s.count, overflow: s.overflowCount(), subFilters: 1 }),
        );
      }
      return new OrcfDeltaPair(p, random);
    }
    case "ScGBF_5": {
      const p = seriesFor(n);
      return new StatePair(ScGbfLattice, () => ScGbf.empty(p), (s, _r, k) => s.addInPlace(k), (s, k) => s.contains(k), (s) => ({
        count: s.cardinality(),
        overflow: 0,
        subFilters: s.subFilters.length,
      }));
    }
    case "ScGCF_4": {
      const p = seriesFor(n);
      return new StatePair(ScGcfLattice, () => ScGcf.empty(p), (s, _r, k) => s.addInPlace(k, random), (s, k) => s.contains(k), (s) => ({
        count: s.cardinality(),
        overflow: s.subFilters.reduce((x, f) => x + f.overflowCount(), 0),
        subFilters: s.subFilters.length,
      }));
    }
    case "ScORCF_4": {
      const p = seriesFor(n);
      return new StatePair(
        ScOrcfLattice,
        () => ScOrcf.empty(p),
        (s, r, k) => s.addInPlace(k, REPLICAS[r], random),
        (s, k) => s.contains(k),
        (s) => ({ count: s.cardinality(), overflow: s.subFilters.reduce((x, f) => x + f.overflowCount(), 0), subFilters: s.subFilters.length }),
      );
    }
  }
}

// ------------------------------------------------------------------------- FPR experiment

/** Share of the operations at replica 0: 1 is "all local" (one replica, never merged). */
export type Split = 1 | 0.99 | 0.8 | 0.5;
export const SPLITS: readonly Split[] = [1, 0.5, 0.8, 0.99];
export function splitName(s: Split): string {
  return s === 1 ? "all local" : `${Math.round(s * 100)}-${Math.round((1 - s) * 100)}`;
}

export interface FprCell {
  config: ConfigName;
  /** Operations (adds) in the workload. */
  n: number;
  split: Split;
  /** Operations between merges (one final merge always follows the last operation). */
  interval: number;
  probes: number;
  seed: number;
  form?: MergeForm;
}

export interface FprResult {
  config: ConfigName;
  n: number;
  split: Split;
  interval: number;
  seed: number;
  fpr: number;
  /** Fresh keys probed. */
  probes: number;
  merges: number;
  /** Adds not applied because the replica had reported full (cuckoo types stop after a failure). */
  dropped: number;
  /** Entries (or estimated elements) of the merged state over n, and its overflow entries over n. */
  load: number;
  overflow: number;
  subFilters: number;
  falseNegatives: number;
  seconds: number;
}

/**
 * One run: n adds, each to replica 0 with probability split (else replica 1); a replica whose
 * filter reported full receives no further adds (seed 001 section 6.2); a merge after every
 * `interval` operations and a final one; then the rate of positives on `probes` fresh keys.
 */
export function runFprCell(c: FprCell): FprResult {
  const t0 = process.hrtime.bigint();
  const random = seededRandom(c.seed);
  const keys = randomKeys(c.n, random);
  const pair = makePair(c.config, c.n, seededRandom(c.seed ^ 0x2545f491), c.form ?? "delta");
  const isFull = [false, false];
  const local = c.split === 1;
  let merges = 0;
  let dropped = 0;
  const added: Uint8Array[] = [];
  for (let i = 0; i < c.n; i++) {
    const r: 0 | 1 = local || random() < c.split ? 0 : 1;
    if (isFull[r]) dropped++;
    else if (pair.add(r, keys[i]!)) added.push(keys[i]!);
    else {
      isFull[r] = true;
      dropped++;
    }
    if (!local && (i + 1) % c.interval === 0 && i + 1 < c.n) {
      pair.merge();
      merges++;
    }
  }
  if (!local) {
    pair.merge();
    merges++;
  }
  // Fresh keys, drawn a batch at a time so millions of probes stay within bounded memory.
  let positives = 0;
  const probeRandom = seededRandom(c.seed ^ 0x7f4a7c15);
  for (let done = 0; done < c.probes; ) {
    const batch = randomKeys(Math.min(PROBE_BATCH, c.probes - done), probeRandom);
    for (const k of batch) if (pair.contains(0, k)) positives++;
    done += batch.length;
  }
  // No false negatives: every applied add must still be found (a sample, to bound the cost).
  let falseNegatives = 0;
  const step = Math.max(1, Math.floor(added.length / 4096));
  for (let i = 0; i < added.length; i += step) if (!pair.contains(0, added[i]!)) falseNegatives++;
  const st = pair.stats(0);
  return {
    config: c.config,
    n: c.n,
    split: c.split,
    interval: c.interval,
    seed: c.seed,
    fpr: positives / c.probes,
    probes: c.probes,
    merges,
    dropped,
    load: st.count / c.n,
    overflow: st.overflow / c.n,
    subFilters: st.subFilters,
    falseNegatives,
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
  };
}

// ------------------------------------------------------------------------- memory tables

/** Table 6.1 (grow-only) and 6.2 (observed-remove) types. */
export type MemType = "GBF_5" | "GCF_4" | "ORCF_4" | "AWSET";

export interface MemCell {
  type: MemType;
  n: number;
  /** Share of adds among the operations: 1, 0.8 or 0.51 (the rest remove present elements). */
  addShare: number;
  /** true: 50-50 split over two replicas merged once at the end; false: all local. */
  split: boolean;
  seed: number;
  /** AWSET only: which table it stands in for (grow-only G-Set or OR-Set), for labelling. */
  table: "6.1" | "6.2";
}

export interface MemResult extends MemCell {
  /** Stored elements (entries, or adds for the Bloom filter) over n: the tables' "Load". */
  load: number;
  stored: number;
  raw: number;
  gzip: number;
  /** GCF_4 / ORCF_4: the size of the same state in the seed's own layout (filters-seed-layout.ts), raw and gzip. */
  seedRaw?: number;
  seedGzip?: number;
  overflow: number;
  seconds: number;
}

/** The state a replica of a memory workload keeps, with its lattice and its operations. */
class MemReplica<S> {
  /** Adds applied here and at replicas merged in (the Bloom filter's stored elements). */
  adds = 0;
  constructor(
    private readonly L: Lattice<S>,
    readonly s: S,
    private readonly addFn: (s: S, k: Uint8Array) => boolean,
    private readonly removeFn: ((s: S, k: Uint8Array) => void) | null,
    private readonly storedFn: (s: S, adds: number) => number,
    private readonly overflowFn: (s: S) => number,
  ) {}
  add(k: Uint8Array): boolean {
    const ok = this.addFn(this.s, k);
    if (ok) this.adds++;
    return ok;
  }
  remove(k: Uint8Array): void {
    if (this.removeFn === null) throw new Error(`${this.L.name} has no remove`);
    this.removeFn(this.s, k);
  }
  join(other: MemReplica<S>): void {
    this.L.joinInPlace(this.s, other.s);
    this.adds += other.adds;
  }
  stored(): number {
    return this.storedFn(this.s, this.adds);
  }
  overflow(): number {
    return this.overflowFn(this.s);
  }
  encode(): Uint8Array {
    return this.L.encode(this.s);
  }
}

function memReplica(type: MemType, n: number, replica: string, random: Random): MemReplica<never> {
  const none = () => 0;
  let r: MemReplica<never>;
  switch (type) {
    case "GBF_5":
      r = new MemReplica<Gbf>(GbfLattice, Gbf.empty(gbfFor(n)), (s, k) => (s.addInPlace(k), true), null, (_s, adds) => adds, none) as never;
      break;
    case "GCF_4":
      r = new MemReplica<Gcf>(GcfLattice, Gcf.empty(cuckooFor(n)), (s, k) => full(() => s.addInPlace(k, random)) !== undefined, null, (s) => s.count, (s) => s.overflowCount()) as never;
      break;
    case "ORCF_4":
      r = new MemReplica<Orcf>(
        OrcfLattice,
        Orcf.empty(cuckooFor(n)),
        (s, k) => full(() => s.addInPlace(k, replica, random)) !== undefined,
        (s, k) => void s.removeInPlace(k, random),
        (s) => s.count,
        (s) => s.overflowCount(),
      ) as never;
      break;
    case "AWSET":
      r = new MemReplica<AWSet>(
        AWSetLattice,
        AWSet.bottom(),
        (s, k) => (s.joinInPlace(s.addDelta(replica, [k])), true),
        (s, k) => void s.joinInPlace(s.removeDelta([k])),
        (s) => s.size,
        none,
      ) as never;
      break;
  }
  return r;
}

/** The seed's serialised layout of a cuckoo state (undefined for the other types). */
function seedLayoutOf(type: MemType, state: unknown): Uint8Array | undefined {
  if (type === "GCF_4") {
    const g = state as Gcf;
    return gcfSeedLayout(g.params!, g.entries());
  }
  if (type === "ORCF_4") {
    const o = state as Orcf;
    return orcfSeedLayout(
      o.params!,
      o.entries().map((e) => ({ bucket: e.bucket, fp: e.fp, replica: REPLICAS.indexOf(e.replica as (typeof REPLICAS)[number]), t: e.t })),
    );
  }
  return undefined;
}

/**
 * One memory run: n operations, a share addShare of them adds of fresh keys and the rest removes
 * of a uniformly chosen element present at that replica (an operation that finds nothing to
 * remove adds instead; a cuckoo filter that reported full receives no further adds). With split,
 * operations alternate at random between two replicas, merged once at the end. Sizes are of the
 * (merged) state's lattice encoding, raw and gzip (node:zlib, default level).
 */
export function runMemCell(c: MemCell): MemResult {
  const t0 = process.hrtime.bigint();
  const random = seededRandom(c.seed);
  const keys = randomKeys(c.n, random);
  const reps = c.split ? [0, 1].map((r) => memReplica(c.type, c.n, REPLICAS[r]!, seededRandom(c.seed ^ (0x51ed27 + r)))) : [memReplica(c.type, c.n, REPLICAS[0], seededRandom(c.seed ^ 0x51ed27))];
  const present: Uint8Array[][] = reps.map(() => []);
  const isFull = reps.map(() => false);
  let next = 0;
  for (let i = 0; i < c.n; i++) {
    const r = c.split && random() >= 0.5 ? 1 : 0;
    const live = present[r]!;
    if (random() >= c.addShare && live.length > 0) {
      const j = randomInt(random, live.length);
      const k = live[j]!;
      live[j] = live[live.length - 1]!;
      live.pop();
      reps[r]!.remove(k);
      continue;
    }
    const k = keys[next++]!;
    if (isFull[r]) continue;
    if (reps[r]!.add(k)) live.push(k);
    else isFull[r] = true;
  }
  if (c.split) reps[0]!.join(reps[1]!);
  const s = reps[0]!;
  const bytes = s.encode();
  const gz = gzipSync(bytes).length;
  const stored = s.stored();
  const seed = seedLayoutOf(c.type, s.s);
  return {
    ...c,
    stored,
    load: stored / c.n,
    raw: bytes.length,
    gzip: gz,
    ...(seed === undefined ? {} : { seedRaw: seed.length, seedGzip: gzipSync(seed).length }),
    overflow: s.overflow() / c.n,
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
  };
}
