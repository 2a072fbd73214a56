// The retry filter of a counter (issue 17): the replicated Forgetful Bloom Filter
// (replicated-fbf.ts) of the request ids its Increments carried, as the second component of the
// COUNTER state (pncounter.ts). This file adds what a counter needs on top of the filter:
//
// - Sizing from what a client knows (ids per period, target false-positive rate, P, N).
// - A join that never refuses. Filters with different parameters cannot be OR-ed, and a counter
//   key must keep replicating its value whatever its filter does; two nodes can create a key's
//   filter concurrently with different parameters. So states are ordered lexicographically:
//   first by parameters (a fixed total order), then by bits. The join keeps the filter with the
//   greater parameters and drops the other's ids (a retry of one of those may then be applied
//   again: the price of that rare race). A chain ordered before a lattice with a bottom is a
//   lattice; for one set of parameters it is the filter's own powerset of (epoch, bit).
import { JoinConflictError } from "./errors.js";
import { type Lattice } from "./lattice.js";
import { HASH_FAMILY } from "./element-hash.js";
import { ReplicatedFbf, ReplicatedFbfLattice, type ReplicatedFbfParams } from "./replicated-fbf.js";
import { MAX_EPOCH_BITS, MAX_EPOCH_HASHES, paramsProblem, sameParams } from "./replicated-fbf-params.js";

export { retryFilterBytes } from "./replicated-fbf-params.js";

export { ReplicatedFbf, type ReplicatedFbfParams, type SkewReport, prune, pruneInPlace, retentionMs, skewReport } from "./replicated-fbf.js";

/** What a client chooses for a counter's retry filter (IncrementRequest.retry_filter). */
export interface RetryFilterChoice {
  /** Request ids per period the filter is sized for. */
  idsPerPeriod: number;
  /** Target false-positive rate at that load: the share of fresh ids taken for retries. */
  falsePositiveRate: number;
  /** Epoch period P (ms). */
  periodMs: number;
  /** Past epochs N. */
  pastEpochs: number;
}

export const DEFAULT_RETRY_FILTER: RetryFilterChoice = { idsPerPeriod: 1000, falsePositiveRate: 0.001, periodMs: 60_000, pastEpochs: 4 };

const CHOICE_LIMITS = { idsPerPeriod: [1, 1_000_000_000], periodMs: [1, 2 ** 40], pastEpochs: [1, 1024] } as const;

/** Parameters a client asked for that no filter can have. */
export class RetryFilterParamError extends RangeError {
  override readonly name: string = "RetryFilterParamError";
}

/** Valid parameters whose epoch filters would be larger than an epoch filter may be (2^24 bits). */
export class RetryFilterSizeError extends RetryFilterParamError {
  override readonly name = "RetryFilterSizeError";
}

/** An Increment naming other retry-filter parameters than the key's filter has. Nothing changed. */
export class RetryFilterConflictError extends JoinConflictError {
  override readonly name = "RetryFilterConflictError";
}

/**
 * The filter parameters of a choice. A checked id is compared with N+2 epoch filters: the future
 * alone, adjacent pairs, the oldest alone (seed 003, Eq 4.3), so the filter answers falsely about
 * 2p + N·p² for per-epoch rate p; p = rate/2 keeps that at the target. Each epoch filter holds the
 * ids of two periods (an insert sets its bits in the present and the future epoch), n = 2·ids per
 * period; m = -n·ln p / ln²2 bits and k = (m/n)·ln 2 hashes, the usual optimum.
 */
export function retryFilterParams(c: RetryFilterChoice): ReplicatedFbfParams {
  for (const [name, [lo, hi]] of Object.entries(CHOICE_LIMITS)) {
    const v = c[name as keyof typeof CHOICE_LIMITS];
    if (!Number.isInteger(v) || v < lo || v > hi) throw new RetryFilterParamError(`${snake(name)} must be an integer in [${lo}, ${hi}], got ${v}`);
  }
  if (!(c.falsePositiveRate > 0 && c.falsePositiveRate < 0.5)) {
    throw new RetryFilterParamError(`false_positive_rate must be in (0, 0.5), got ${c.falsePositiveRate}`);
  }
  const n = 2 * c.idsPerPeriod;
  const p = c.falsePositiveRate / 2;
  const m = Math.max(8, Math.ceil((-n * Math.log(p)) / (Math.LN2 * Math.LN2)));
  if (m > MAX_EPOCH_BITS) {
    throw new RetryFilterSizeError(
      `${c.idsPerPeriod} ids per period at rate ${c.falsePositiveRate} need epoch filters of ${m} bits (${Math.ceil(m / 8)} bytes), ` +
        `above the ${MAX_EPOCH_BITS} bits (${MAX_EPOCH_BITS / 8} bytes) an epoch filter may have: ask for fewer ids_per_period ` +
        `(a shorter period_ms sees fewer ids in each) or a higher false_positive_rate`,
    );
  }
  const k = Math.max(1, Math.round((m / n) * Math.LN2));
  // Refused rather than capped: fewer hashes would answer retries falsely more often than asked.
  if (k > MAX_EPOCH_HASHES) throw new RetryFilterParamError(`false_positive_rate ${c.falsePositiveRate} needs ${k} hash functions; a retry filter has at most ${MAX_EPOCH_HASHES} (rates down to about 1e-19)`);
  const params = { m, k, hashFamily: HASH_FAMILY, periodMs: c.periodMs, pastEpochs: c.pastEpochs };
  const why = paramsProblem(params);
  if (why !== undefined) throw new RetryFilterParamError(why);
  return params;
}

const snake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** An operation's request id, at the node's clock, with the retry filter a key without one gets. */
export interface RetryRequest {
  id: string;
  /** The node's clock (ms). */
  now: number;
  /** The retry filter a key without one gets. */
  params: ReplicatedFbfParams;
  /** The client named params: a key whose filter differs refuses the operation (RetryFilterConflictError). */
  explicit: boolean;
}

/**
 * An operation with a request id against its key's retry filter `held` (bottom: none yet): null
 * for a retry (held holds the id), else the delta inserting the id, into a filter of r.params when
 * held has none. RetryFilterConflictError when the client named other parameters than held's;
 * `owner` names the key in its message ("the counter's"). The one check counters and filter keys share.
 */
export function retryIdDelta(held: ReplicatedFbf, r: RetryRequest, owner: string): ReplicatedFbf | null {
  const p = held.params;
  if (p !== null && r.explicit && !sameParams(p, r.params)) {
    const q = r.params;
    throw new RetryFilterConflictError(
      `${owner} retry filter has other parameters (m=${p.m}, k=${p.k}, period_ms=${p.periodMs}, past_epochs=${p.pastEpochs}) than asked (m=${q.m}, k=${q.k}, period_ms=${q.periodMs}, past_epochs=${q.pastEpochs}); leave retry_filter unset to use the key's`,
    );
  }
  const ids = p === null ? ReplicatedFbf.empty(r.params) : held;
  return ids.contains(r.id, r.now) ? null : ids.insertDelta(r.id, r.now);
}

/** The fixed total order of parameters (negative: a before b). */
export function compareParams(a: ReplicatedFbfParams, b: ReplicatedFbfParams): number {
  const x = [a.m, a.k, a.hashFamily, a.periodMs, a.pastEpochs];
  const y = [b.m, b.k, b.hashFamily, b.periodMs, b.pastEpochs];
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  return 0;
}

/** -1, 0, 1: a's parameters below, equal to or above b's; bottom (no parameters) below all. */
function order(a: ReplicatedFbf, b: ReplicatedFbf): number {
  if (a.params === null) return b.params === null ? 0 : -1;
  if (b.params === null) return 1;
  return compareParams(a.params, b.params);
}

function replaceWith(t: ReplicatedFbf, o: ReplicatedFbf): void {
  t.params = o.params;
  t.epochs.clear();
  for (const [e, bits] of o.epochs) t.epochs.set(e, bits.slice());
}

const F = ReplicatedFbfLattice;

/** The retry filter lattice: lexicographic (parameters, bits); see the header. */
export const RetryFilterLattice: Lattice<ReplicatedFbf> = {
  type: F.type,
  name: "RETRY_FILTER",
  bottom: F.bottom,
  isBottom: F.isBottom,
  clone: F.clone,
  join(a, b) {
    const out = F.clone(a);
    RetryFilterLattice.joinInPlace(out, b);
    return out;
  },
  joinInPlace(t, o) {
    const c = order(t, o);
    if (c > 0 || o.params === null) return false;
    if (c < 0) {
      replaceWith(t, o);
      return true;
    }
    return F.joinInPlace(t, o);
  },
  leq(a, b) {
    const c = order(a, b);
    return c < 0 || (c === 0 && F.leq(a, b));
  },
  equals: F.equals,
  decompose: F.decompose,
  difference(a, b) {
    const c = order(a, b);
    if (a.params === null || c < 0) return F.bottom();
    if (c > 0) return F.clone(a);
    return F.difference(a, b);
  },
  context: F.context,
  encode: F.encode,
  encodedSize: F.encodedSize,
  decode: F.decode,
  size: F.size,
};
