// The replicated Forgetful Bloom Filter: the FBF of seed 003 as a join-semilattice, so that a
// retry reaching another replica of a counter is still recognised (issue 17; the seed's own
// per-replica FBFs diverge, digest of seed 003, §12 item 5).
//
// Generations are epochs of a fixed period P: epoch(t) = floor(t / P). Every node agrees which
// filter is "present" without coordination. At local epoch e the seed's filters map to epochs:
// future = e+1, present = e, past_1 = e-1 ... past_N = e-N.
//
// State: parameters (m, k, hash family, P, N) and a map epoch -> Bloom filter bits. Join is the
// bitwise OR per epoch. insert(id, now) sets the id's k bits in epochs e and e+1 and returns a delta
// carrying exactly those bits (all k per epoch, even bits already set locally: a receiver may not
// hold them). contains(id, now) is the seed's corrected Alg 2 over epochs e+1 .. e-N.
//
// Forgetting. prune(now) drops epochs older than e-N. Pruning is not monotone, so over time the
// structure is not a lattice (like the seed's forgetting); for a fixed now, join, leq, decompose
// and difference are the lattice of the powerset of (epoch, bit) pairs. joinAt(a, b, now) ignores
// epochs the receiver has already forgotten instead of resurrecting them.
//
// Retention and clock skew. B bounds how far apart any two nodes' clocks read at the same instant
// (if each clock is within B' of true time, B = 2·B'), with B < P. Let t and t' be instants of
// reference time. An id inserted on any node at t is found on every node that has its delta at
// every t' in [t, t + (N+1)·P - B). Why: the inserter's clock reads s at t, with I = floor(s/P),
// and the id's bits are in epochs I and I+1. A checker at local epoch e finds them for
// I-1 <= e <= I+N+1, that is for local times in [(I-1)·P, (I+N+2)·P), and (I+N+2)·P > s + (N+1)·P.
// At t' its clock reads at most s + (t' - t) + B, below s + (N+1)·P inside the window (and at least
// s - B >= (I-1)·P, since B < P). The edge is tight to the millisecond: with s = (I+1)·P - 1 and a
// checker B ahead, the id is gone at t' = t + (N+1)·P - B + 1. On one clock (B = 0) this is
// retentionMs = (N+1)·P. skewReport (replicated-fbf-skew.ts) flags deltas whose epochs put the
// sender further than B from the local clock.
//
// The state travels inside a counter key, not as an object type of its own: the lattice has type
// OBJECT_TYPE_UNSPECIFIED and is not registered.
//
// Files: replicated-fbf-params.ts (parameters, epochs, bit helpers), replicated-fbf-codec.ts (the
// bytes), replicated-fbf-skew.ts (skew reports); this file holds the state and the lattice and
// re-exports the public names of the others.
import { CausalContext } from "./causal-context.js";
import { bloomIndexes } from "./element-hash.js";
import { type FbfId, eq43, idBytes } from "./fbf.js";
import { type Lattice, ObjectType } from "./lattice.js";
import { decodeReplicatedFbf, encodedSizeReplicatedFbf, encodeReplicatedFbf } from "./replicated-fbf-codec.js";
import {
  type ReplicatedFbfParams,
  FbfParamsMismatchError,
  checkNow,
  epochOf,
  hasBit,
  isZero,
  paramsProblem,
  popcount,
  sameParams,
} from "./replicated-fbf-params.js";

export { type ReplicatedFbfParams, FbfParamsMismatchError, epochOf, retentionMs, sameParams } from "./replicated-fbf-params.js";
export { FBF_CODEC_VERSION } from "./replicated-fbf-codec.js";
export { type SkewReport, skewReport } from "./replicated-fbf-skew.js";

/**
 * A replicated FBF state (or delta). params is null only in the bottom of the lattice, which joins
 * with states of any parameters. Invariant: no epoch holds an all-zero filter.
 */
export class ReplicatedFbf {
  constructor(
    public params: ReplicatedFbfParams | null,
    readonly epochs: Map<number, Uint8Array> = new Map(),
  ) {}

  static empty(params: ReplicatedFbfParams): ReplicatedFbf {
    const why = paramsProblem(params);
    if (why !== undefined) throw new RangeError(why);
    return new ReplicatedFbf({ ...params });
  }

  private p(): ReplicatedFbfParams {
    if (this.params === null) throw new RangeError("the bottom state has no parameters: start from ReplicatedFbf.empty");
    return this.params;
  }

  private indexes(id: FbfId): number[] {
    const p = this.p();
    return bloomIndexes(idBytes(id), p.k, p.m);
  }

  /** The delta of inserting id at now: its k bits in the present and the future epoch. Pure. */
  insertDelta(id: FbfId, now: number): ReplicatedFbf {
    checkNow(now);
    const p = this.p();
    const e = epochOf(now, p.periodMs);
    const bits = new Uint8Array(Math.ceil(p.m / 8));
    for (const i of this.indexes(id)) bits[i >>> 3]! |= 1 << (i & 7);
    return new ReplicatedFbf(p, new Map([[e, bits], [e + 1, bits.slice()]]));
  }

  /** Insert id at now into this state and return the delta to ship to the other replicas. */
  insert(id: FbfId, now: number): ReplicatedFbf {
    const d = this.insertDelta(id, now);
    ReplicatedFbfLattice.joinInPlace(this, d);
    return d;
  }

  /**
   * The seed's Alg 1 for a counter update: a member is a retry (nothing inserted, delta null);
   * otherwise the id is inserted and its delta returned.
   */
  checkAndInsert(id: FbfId, now: number): { duplicate: boolean; delta: ReplicatedFbf | null } {
    if (this.contains(id, now)) return { duplicate: true, delta: null };
    return { duplicate: false, delta: this.insert(id, now) };
  }

  /** Corrected Alg 2 over epochs e+1 (future), e (present), e-1 .. e-N (past). */
  contains(id: FbfId, now: number): boolean {
    checkNow(now);
    if (this.params === null) return false;
    const idx = this.indexes(id);
    const e = epochOf(now, this.params.periodMs);
    const has = (ep: number) => {
      const bits = this.epochs.get(ep);
      return bits !== undefined && idx.every((i) => hasBit(bits, i));
    };
    if (has(e + 1)) return true;
    let prev = has(e);
    for (let j = 1; j <= this.params.pastEpochs; j++) {
      const cur = has(e - j);
      if (prev && cur) return true;
      prev = cur;
    }
    return prev; // the oldest retained epoch alone
  }

  /**
   * Eq 4.3 of seed 003 with p(B) = (bits set / m)^k per epoch filter. Replicas do not know how many
   * ids each filter holds (a delta may carry several, and duplicates are absorbed), but the fill
   * ratio gives the same per-filter estimate without counts.
   */
  fppEstimate(now: number): number {
    checkNow(now);
    if (this.params === null) return 0;
    const { m, k, periodMs, pastEpochs } = this.params;
    const e = epochOf(now, periodMs);
    const ps: number[] = [];
    for (let ep = e + 1; ep >= e - pastEpochs; ep--) {
      const bits = this.epochs.get(ep);
      ps.push(bits === undefined ? 0 : Math.pow(popcount(bits) / m, k));
    }
    return eq43(ps);
  }
}

/** The epochs a node at now still retains: [e-N, +inf). Later epochs come from skewed peers. */
function oldestRetained(p: ReplicatedFbfParams, now: number): number {
  return epochOf(now, p.periodMs) - p.pastEpochs;
}

/** s without the epochs older than the retention window at now. Pure (shares the kept arrays). */
export function prune(s: ReplicatedFbf, now: number): ReplicatedFbf {
  checkNow(now);
  if (s.params === null) return s;
  const lo = oldestRetained(s.params, now);
  return new ReplicatedFbf(s.params, new Map([...s.epochs].filter(([e]) => e >= lo)));
}

/** Prune in place; true when something was dropped. */
export function pruneInPlace(s: ReplicatedFbf, now: number): boolean {
  checkNow(now);
  if (s.params === null) return false;
  const lo = oldestRetained(s.params, now);
  let dropped = false;
  for (const e of [...s.epochs.keys()]) {
    if (e < lo) {
      s.epochs.delete(e);
      dropped = true;
    }
  }
  return dropped;
}

/** The join a receiver at now performs: forgotten epochs of either side are not resurrected. */
export function joinAt(a: ReplicatedFbf, b: ReplicatedFbf, now: number): ReplicatedFbf {
  return prune(ReplicatedFbfLattice.join(a, b), now);
}

/** joinAt into target; true when target changed. */
export function joinInPlaceAt(target: ReplicatedFbf, other: ReplicatedFbf, now: number): boolean {
  const dropped = pruneInPlace(target, now);
  const changed = ReplicatedFbfLattice.joinInPlace(target, prune(other, now));
  return dropped || changed;
}

// ---- lattice operations at a fixed now -------------------------------------------------------

/** The parameters of a join, or a thrown FbfParamsMismatchError. */
function joinedParams(a: ReplicatedFbf, b: ReplicatedFbf): ReplicatedFbfParams | null {
  if (a.params === null) return b.params;
  if (b.params !== null && !sameParams(a.params, b.params)) throw new FbfParamsMismatchError(a.params, b.params);
  return a.params;
}

function bitsLeq(a: Uint8Array, b: Uint8Array | undefined): boolean {
  if (b === undefined) return false; // a is never all zero
  for (let i = 0; i < a.length; i++) if ((a[i]! & ~b[i]!) !== 0) return false;
  return true;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** One irreducible: a single bit of one epoch. */
function singleBit(p: ReplicatedFbfParams, epoch: number, i: number): ReplicatedFbf {
  const bits = new Uint8Array(Math.ceil(p.m / 8));
  bits[i >>> 3] = 1 << (i & 7);
  return new ReplicatedFbf(p, new Map([[epoch, bits]]));
}

export const ReplicatedFbfLattice: Lattice<ReplicatedFbf> = {
  // Not an object type of its own: the state travels inside a counter key.
  type: ObjectType.OBJECT_TYPE_UNSPECIFIED,
  name: "FORGETFUL_BLOOM_FILTER",
  bottom: () => new ReplicatedFbf(null),
  isBottom: (s) => s.params === null && s.epochs.size === 0,
  clone: (s) => new ReplicatedFbf(s.params, new Map([...s.epochs].map(([e, b]) => [e, b.slice()]))),
  join(a, b) {
    const out = ReplicatedFbfLattice.clone(a);
    ReplicatedFbfLattice.joinInPlace(out, b);
    return out;
  },
  joinInPlace(t, o) {
    const params = joinedParams(t, o);
    let changed = false;
    if (t.params === null && params !== null) {
      t.params = params;
      changed = true;
    }
    for (const [e, ob] of o.epochs) {
      const tb = t.epochs.get(e);
      if (tb === undefined) {
        t.epochs.set(e, ob.slice());
        changed = true;
        continue;
      }
      for (let i = 0; i < tb.length; i++) {
        const v = tb[i]! | ob[i]!;
        if (v !== tb[i]) {
          tb[i] = v;
          changed = true;
        }
      }
    }
    return changed;
  },
  leq(a, b) {
    if (a.params === null) return true;
    if (b.params === null || !sameParams(a.params, b.params)) return false;
    for (const [e, ab] of a.epochs) if (!bitsLeq(ab, b.epochs.get(e))) return false;
    return true;
  },
  equals(a, b) {
    if (a.params === null || b.params === null) {
      if (a.params !== b.params) return false;
    } else if (!sameParams(a.params, b.params)) return false;
    if (a.epochs.size !== b.epochs.size) return false;
    for (const [e, ab] of a.epochs) {
      const bb = b.epochs.get(e);
      if (bb === undefined || !bytesEqual(ab, bb)) return false;
    }
    return true;
  },
  decompose(s) {
    if (s.params === null) return [];
    // An empty state with parameters is itself irreducible (it is above bottom).
    if (s.epochs.size === 0) return [new ReplicatedFbf(s.params)];
    const out: ReplicatedFbf[] = [];
    for (const e of [...s.epochs.keys()].sort((x, y) => x - y)) {
      const bits = s.epochs.get(e)!;
      for (let i = 0; i < s.params.m; i++) if (hasBit(bits, i)) out.push(singleBit(s.params, e, i));
    }
    return out;
  },
  difference(a, b) {
    if (a.params === null) return new ReplicatedFbf(null);
    if (b.params === null || !sameParams(a.params, b.params)) return ReplicatedFbfLattice.clone(a);
    const epochs = new Map<number, Uint8Array>();
    for (const [e, ab] of a.epochs) {
      const bb = b.epochs.get(e);
      const d = bb === undefined ? ab.slice() : ab.map((x, i) => x & ~bb[i]!);
      if (!isZero(d)) epochs.set(e, d);
    }
    return epochs.size === 0 ? new ReplicatedFbf(null) : new ReplicatedFbf(a.params, epochs);
  },
  context: () => new CausalContext(),
  encode: (s) => encodeReplicatedFbf(s),
  encodedSize: (s) => encodedSizeReplicatedFbf(s),
  decode: (bytes, _now, bound) => {
    const { params, epochs } = decodeReplicatedFbf(bytes, bound?.maxFilterBytes);
    return new ReplicatedFbf(params, epochs);
  },
  size: (s) => Math.max(1, s.epochs.size),
};
