// The evaluation grid: which sync modes, cluster sizes, link latencies and gossip loss levels a
// sweep visits, the node flags of each sync mode, the loss windows that realize a loss level with
// Toxiproxy toxics, and the physical limit a convergence time is compared with. Pure: the sweep
// (sweep.ts) and the cell runner (cell.ts) do the I/O.
import { type Random, randomInt } from "../../common/prng.js";
import { nearestRank } from "../../common/percentile.js";

export type SyncMode = "full-state" | "alg1" | "alg2" | "alg2+bp+rr" | "alg2+bp+rr+push";

/** The node flags of each sync mode (see `deltaset node --help`). */
export const MODE_FLAGS: Record<SyncMode, string[]> = {
  "full-state": ["--gossip-algorithm", "alg1", "--gossip-choose", "state"],
  // Algorithm 1, transitive: received deltas are forwarded with local ones (delta-groups). With
  // delta-groups alone a lost group is never sent again, so a replica that missed one diverges
  // for good (the algorithm assumes reliable links); the periodic full state (every 10th period)
  // is what repairs it.
  alg1: ["--gossip-algorithm", "alg1", "--gossip-choose", "delta+periodic-state", "--gossip-transitive", "true"],
  alg2: ["--gossip-algorithm", "alg2", "--gossip-bp", "false", "--gossip-rr", "false"],
  "alg2+bp+rr": ["--gossip-algorithm", "alg2", "--gossip-bp", "true", "--gossip-rr", "true"],
  // The same, and local changes pushed to every neighbour 5 ms after they happen.
  "alg2+bp+rr+push": ["--gossip-algorithm", "alg2", "--gossip-bp", "true", "--gossip-rr", "true", "--gossip-push-local-ms", "5"],
};

export interface LatencyLevel {
  name: string;
  /** One-way delay added to every byte of every peer link, each direction (ms). */
  latencyMs: number;
  jitterMs: number;
}

export interface LossLevel {
  name: string;
  /**
   * Nominal share of link time covered by loss windows. What it does to gossip exchanges depends
   * on the traffic; the sweep reports the measured share of failed exchanges beside it.
   */
  windowShare: number;
}

export const LATENCIES: LatencyLevel[] = [
  { name: "none", latencyMs: 0, jitterMs: 0 },
  { name: "50±10 ms", latencyMs: 50, jitterMs: 10 },
  { name: "200±50 ms", latencyMs: 200, jitterMs: 50 },
];

export const LOSSES: LossLevel[] = [
  { name: "0%", windowShare: 0 },
  { name: "~1%", windowShare: 0.01 },
  { name: "~10%", windowShare: 0.1 },
];

export const MODES: SyncMode[] = ["full-state", "alg1", "alg2", "alg2+bp+rr", "alg2+bp+rr+push"];

export interface EvalGrid {
  sizes: number[];
  modes: SyncMode[];
  latencies: LatencyLevel[];
  losses: LossLevel[];
  /** Write-then-settle rounds per cell (each gives one convergence time). */
  rounds: number;
  /** Length of each round's write phase (ms). */
  writeMs: number;
  /** Concurrent workload clients (adds and context-removes). */
  clients: number;
  /** Pause between a client's operations (ms): sets the write rate. */
  thinkMs: number;
  /** Elements each workload key holds before a cell's rounds start (written in batches, then settled). */
  prefill: number;
  /**
   * Load each fresh cell group runs before its first cell, not measured (ms; warm-up.ts): the
   * cells' workload and lag probe on keys of its own, so no cell measures cold node processes.
   */
  warmUpMs: number;
  /** Longest wait for identical reads after a round's last write (ms); a round past it counts as not converged. */
  settleBoundMs: number;
  /** Interval between replication-lag probes (ms). */
  probeEveryMs: number;
  gossipIntervalMs: number;
}

export function evalGrid(quick: boolean): EvalGrid {
  return quick
    ? {
        sizes: [3],
        modes: MODES,
        latencies: [LATENCIES[0]!, LATENCIES[1]!],
        losses: [LOSSES[0]!, LOSSES[2]!],
        rounds: 2,
        writeMs: 2500,
        clients: 3,
        thinkMs: 40,
        prefill: 1000,
        warmUpMs: 3000,
        settleBoundMs: 15_000,
        probeEveryMs: 150,
        gossipIntervalMs: 100,
      }
    : { sizes: [3, 5, 9], modes: MODES, latencies: LATENCIES, losses: LOSSES, rounds: 5, writeMs: 2000, clients: 4, thinkMs: 40, prefill: 500, warmUpMs: 5000, settleBoundMs: 15_000, probeEveryMs: 150, gossipIntervalMs: 100 };
}

/**
 * Membership timing for links of this latency. SWIM declares a probe failed when no ack comes
 * within the probe timeout, so the timeout must exceed a round trip: with 200 ± 50 ms each way
 * and the old fixed 400 ms, about half the probes failed, and the indirect probes, suspicions and
 * refutations that followed multiplied idle traffic (5 nodes: 13.9 kB/s against 0.9 kB/s with a
 * timeout past the round trip), which the sweep then counted as bytes per update.
 */
export function membershipTiming(latency: Pick<LatencyLevel, "latencyMs" | "jitterMs"> = { latencyMs: 0, jitterMs: 0 }): { probeTimeoutMs: number; probeIntervalMs: number } {
  const worstRoundTrip = 2 * (latency.latencyMs + latency.jitterMs);
  const probeTimeoutMs = Math.max(400, 2 * worstRoundTrip);
  return { probeTimeoutMs, probeIntervalMs: Math.max(500, Math.round(1.25 * probeTimeoutMs)) };
}

/** membershipTiming as node flags: what the sweep starts its nodes with and eval-env prints. */
export function membershipFlags(latency?: Pick<LatencyLevel, "latencyMs" | "jitterMs">): string[] {
  const m = membershipTiming(latency);
  return ["--probe-timeout-ms", String(m.probeTimeoutMs), "--probe-interval-ms", String(m.probeIntervalMs)];
}

/** Gossip rounds a write needs at best to reach every one of n nodes when each round at most doubles who has it. */
export function hopsToReachAll(nodes: number): number {
  return Math.max(1, Math.ceil(Math.log2(nodes)));
}

/**
 * The physical limit of convergence: a write waits up to one gossip period to leave, then crosses
 * a link; the fastest spread doubles the informed nodes per round, so (period + latency) × hops.
 */
export function physicalLimitMs(nodes: number, gossipIntervalMs: number, latencyMs: number): number {
  return (gossipIntervalMs + latencyMs) * hopsToReachAll(nodes);
}

export interface LossWindow {
  /** Index into the cell's directed links. */
  link: number;
  startMs: number;
  endMs: number;
}

/**
 * Loss windows covering about `share` of the link time of `links` links over `durationMs`: each
 * window lasts meanWindowMs × U(0.5, 1.5) on a uniformly chosen link at a uniform start.
 */
export function lossWindows(random: Random, links: number, share: number, durationMs: number, meanWindowMs = 200): LossWindow[] {
  if (share <= 0 || links <= 0 || durationMs <= 0) return [];
  const count = Math.max(1, Math.round((share * links * durationMs) / meanWindowMs));
  const out: LossWindow[] = [];
  for (let i = 0; i < count; i++) {
    const length = Math.round(meanWindowMs * (0.5 + random()));
    const startMs = Math.round(random() * Math.max(0, durationMs - length));
    out.push({ link: randomInt(random, links), startMs, endMs: startMs + length });
  }
  return out.sort((a, b) => a.startMs - b.startMs);
}

/** The p-th percentile (0..100) of xs by nearest rank, or null when xs is empty. */
export function percentile(xs: readonly number[], p: number): number | null {
  if (xs.length === 0) return null;
  return nearestRank([...xs].sort((a, b) => a - b), p);
}
