// Round trips of direct probes (Ping) against the probe timeout. A timeout near or under the round
// trip between nodes makes probes of healthy peers fail: the indirect probes, suspicions and
// refutations that follow multiplied membership traffic 15 times (5 nodes over 200 ± 50 ms links
// with a 400 ms timeout: 13.9 kB/s against 0.9 kB/s idle) while no node was ever declared dead, so
// nothing showed it. This keeps the last round trips and says when their 95th percentile passes a
// share of the timeout, at most once per interval. Pure: time is passed in.
import { nearestRank } from "../common/percentile.js";

export interface ProbeTimingOptions {
  /** The probe timeout (--probe-timeout-ms). */
  timeoutMs: number;
  /** Round trips kept (the most recent). Default 64. */
  window?: number;
  /** No warning before this many round trips were seen. Default 20. */
  minSamples?: number;
  /** Warn when the 95th percentile exceeds this share of the timeout. Default 0.5. */
  warnShare?: number;
  /** At most one warning per this many ms. Default 5 minutes. */
  warnEveryMs?: number;
}

export interface ProbeTimingStats {
  /** Round trips in the window. */
  samples: number;
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
  timeoutMs: number;
}

export interface ProbeTimingWarning {
  p95Ms: number;
  timeoutMs: number;
  samples: number;
}

export class ProbeTiming {
  private readonly ring: number[] = [];
  private next = 0;
  private lastWarnAt = -Infinity;
  private readonly window: number;
  private readonly minSamples: number;
  private readonly warnShare: number;
  private readonly warnEveryMs: number;

  constructor(private readonly o: ProbeTimingOptions) {
    this.window = o.window ?? 64;
    this.minSamples = Math.min(o.minSamples ?? 20, this.window);
    this.warnShare = o.warnShare ?? 0.5;
    this.warnEveryMs = o.warnEveryMs ?? 300_000;
  }

  /** A probe's round trip (ms) at `now`; returns a warning when one is due. */
  record(rttMs: number, now: number): ProbeTimingWarning | undefined {
    if (!Number.isFinite(rttMs) || rttMs < 0) return undefined;
    if (this.ring.length < this.window) this.ring.push(rttMs);
    else this.ring[this.next] = rttMs;
    this.next = (this.next + 1) % this.window;
    if (this.ring.length < this.minSamples || now - this.lastWarnAt < this.warnEveryMs) return undefined;
    const p95 = nearestRank(sorted(this.ring), 95);
    if (p95 <= this.warnShare * this.o.timeoutMs) return undefined;
    this.lastWarnAt = now;
    return { p95Ms: p95, timeoutMs: this.o.timeoutMs, samples: this.ring.length };
  }

  stats(): ProbeTimingStats {
    if (this.ring.length === 0) return { samples: 0, p50Ms: null, p95Ms: null, maxMs: null, timeoutMs: this.o.timeoutMs };
    const s = sorted(this.ring);
    return { samples: s.length, p50Ms: nearestRank(s, 50), p95Ms: nearestRank(s, 95), maxMs: s[s.length - 1]!, timeoutMs: this.o.timeoutMs };
  }
}

function sorted(xs: readonly number[]): number[] {
  return [...xs].sort((a, b) => a - b);
}
