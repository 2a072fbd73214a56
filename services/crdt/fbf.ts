// Forgetful Bloom Filter (FBF), after seed 003 (§3-§4): an ordered list of Bloom filters of equal m
// and k -- one future, one present and N past -- that forgets ids older than about (N+1)·t to
// (N+2)·t, where t is the refresh period.
//
// - insert (Alg 1): if the id is not a member, set it in the future and the present filter.
// - refresh (§3.3): drop the oldest past filter, shift, present -> past_1, future -> present, add an
//   empty future. advance(now) refreshes once per elapsed period.
// - contains (Alg 2, corrected as in the seed's prose and Eq 4.3): future alone, then adjacent
//   pairs from (present, past_1) to the oldest, then the oldest alone. The printed Alg 2 skips the
//   solo check of the oldest filter for N >= 2 (digest of seed 003, §5); that would shrink the
//   guaranteed window from (N+1)·t to N·t, so the solo check is always done here.
// - fppEstimate: Eq 4.3 with Eq 4.1 per filter, from per-filter insert counts l_i.
//
// Pure and deterministic like the rest of the kernel: no clock, no randomness; every call that
// depends on time takes `now` in milliseconds. Resizing (Alg 3) lives in fbf-resize.ts.
import { bloomIndexes } from "./element-hash.js";

export type FbfId = Uint8Array | string;

const utf8 = new TextEncoder();

/** The bytes hashed for an id (strings as UTF-8). */
export function idBytes(id: FbfId): Uint8Array {
  return typeof id === "string" ? utf8.encode(id) : id;
}

/** Eq 4.1 of seed 003: false-positive probability of one Bloom filter holding l elements. */
export function bloomFpp(m: number, k: number, l: number): number {
  if (l <= 0) return 0;
  return Math.pow(1 - Math.exp((-k * l) / m), k);
}

/** A plain Bloom filter over m bits, counting the ids inserted into it (l_i of Eq 4.3). */
export class BloomBits {
  readonly bits: Uint8Array;
  inserted = 0;

  constructor(readonly m: number) {
    this.bits = new Uint8Array(Math.ceil(m / 8));
  }

  set(indexes: readonly number[]): void {
    for (const i of indexes) this.bits[i >>> 3]! |= 1 << (i & 7);
    this.inserted++;
  }

  has(indexes: readonly number[]): boolean {
    for (const i of indexes) if ((this.bits[i >>> 3]! & (1 << (i & 7))) === 0) return false;
    return true;
  }
}

export interface FbfParams {
  /** Bits per filter. */
  m: number;
  /** Hash functions per filter. */
  k: number;
  /** Number of past filters (N >= 1). The FBF holds N+2 filters. */
  N: number;
  /** Refresh period t in milliseconds. */
  t: number;
}

export class FbfParamError extends Error {
  override readonly name = "FbfParamError";
}

function checkInt(name: string, v: number, min: number, max: number): void {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new FbfParamError(`${name} must be an integer in [${min}, ${max}], got ${v}`);
  }
}

export function validateFbfParams(p: FbfParams): void {
  checkInt("m", p.m, 8, 1 << 28);
  checkInt("k", p.k, 1, 64);
  checkInt("N", p.N, 1, 1 << 16);
  checkInt("t", p.t, 1, Number.MAX_SAFE_INTEGER);
}

/**
 * Sizing from a target false-positive rate and the expected inserts per refresh period n: at a
 * steady rate the future filter holds up to n ids and the present and past filters about 2n each
 * (digest of seed 003, §7). Start from the textbook optimum for l = 2n (m = -l·ln p / ln²2,
 * k = (m/l)·ln 2) and grow m until the Eq 4.3 estimate of that steady state is under the target.
 */
export function sizeForTarget(targetFpp: number, insertsPerPeriod: number, N = 1): { m: number; k: number } {
  if (!(targetFpp > 0 && targetFpp < 1)) throw new FbfParamError(`target FPP must be in (0, 1), got ${targetFpp}`);
  if (!(insertsPerPeriod >= 1)) throw new FbfParamError(`inserts per period must be >= 1, got ${insertsPerPeriod}`);
  const l = 2 * insertsPerPeriod;
  let m = Math.max(8, Math.ceil((-l * Math.log(targetFpp)) / (Math.LN2 * Math.LN2)));
  for (;;) {
    const k = Math.min(64, Math.max(1, Math.round((m / l) * Math.LN2)));
    const counts = [insertsPerPeriod, ...new Array<number>(N + 1).fill(l)];
    if (eq43(counts.map((c) => bloomFpp(m, k, c))) <= targetFpp) return { m, k };
    m = Math.ceil(m * 1.05);
  }
}

/**
 * Eq 4.3 from per-filter false-positive probabilities ordered [future, present, past_1..past_n]:
 * future alone, each adjacent pair from (present, past_1) on, and the oldest alone. (As in the
 * seed this counts the pair ending at the oldest filter as well as its solo term: a slight,
 * safe-side over-estimate.)
 */
export function eq43(p: readonly number[]): number {
  let miss = 1 - p[0]!;
  for (let i = 1; i + 1 < p.length; i++) miss *= 1 - p[i]! * p[i + 1]!;
  miss *= 1 - p[p.length - 1]!;
  return 1 - miss;
}

export class ForgetfulBloomFilter {
  readonly m: number;
  readonly k: number;
  private _N: number;
  private _t: number;
  /** [future, present, past_1 (newest) .. past_oldest]. Fewer than N+2 right after a scale-up. */
  private filters: BloomBits[];
  private lastRefreshAt: number;
  /** Refreshes done so far (lets a resizer wait for one between decisions). */
  refreshes = 0;

  /** An empty FBF of N+2 filters whose first period starts at `now`. */
  constructor(params: FbfParams, now: number) {
    validateFbfParams(params);
    this.m = params.m;
    this.k = params.k;
    this._N = params.N;
    this._t = params.t;
    this.filters = Array.from({ length: params.N + 2 }, () => new BloomBits(params.m));
    this.lastRefreshAt = now;
  }

  /** Sized by sizeForTarget for a target FPP and the expected inserts per refresh period. */
  static forTarget(
    opts: { targetFpp: number; insertsPerPeriod: number; N?: number; t: number },
    now: number,
  ): ForgetfulBloomFilter {
    const N = opts.N ?? 1;
    const { m, k } = sizeForTarget(opts.targetFpp, opts.insertsPerPeriod, N);
    return new ForgetfulBloomFilter({ m, k, N, t: opts.t }, now);
  }

  get N(): number {
    return this._N;
  }
  get t(): number {
    return this._t;
  }
  /** Filters currently held (N+2 once any scale-up has been absorbed by refreshes). */
  get filterCount(): number {
    return this.filters.length;
  }
  /** Ids inserted into each filter, ordered [future, present, past_1..]. */
  insertCounts(): number[] {
    return this.filters.map((f) => f.inserted);
  }
  /** When the next refresh is due. */
  get nextRefreshAt(): number {
    return this.lastRefreshAt + this._t;
  }

  /**
   * The refresh of §3.3: a new empty future; every other filter moves one step older; the oldest
   * is dropped once the list is longer than N+2.
   */
  refresh(): void {
    this.filters.unshift(new BloomBits(this.m));
    while (this.filters.length > this._N + 2) this.filters.pop();
    this.refreshes++;
  }

  /** Refresh once per period elapsed up to now. A `now` earlier than the last refresh is a no-op. */
  advance(now: number): void {
    if (now < this.lastRefreshAt + this._t) return;
    const periods = Math.floor((now - this.lastRefreshAt) / this._t);
    // More refreshes than filters empties the whole list: do that directly, not one by one.
    const steps = Math.min(periods, this._N + 2);
    for (let i = 0; i < steps; i++) this.refresh();
    this.refreshes += periods - steps;
    this.lastRefreshAt += periods * this._t;
  }

  /** Alg 1: true when the id was new (now inserted), false when it is a member (a retry). */
  insert(id: FbfId, now: number): boolean {
    this.advance(now);
    const idx = bloomIndexes(idBytes(id), this.k, this.m);
    if (this.check(idx)) return false;
    this.filters[0]!.set(idx);
    this.filters[1]!.set(idx);
    return true;
  }

  /** The optimized membership check (corrected Alg 2). */
  contains(id: FbfId, now: number): boolean {
    this.advance(now);
    return this.check(bloomIndexes(idBytes(id), this.k, this.m));
  }

  /** The simple check of §3.1 (any filter), kept to compare false-positive rates with Alg 2. */
  containsAny(id: FbfId, now: number): boolean {
    this.advance(now);
    const idx = bloomIndexes(idBytes(id), this.k, this.m);
    return this.filters.some((f) => f.has(idx));
  }

  private check(idx: readonly number[]): boolean {
    const f = this.filters;
    if (f[0]!.has(idx)) return true;
    // Adjacent pairs from (present, past_1) to the oldest two; evaluate each filter once.
    let prev = f[1]!.has(idx);
    for (let i = 2; i < f.length; i++) {
      const cur = f[i]!.has(idx);
      if (prev && cur) return true;
      prev = cur;
    }
    // The oldest alone: its newer partner has already been dropped.
    return prev;
  }

  /** Eq 4.3 (with Eq 4.1 per filter) for the filters as they are at `now`. */
  fppEstimate(now: number): number {
    this.advance(now);
    return eq43(this.filters.map((f) => bloomFpp(this.m, this.k, f.inserted)));
  }

  /**
   * Guaranteed retention in ms: an id stays a member for at least (N+1)·t after its insert while
   * t and N do not change (seed 003, §3.3; the window is ((N+1)·t, (N+2)·t]).
   */
  retentionMs(): number {
    return (this._N + 1) * this._t;
  }

  /**
   * Set N and t (used by the resizer). A larger N only raises the capacity: the next refreshes
   * stop dropping until N+2 filters are held. Empty filters appended at the old end would leave
   * the former oldest filter without its solo check and forget its ids early (digest of seed 003,
   * §6, hazard 2). A smaller N drops the oldest filters at once. A new t applies from the last
   * refresh on.
   */
  setShape(N: number, t: number): void {
    validateFbfParams({ m: this.m, k: this.k, N, t });
    this._N = N;
    this._t = t;
    while (this.filters.length > N + 2) this.filters.pop();
  }
}
