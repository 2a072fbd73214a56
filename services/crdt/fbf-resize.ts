// Dynamic resizing of a Forgetful Bloom Filter, after seed 003, §3.5, Algorithm 3: compare the
// Eq 4.3 estimate with a target and
//   - estimate >= 0.9·target: multiplicative increase of the filter count, (N+2) -> 2·(N+2) (the
//     extra filters are past filters), and additive decrease of the refresh period, t -> t - step;
//   - estimate <= 0.1·target: additive decrease of the filter count (N -> N-1) and additive
//     increase of the period, t -> t + step;
//   - otherwise hold.
// The seed runs this every second on a background thread; here the caller calls tick(fbf, now)
// on its own schedule (the seed's 1 s is the suggested one). No clock is read.
//
// Guards the seed leaves out (digest of seed 003, §6, hazards 1-3), each applied here:
//   - floors and caps: nMin <= N <= nMax, tMinMs <= t <= tMaxMs;
//   - the window invariant: a resize never makes (N+1)·t smaller than minWindowMs (the clients'
//     total retry deadline plus margins), so ids are never forgotten while a retry can still come;
//   - new filters raise a capacity instead of being appended empty (see ForgetfulBloomFilter.setShape),
//     so the estimate does not fall at once after a scale-up (the seed's immediate drop came from
//     empty filters that forget ids early). The estimate therefore lags a resize by up to N+2
//     refreshes; to keep the controller from running away on stale estimates, a scale-up waits for
//     one refresh since the last resize and a scale-down for a full turnover of the filters (in a
//     300 s simulation without that wait it oscillated between N = 16, t = 1.2 s and N = 5, t = 12 s).
import type { ForgetfulBloomFilter } from "./fbf.js";

export interface ResizePolicy {
  targetFpp: number;
  /** Smallest allowed (N+1)·t in ms. */
  minWindowMs?: number;
  /** Additive step of t in ms (the seed uses 1 s). */
  tStepMs?: number;
  tMinMs?: number;
  tMaxMs?: number;
  nMin?: number;
  nMax?: number;
}

export type ResizeKind = "up" | "down" | "hold";

export interface ResizeAction {
  kind: ResizeKind;
  /** Why a hold (or a partial resize) happened. */
  reason: string;
  fpp: number;
  from: { N: number; t: number };
  to: { N: number; t: number };
}

/** The thresholds of Alg 3, relative to the target. */
export const SCALE_UP_AT = 0.9;
export const SCALE_DOWN_AT = 0.1;

export class FbfResizer {
  private readonly p: Required<ResizePolicy>;
  /** fbf.refreshes at the last resize; undefined before the first. */
  private lastResizeAtRefresh: number | undefined;

  constructor(policy: ResizePolicy) {
    if (!(policy.targetFpp > 0 && policy.targetFpp < 1)) {
      throw new RangeError(`targetFpp must be in (0, 1), got ${policy.targetFpp}`);
    }
    this.p = {
      minWindowMs: 0,
      tStepMs: 1000,
      tMinMs: 1000,
      tMaxMs: 3_600_000,
      nMin: 1,
      nMax: 64,
      ...policy,
    };
  }

  /** One run of Alg 3 at time now; applies the resize to fbf and reports it. */
  tick(fbf: ForgetfulBloomFilter, now: number): ResizeAction {
    const fpp = fbf.fppEstimate(now);
    const from = { N: fbf.N, t: fbf.t };
    const hold = (reason: string): ResizeAction => ({ kind: "hold", reason, fpp, from, to: from });
    const { targetFpp, minWindowMs, tStepMs, tMinMs, tMaxMs, nMin, nMax } = this.p;
    const upward = fpp >= SCALE_UP_AT * targetFpp;
    const downward = fpp <= SCALE_DOWN_AT * targetFpp;
    if (!upward && !downward) return hold("estimate between 0.1 and 0.9 of the target");
    // The estimate only moves as refreshes replace filters filled under the old shape. A scale-up
    // waits for one refresh (react fast); a scale-down waits until every filter held has been
    // replaced (let up gently), else the lagging estimate drives t up step after step past the
    // point where the load fits, and the controller oscillates.
    if (this.lastResizeAtRefresh !== undefined) {
      const since = fbf.refreshes - this.lastResizeAtRefresh;
      if (upward && since < 1) return hold("waiting for a refresh since the last resize");
      if (downward && since < fbf.filterCount) return hold("waiting for the filters to turn over since the last resize");
    }
    let N: number;
    let t: number;
    let reason = "";
    if (upward) {
      N = Math.min(nMax, 2 * (fbf.N + 2) - 2);
      t = Math.max(tMinMs, fbf.t - tStepMs);
      // Shortening t must not shrink the window below the floor.
      const tFloor = Math.ceil(minWindowMs / (N + 1));
      if (t < tFloor) {
        t = Math.max(fbf.t >= tFloor ? tFloor : fbf.t, t);
        reason = "t held up by the window floor";
      }
    } else {
      N = Math.max(nMin, fbf.N - 1);
      t = Math.min(tMaxMs, fbf.t + tStepMs);
      if ((N + 1) * t < minWindowMs) {
        N = fbf.N;
        reason = "N kept by the window floor";
      }
    }
    if (N === fbf.N && t === fbf.t) return hold(reason || "at the limits");
    fbf.setShape(N, t);
    this.lastResizeAtRefresh = fbf.refreshes;
    return { kind: upward ? "up" : "down", reason, fpp, from, to: { N, t } };
  }
}
