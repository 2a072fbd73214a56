// The simulator of seed 000's evaluation (§5.2, digest section 6.1): replicas that each hold a
// probabilistic add-wins set (services/crdt/awset-prob-state.ts, tombstones in an APBF) and, as a
// deterministic shadow, the exact add-wins set (services/crdt/awset.ts). Every operation is applied
// to both halves of the origin replica; after it the two halves' value sets are compared.
//
// Setup, as the digest gives it:
//  - complete graph; a sync is a full-state, unidirectional pull: the origin joins the whole state
//    of a target drawn uniformly from the other active replicas (it fails with fewer than 2);
//  - dynamicity: static; intermediate (each iteration, with probability = churn rate, a uniformly
//    drawn active replica leaves for good and a brand-new empty one, with a new identity, takes its
//    place); dynamic (each iteration 10% a replica leaves, 80% nothing, 10% one joins: a retired
//    replica is revived when there is one, else a new one is created);
//  - an iteration: apply the network change, draw the origin (uniform, or Zipf with exponent 1.03
//    over the active replicas' positions), draw the operation by weight: sync share X%, the rest
//    split evenly between add and remove;
//  - add: a random 64-bit value ([ref-code]); its old entries, if any, become tombstones; the exact
//    half mints a (replica, counter) dot, the probabilistic half a random 64-bit dot;
//  - remove: a uniformly drawn present value of the exact half ([ref-code]; the seed's text says of
//    the probabilistic half; `removeFrom` switches); fails on an empty set;
//  - error determination (§5.2.3): classic exclusives (values only the exact half holds) come from
//    false positives, probabilistic exclusives (values only the probabilistic half holds) from
//    forgotten dots. Each replica keeps its last exclusive sets; an operation creates a new
//    inconsistency when a value appears in an exclusive set that was not in it before. The metric:
//    % of syncs that create new inconsistencies, split by cause.
//
// Local mutations. The probabilistic half is only changed through its public API: the pure delta
// mutators' shape joined in with joinInPlace. For a remove the tombstone filter of the delta is
// ALIGNED with the local filter (same base, hash indices and generation count) before the removed
// dots are inserted into it; the join then inserts each removed dot into the local filter on its own
// (awset-prob-state.ts step (a)) and the union adds no further bit, so a local remove is exactly
// "insert the dots into the local filter and drop them from the store", as in the seed's simulator.
// (A fresh, unaligned delta filter would, under Whole Filter, OR its slots 0..k-1 into whatever
// local slices sit at those physical slots, polluting old generations; the seed never does that.)
// New probabilistic dots are redrawn while the local filter would swallow them (isFreshDot, the
// module's contract), at most MAX_DOT_DRAWS times; the redraws are counted.
//
// Deterministic: everything is drawn from seeded generators (services/common/prng.ts). Every loop is
// bounded by the iteration count (and, for fixed-sync-count runs, by maxIterations).
import { Apbf } from "../../services/crdt/apbf.js";
import { type ApbfParams, UnionStrategy, paramsFor, strategyName } from "../../services/crdt/apbf-params.js";
import { AWSet, type ElementKey, elementKey } from "../../services/crdt/awset.js";
import { AWSetProb, type ProbDot, dotBytes } from "../../services/crdt/awset-prob-state.js";
import { type Random, randomInt, seededRandom } from "../../services/common/prng.js";
import { type CopyUnionRule, type FillRule, type SeedJoinRule, SeedProbHalf, type ShadowRule } from "./prob-seed-rules.js";

export type Load = "uniform" | "zipf";
export type Dynamicity =
  | { kind: "static" }
  | { kind: "intermediate"; churn: number }
  | { kind: "dynamic"; leave: number; join: number };

export interface SimConfig {
  replicas: number;
  /** Iterations to run (for fixed-sync-count runs: the cap, see syncCount). */
  iterations: number;
  /** Fraction of operations that are syncs; the rest split evenly between add and remove. */
  syncShare: number;
  error: number;
  capacity: number;
  level: number;
  strategy: UnionStrategy;
  load: Load;
  zipfExponent: number;
  dynamicity: Dynamicity;
  seed: number;
  /** Which half a remove draws its value from ("classic": [ref-code]; "probabilistic": the seed's text). */
  removeFrom: "classic" | "probabilistic";
  /** When set: stop after this many syncs (Fig 5.9), still at most `iterations` iterations. */
  syncCount?: number;
  /** Probe the state (exclusive shares, filter FP estimate) every this many iterations. */
  probeEvery: number;
  /**
   * Rules of the probabilistic half: "seed" = the seed's own (prob-seed-rules.ts: fill-driven
   * generations, its union strategies and tombstone join, no dot redraws), the reproduction;
   * "type" = the AWSetProb type of services/crdt as implemented.
   */
  rules: "seed" | "type";
  /** Seed rules only: step (a) of the join ("tombstone": the seed's simulator; "alg3": test d ∉ m' first). */
  seedJoin: SeedJoinRule;
  /** Seed rules only: how the fill check reads Eq. 4 (prob-seed-rules.ts FillRule). */
  fillRule: FillRule;
  /** Seed rules, Current Generation only: what an insertion writes into the current-generation copy (prob-seed-rules.ts ShadowRule). */
  shadowRule: ShadowRule;
  /** Seed rules, Current Generation only: whether a union passes the remote's copy on (prob-seed-rules.ts CopyUnionRule). */
  copyUnion: CopyUnionRule;
}

export const SEED_SETUP = {
  replicas: 16,
  iterations: 20_000,
  capacity: 4096,
  level: 5,
  zipfExponent: 1.03,
  dynamicity: { kind: "intermediate", churn: 0.01 } as Dynamicity,
  removeFrom: "classic" as const,
  probeEvery: 100,
  rules: "seed" as "seed" | "type",
  // The readings the thesis leaves open (prob-seed-rules.ts), as its cited code reads them: the
  // simulator's tombstone join, the APBF's insertion-count fill limit and new-bits copy, with the
  // APBF's transitive copy line on (the one combination that reproduces the thesis' Current
  // Generation figures; bench:prob reports the others).
  seedJoin: "tombstone" as SeedJoinRule,
  fillRule: "insertions" as FillRule,
  shadowRule: "newBits" as ShadowRule,
  copyUnion: "passOn" as CopyUnionRule,
};

export interface SimResult {
  config: SimConfig & { strategyName: string; params: ApbfParams };
  iterations: number;
  syncs: number;
  failedSyncs: number;
  adds: number;
  removes: number;
  failedRemoves: number;
  /** Syncs after which the origin had a value in an exclusive set that was not there before. */
  badSyncs: number;
  /** ... a new classic exclusive (a value lost to a false positive). */
  fpSyncs: number;
  /** ... a new probabilistic exclusive (a value kept or brought back by a forgotten dot). */
  forgottenSyncs: number;
  /** Values newly appearing in exclusive sets at syncs (totals, Fig 5.11). */
  newClassicExclusives: number;
  newProbExclusives: number;
  /** New inconsistencies created by adds or removes (the seed: only syncs create them; expected 0). */
  newOutsideSyncs: number;
  badSyncPct: number;
  fpSyncPct: number;
  forgottenSyncPct: number;
  /** Mean over probes of Σ|probabilistic exclusives| / Σ|probabilistic store| over active replicas, in %. */
  probExclusiveStatePct: number;
  /** Mean over probes of Σ|classic exclusives| / Σ|classic store|, in %. */
  classicExclusiveStatePct: number;
  /** Mean over probes of the mean classic store size of the active replicas. */
  meanStoreSize: number;
  /** Mean over probes of the mean estimated FP rate of the active replicas' filters. */
  meanEstimatedFp: number;
  /** Probabilistic dots redrawn because the local filter reported them. */
  dotRedraws: number;
  /** Replicas ever created (identities). */
  identities: number;
  seconds: number;
}

const MAX_DOT_DRAWS = 64;

/** The probabilistic half of a replica, under either rule set. */
export interface ProbHalf {
  readonly size: number;
  values(): Iterable<ElementKey>;
  hasValue(k: ElementKey): boolean;
  /** A dot for a new add from `draw`, and how many draws were rejected. */
  newDot(draw: () => bigint): { dot: ProbDot; redraws: number };
  add(k: ElementKey, d: ProbDot): void;
  remove(k: ElementKey): void;
  join(remote: ProbHalf): void;
  readonly tombstones: Apbf;
}

/** The AWSetProb type as implemented (local mutations through probAdd/probRemove below). */
export class TypeProbHalf implements ProbHalf {
  constructor(readonly state: AWSetProb) {}
  get size(): number {
    return this.state.size;
  }
  get tombstones(): Apbf {
    return this.state.tombstones;
  }
  values(): Iterable<ElementKey> {
    return this.state.entries.keys();
  }
  hasValue(k: ElementKey): boolean {
    return this.state.entries.has(k);
  }
  /** Redrawn while the local filter reports the dot (AWSetProb.isFreshDot), at most MAX_DOT_DRAWS times. */
  newDot(draw: () => bigint): { dot: ProbDot; redraws: number } {
    let d = draw();
    let redraws = 0;
    while (!this.state.isFreshDot(d)) {
      if (++redraws >= MAX_DOT_DRAWS) throw new Error(`no fresh dot in ${MAX_DOT_DRAWS} draws`);
      d = draw();
    }
    return { dot: d, redraws };
  }
  add(k: ElementKey, d: ProbDot): void {
    probAdd(this.state, k, d);
  }
  remove(k: ElementKey): void {
    probRemove(this.state, k);
  }
  join(remote: ProbHalf): void {
    this.state.joinInPlace((remote as TypeProbHalf).state);
  }
}

/** The seed's rules (prob-seed-rules.ts): a random dot is used as drawn (§5.2.2). */
export class SeedHalf implements ProbHalf {
  constructor(readonly state: SeedProbHalf) {}
  get size(): number {
    return this.state.size;
  }
  get tombstones(): Apbf {
    return this.state.tombstones;
  }
  values(): Iterable<ElementKey> {
    return this.state.values();
  }
  hasValue(k: ElementKey): boolean {
    return this.state.hasValue(k);
  }
  newDot(draw: () => bigint): { dot: ProbDot; redraws: number } {
    return { dot: draw(), redraws: 0 };
  }
  add(k: ElementKey, d: ProbDot): void {
    this.state.add(k, d);
  }
  remove(k: ElementKey): void {
    this.state.remove(k);
  }
  join(remote: ProbHalf): void {
    this.state.join((remote as SeedHalf).state);
  }
}

interface Replica {
  id: string;
  classic: AWSet;
  prob: ProbHalf;
  /** Values only the exact half held after the last operation here. */
  classicExcl: Set<ElementKey>;
  /** Values only the probabilistic half held after the last operation here. */
  probExcl: Set<ElementKey>;
}

/** Cumulative Zipf weights P(rank i) ∝ 1/i^s over n ranks. */
export function zipfCdf(n: number, s: number): Float64Array {
  const cdf = new Float64Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    total += 1 / (i + 1) ** s;
    cdf[i] = total;
  }
  for (let i = 0; i < n; i++) cdf[i] = cdf[i]! / total;
  return cdf;
}

function drawZipf(cdf: Float64Array, u: number): number {
  for (let i = 0; i < cdf.length; i++) if (u < cdf[i]!) return i;
  return cdf.length - 1;
}

/** A uniformly random 64-bit value from two 32-bit draws. */
function random64(rng: Random): bigint {
  const hi = BigInt(Math.floor(rng() * 4294967296));
  const lo = BigInt(Math.floor(rng() * 4294967296));
  return (hi << 32n) | lo;
}

function keyOf(v: bigint): ElementKey {
  return elementKey(dotBytes(v));
}

/**
 * A tombstone filter holding `dots`, aligned with `local` (same base, hash indices and generation
 * count), so that joining it after the join's own insertions adds no further bit (see the header).
 */
export function alignedTombstones(local: Apbf, dots: readonly ProbDot[]): Apbf {
  const f = Apbf.create(local.params);
  f.hashIndex.set(local.hashIndex);
  f.base = local.base;
  f.count = local.count;
  for (const d of [...dots].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) f.insert(dotBytes(d));
  return f;
}

/** Remove an element from a probabilistic state in place: its dots become local tombstones. */
export function probRemove(s: AWSetProb, key: ElementKey): void {
  const dots = s.entries.get(key);
  if (dots === undefined || dots.size === 0) return;
  s.joinInPlace(AWSetProb.fromParts(new Map(), alignedTombstones(s.tombstones, [...dots])));
}

/** Add an element with dot d to a probabilistic state in place; old dots of it become tombstones. */
export function probAdd(s: AWSetProb, key: ElementKey, d: ProbDot): void {
  const old = [...(s.entries.get(key) ?? [])];
  const filter = old.length > 0 ? alignedTombstones(s.tombstones, old) : Apbf.create(s.params);
  s.joinInPlace(AWSetProb.fromParts(new Map([[key, new Set([d])]]), filter));
}

/** Compare the halves of r; update its exclusive sets; count the values new to them. */
export function compareHalves(r: Replica): { newClassic: number; newProb: number } {
  const classicExcl = new Set<ElementKey>();
  const probExcl = new Set<ElementKey>();
  for (const k of r.classic.entries.keys()) if (!r.prob.hasValue(k)) classicExcl.add(k);
  for (const k of r.prob.values()) if (!r.classic.entries.has(k)) probExcl.add(k);
  let newClassic = 0;
  let newProb = 0;
  for (const k of classicExcl) if (!r.classicExcl.has(k)) newClassic++;
  for (const k of probExcl) if (!r.probExcl.has(k)) newProb++;
  r.classicExcl = classicExcl;
  r.probExcl = probExcl;
  return { newClassic, newProb };
}

export function runSim(config: SimConfig): SimResult {
  const t0 = process.hrtime.bigint();
  const params = paramsFor(config.error, config.capacity, config.level, config.strategy);
  const rng = seededRandom(config.seed);
  const valueRng = seededRandom(config.seed ^ 0x5eed_0001);
  const dotRng = seededRandom(config.seed ^ 0x5eed_0002);
  let identities = 0;
  const newReplica = (): Replica => ({
    id: `r${identities++}`,
    classic: AWSet.bottom(),
    prob: config.rules === "seed" ? new SeedHalf(new SeedProbHalf(params, config.seedJoin, config.fillRule, config.shadowRule, config.copyUnion)) : new TypeProbHalf(AWSetProb.bottom(params)),
    classicExcl: new Set(),
    probExcl: new Set(),
  });
  const active: Replica[] = [];
  for (let i = 0; i < config.replicas; i++) active.push(newReplica());
  const retired: Replica[] = [];
  const zipf = new Map<number, Float64Array>();
  const zipfFor = (n: number) => {
    let c = zipf.get(n);
    if (c === undefined) zipf.set(n, (c = zipfCdf(n, config.zipfExponent)));
    return c;
  };
  const addShare = (1 - config.syncShare) / 2;

  const out = {
    syncs: 0, failedSyncs: 0, adds: 0, removes: 0, failedRemoves: 0,
    badSyncs: 0, fpSyncs: 0, forgottenSyncs: 0, newClassicExclusives: 0, newProbExclusives: 0,
    newOutsideSyncs: 0, dotRedraws: 0,
  };
  let probes = 0;
  let probExclSum = 0;
  let classicExclSum = 0;
  let storeSum = 0;
  let fpSum = 0;

  let it = 0;
  for (; it < config.iterations; it++) {
    if (config.syncCount !== undefined && out.syncs >= config.syncCount) break;
    // 1. Network change.
    const dyn = config.dynamicity;
    // A replica that joins takes a uniformly drawn position of the active list, i.e. a random Zipf
    // rank: the seed is silent on ranks; its simulator ranks replicas in the iteration order of a
    // hash set of ids, where a new id lands at a hash-determined place.
    const join = (r: Replica) => active.splice(randomInt(rng, active.length + 1), 0, r);
    if (dyn.kind === "intermediate") {
      if (active.length > 0 && rng() < dyn.churn) {
        active.splice(randomInt(rng, active.length), 1);
        join(newReplica());
      }
    } else if (dyn.kind === "dynamic") {
      const u = rng();
      if (u < dyn.leave) {
        if (active.length > 0) retired.push(active.splice(randomInt(rng, active.length), 1)[0]!);
      } else if (u >= 1 - dyn.join) {
        join(retired.length > 0 ? retired.splice(randomInt(rng, retired.length), 1)[0]! : newReplica());
      }
    }
    if (config.probeEvery > 0 && it % config.probeEvery === 0 && active.length > 0) {
      let probExcl = 0, probSize = 0, classicExcl = 0, classicSize = 0, fp = 0;
      for (const r of active) {
        compareHalves(r); // brings the exclusive sets up to date (churned-in replicas are empty)
        probExcl += r.probExcl.size;
        probSize += r.prob.size;
        classicExcl += r.classicExcl.size;
        classicSize += r.classic.size;
        fp += r.prob.tombstones.estimatedFp();
      }
      probes++;
      probExclSum += probSize > 0 ? probExcl / probSize : 0;
      classicExclSum += classicSize > 0 ? classicExcl / classicSize : 0;
      storeSum += classicSize / active.length;
      fpSum += fp / active.length;
    }
    if (active.length === 0) continue;
    // 2. Origin.
    const origin = active[config.load === "zipf" ? drawZipf(zipfFor(active.length), rng()) : randomInt(rng, active.length)]!;
    // 3. Operation.
    const u = rng();
    if (u < config.syncShare) {
      if (active.length < 2) {
        out.failedSyncs++;
        continue;
      }
      let ti = randomInt(rng, active.length - 1);
      if (active[ti] === origin) ti = active.length - 1; // uniform over the others
      const target = active[ti]!;
      origin.classic.joinInPlace(target.classic);
      origin.prob.join(target.prob);
      out.syncs++;
      const { newClassic, newProb } = compareHalves(origin);
      if (newClassic > 0 || newProb > 0) out.badSyncs++;
      if (newClassic > 0) out.fpSyncs++;
      if (newProb > 0) out.forgottenSyncs++;
      out.newClassicExclusives += newClassic;
      out.newProbExclusives += newProb;
    } else if (u < config.syncShare + addShare) {
      const v = random64(valueRng);
      const el = dotBytes(v);
      const key = keyOf(v);
      origin.classic.joinInPlace(origin.classic.addDelta(origin.id, [el]));
      const { dot, redraws } = origin.prob.newDot(() => random64(dotRng));
      out.dotRedraws += redraws;
      origin.prob.add(key, dot);
      out.adds++;
      const { newClassic, newProb } = compareHalves(origin);
      out.newOutsideSyncs += newClassic + newProb;
    } else {
      const from = config.removeFrom === "classic" ? origin.classic.entries.keys() : origin.prob.values();
      const fromSize = config.removeFrom === "classic" ? origin.classic.size : origin.prob.size;
      if (fromSize === 0) {
        out.failedRemoves++;
        continue;
      }
      let n = randomInt(rng, fromSize);
      let key: ElementKey | undefined;
      for (const k of from) if (n-- === 0) { key = k; break; }
      const el = Buffer.from(key!, "latin1");
      origin.classic.joinInPlace(origin.classic.removeDelta([el]));
      origin.prob.remove(key!);
      out.removes++;
      const { newClassic, newProb } = compareHalves(origin);
      out.newOutsideSyncs += newClassic + newProb;
    }
  }
  const pct = (x: number) => (out.syncs > 0 ? (100 * x) / out.syncs : NaN);
  return {
    config: { ...config, strategyName: strategyName(config.strategy), params },
    iterations: it,
    ...out,
    badSyncPct: pct(out.badSyncs),
    fpSyncPct: pct(out.fpSyncs),
    forgottenSyncPct: pct(out.forgottenSyncs),
    probExclusiveStatePct: probes > 0 ? (100 * probExclSum) / probes : NaN,
    classicExclusiveStatePct: probes > 0 ? (100 * classicExclSum) / probes : NaN,
    meanStoreSize: probes > 0 ? storeSum / probes : NaN,
    meanEstimatedFp: probes > 0 ? fpSum / probes : NaN,
    identities,
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
  };
}

/** A seed-setup configuration with the given variable parts. */
export function seedConfig(over: Partial<SimConfig> & Pick<SimConfig, "syncShare" | "error" | "strategy" | "load" | "seed">): SimConfig {
  return { ...SEED_SETUP, ...over };
}

export { UnionStrategy, strategyName };
