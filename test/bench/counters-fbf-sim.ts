// The Forgetful Bloom Filter experiments of bench:counters that need no cluster: the FBF the
// nodes use (crdt/fbf.ts) driven by a simulated clock and seeded ids, after the 2015 University of
// Illinois master's thesis on idempotent counters in Cassandra (its Figs 6.1, 6.4, 6.5 and 6.9).
// False-positive rates are measured the thesis's way: probing ids never inserted and counting hits.
import { bloomIndexes } from "../../services/crdt/element-hash.ts";
import { ForgetfulBloomFilter, bloomFpp } from "../../services/crdt/fbf.ts";
import { type Random, seededRandom } from "../../services/common/prng.ts";

let serial = 0;
/** An id no other call returns (the probes and the inserts never collide). */
const freshId = (tag: string) => `${tag}-${++serial}`;

/** Empirical FPP of a membership test over `probes` ids never inserted. */
function measuredFpp(probes: number, test: (id: string) => boolean): number {
  let hits = 0;
  for (let i = 0; i < probes; i++) if (test(freshId("probe"))) hits++;
  return hits / probes;
}

export interface CheckComparison {
  N: number;
  ops: number;
  optimized: number;
  simple: number;
}

/**
 * Fig 6.1: the optimized (adjacent-pair) check against the simple one (any filter) after n inserts
 * at `rate` ops/s into an FBF of N past filters (m = 6250, k = 5, t = 5 s), probed at the end.
 */
export function optimizedVsSimple(opsList: number[], probes: number, N: number, rate = 50): CheckComparison[] {
  return opsList.map((ops) => {
    const f = new ForgetfulBloomFilter({ m: 6250, k: 5, N, t: 5000 }, 0);
    let now = 0;
    for (let i = 0; i < ops; i++) {
      now = (i * 1000) / rate;
      f.insert(freshId("op"), now);
    }
    return { N, ops, optimized: measuredFpp(probes, (id) => f.contains(id, now)), simple: measuredFpp(probes, (id) => f.containsAny(id, now)) };
  });
}

export interface RateSample {
  /** Inserts per second when sampled. */
  rate: number;
  measured: number;
  /** Eq 4.3 from the filters' insert counts. */
  estimate: number;
}

/**
 * Insert `total` ids at a rate rising over time (rateAt(τ) ops/s), sampling the FPP when the rate
 * first reaches each of sampleRates. Time advances one insert at a time.
 */
function risingLoad(f: ForgetfulBloomFilter, total: number, rateAt: (tau: number) => number, sampleRates: number[], probes: number): RateSample[] {
  const out: RateSample[] = [];
  const pending = [...sampleRates].sort((a, b) => a - b);
  let tau = 0;
  for (let i = 0; i < total; i++) {
    const r = rateAt(tau);
    while (pending.length > 0 && r >= pending[0]!) {
      const now = tau * 1000;
      out.push({ rate: pending.shift()!, measured: measuredFpp(probes, (id) => f.contains(id, now)), estimate: f.fppEstimate(now) });
    }
    f.insert(freshId("op"), tau * 1000);
    tau += 1 / r;
  }
  return out;
}

export interface PeriodRun {
  tSeconds: number;
  samples: RateSample[];
}

/**
 * Fig 6.4: basic FBFs (N = 1, m = 25,000, k = 5) with t = 5, 3, 2, 1 s under 5,000 inserts at an
 * exponentially rising rate (5 ops/s times e every 15 s).
 */
export function fppByRefreshPeriod(periods: number[], sampleRates: number[], probes: number, total = 5000): PeriodRun[] {
  return periods.map((t) => ({
    tSeconds: t,
    samples: risingLoad(new ForgetfulBloomFilter({ m: 25_000, k: 5, N: 1, t: t * 1000 }, 0), total, (tau) => 5 * Math.exp(tau / 15), sampleRates, probes),
  }));
}

export interface FilterCountRun {
  filters: number;
  samples: RateSample[];
}

/**
 * Fig 6.5: FBFs of 24, 12, 6 and 3 filters (N = filters - 2; m = 6250, k = 5, t = 5 s) under 3,000
 * inserts at a steadily (linearly) rising rate, 3.75 ops/s more every second (150 ops/s at the end).
 */
export function fppByFilterCount(counts: number[], sampleRates: number[], probes: number, total = 3000): FilterCountRun[] {
  return counts.map((n) => ({
    filters: n,
    samples: risingLoad(new ForgetfulBloomFilter({ m: 6250, k: 5, N: n - 2, t: 5000 }, 0), total, (tau) => Math.max(1, 3.75 * tau), sampleRates, probes),
  }));
}

/** A Bloom filter wiped when its Eq 4.1 FPP passes a target (the thesis's RBF, Fig 6.9). */
class WipedBloom {
  private bits: Uint8Array;
  private inserted = 0;
  wipes = 0;

  constructor(
    private readonly m: number,
    private readonly k: number,
    private readonly target: number,
  ) {
    this.bits = new Uint8Array(Math.ceil(m / 8));
  }

  private idx(id: string): number[] {
    return bloomIndexes(new TextEncoder().encode(id), this.k, this.m);
  }

  contains(id: string): boolean {
    return this.idx(id).every((i) => (this.bits[i >>> 3]! & (1 << (i & 7))) !== 0);
  }

  insert(id: string): void {
    if (bloomFpp(this.m, this.k, this.inserted + 1) > this.target) {
      this.bits.fill(0);
      this.inserted = 0;
      this.wipes++;
    }
    for (const i of this.idx(id)) this.bits[i >>> 3]! |= 1 << (i & 7);
    this.inserted++;
  }
}

export interface RetryErrorRun {
  retryShare: number;
  ops: number;
  retries: number;
  /** Ops counted wrongly (retries counted again, and fresh ops taken for retries) / ops. */
  fbfError: number;
  rbfError: number;
  /** The counter's net error, |counted - ops| / ops (over- and under-counts cancel in it). */
  fbfNetError: number;
  rbfNetError: number;
  fbf: { doubleCounts: number; lostOps: number };
  rbf: { doubleCounts: number; lostOps: number; wipes: number };
}

/**
 * Fig 6.9: one counter fed `ops` increments at `rate` ops/s, a share of them retried once after a
 * delay (0.2 to 1 s; the first attempt was applied), deduplicated by a basic FBF (m = 500, k = 3,
 * N = 1, t = 1 s) or by a same-memory Bloom filter (1,500 bits, k = 3) wiped when its estimated
 * FPP passes rbfTarget. A retry not recognised counts twice; a fresh op taken for a retry is lost.
 */
export function retryErrors(retryShares: number[], ops: number, seed: number, rate = 20, rbfTarget = 0.05): RetryErrorRun[] {
  return retryShares.map((share) => {
    const random: Random = seededRandom(seed);
    type Attempt = { at: number; id: string; retry: boolean };
    const attempts: Attempt[] = [];
    for (let i = 0; i < ops; i++) {
      const at = (i * 1000) / rate;
      const id = freshId("inc");
      attempts.push({ at, id, retry: false });
      if (random() < share) attempts.push({ at: at + 200 + random() * 800, id, retry: true });
    }
    attempts.sort((a, b) => a.at - b.at);
    const fbf = new ForgetfulBloomFilter({ m: 500, k: 3, N: 1, t: 1000 }, 0);
    const rbf = new WipedBloom(1500, 3, rbfTarget);
    const f = { doubleCounts: 0, lostOps: 0 };
    const r = { doubleCounts: 0, lostOps: 0, wipes: 0 };
    for (const a of attempts) {
      const fbfNew = fbf.insert(a.id, a.at);
      if (a.retry && fbfNew) f.doubleCounts++;
      if (!a.retry && !fbfNew) f.lostOps++;
      const rbfNew = !rbf.contains(a.id);
      if (rbfNew) rbf.insert(a.id);
      if (a.retry && rbfNew) r.doubleCounts++;
      if (!a.retry && !rbfNew) r.lostOps++;
    }
    r.wipes = rbf.wipes;
    const wrong = (x: { doubleCounts: number; lostOps: number }) => (x.doubleCounts + x.lostOps) / ops;
    const net = (x: { doubleCounts: number; lostOps: number }) => Math.abs(x.doubleCounts - x.lostOps) / ops;
    return { retryShare: share, ops, retries: attempts.length - ops, fbfError: wrong(f), rbfError: wrong(r), fbfNetError: net(f), rbfNetError: net(r), fbf: f, rbf: r };
  });
}
