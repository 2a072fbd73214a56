// npm run bench:counters [-- --quick]
// Retry-safe counters against the experiments of the 2015 University of Illinois master's thesis on
// idempotent counters in Cassandra (its chapter 6): the counter's error under client timeouts and
// retries with and without the Forgetful Bloom Filter, on a real 3-node cluster behind fault proxies
// with a node crash (counters-cluster.ts); the write-latency cost of a request id; and, on the FBF
// the nodes use with a simulated clock (counters-fbf-sim.ts), its false-positive rate against the
// refresh period and the number of filters, the optimized check against the simple one, and the FBF
// against a same-memory Bloom filter that is wiped when full. Targets compare direction and order
// of magnitude with the thesis's figures; a missed one is reported as missed.
// Writes docs/results/counters.json and counters.svg (--quick: fewer ops and probes, to a temporary
// directory, so the committed results stay those of a full run).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeResultFile } from "../../services/common/result-file.js";
import { drawChart } from "./charts/draw.js";
import { commandLine, isQuick, printTargets, resultsDir, target } from "./lib/results.js";
import { runCounterCluster } from "./counters-cluster.ts";
import { fppByFilterCount, fppByRefreshPeriod, optimizedVsSimple, retryErrors } from "./counters-fbf-sim.ts";

const quick = isQuick();
const command = commandLine("bench:counters", quick);
const probes = quick ? 50_000 : 400_000;
const started = performance.now();

const checks = [1, 4].flatMap((N) => optimizedVsSimple([300, 600, 1000, 2000, 3000], probes, N));
const periods = fppByRefreshPeriod([5, 3, 2, 1], [25, 50, 100, 200], probes);
const filterCounts = fppByFilterCount([24, 12, 6, 3], [25, 50, 100], probes);
const retries = retryErrors([0.05, 0.1, 0.2, 0.4, 0.8], quick ? 1500 : 6000, 7);
console.log("simulated experiments done", Math.round((performance.now() - started) / 1000), "s");
const cluster = await runCounterCluster(quick ? 60 : 400, quick ? 100 : 1000, 11);
console.log(JSON.stringify(cluster));

const at = <T extends { rate: number }>(samples: T[], rate: number) => samples.find((s) => s.rate === rate)!;
const fppT5 = at(periods.find((p) => p.tSeconds === 5)!.samples, 100);
const fppT1 = at(periods.find((p) => p.tSeconds === 1)!.samples, 100);
const fpp3 = at(filterCounts.find((p) => p.filters === 3)!.samples, 100);
const fpp24 = at(filterCounts.find((p) => p.filters === 24)!.samples, 100);
const check300 = checks.find((c) => c.N === 1 && c.ops === 300)!;
const withIds = cluster.runs.find((r) => r.withIds)!;
const withoutIds = cluster.runs.find((r) => !r.withIds)!;
const lowShare = retries[0]!;
const highShare = retries.at(-1)!;
/** Same direction and within a factor of 10 of the thesis's ratio. */
const sameOrder = (paper: number) => (m: number) => m > 1 && m / paper <= 10 && paper / m <= 10;

const targets = [
  target(
    "counter error with request ids on 3 nodes behind fault proxies, with a node crash, retries of applied increments included (thesis: exact)",
    "0",
    withIds.error,
    (m) => m === 0 && withIds.unacknowledged === 0 && withIds.duplicatesAnswered > 0,
    command,
  ),
  target("counter error without request ids under the same faults (thesis: 5-6% over-count)", "> 0 (over-count)", withoutIds.error, (m) => m > 0, command),
  target("Increment p50 with a request id relative to without, same node, interleaved (thesis: about 10% slower)", "<= 1.25x", cluster.latency.ratioP50, (m) => m <= 1.25, command),
  target(
    "FPP at 100 ops/s, refresh period 5 s relative to 1 s, Eq 4.3 (thesis: about 1000x; measured hits are too rare at 1 s)",
    "same order as 1000x",
    fppT5.estimate / fppT1.estimate,
    sameOrder(1000),
    command,
  ),
  target("FPP at 100 ops/s under a rising load, 3 filters relative to 24, measured (thesis: about 5.5x)", "same order as 5.5x", fpp3.measured / Math.max(fpp24.measured, 1 / probes), sameOrder(5.5), command),
  target("optimized check's FPP below the simple check's at 300 ops, N = 1 (thesis: 90% lower)", ">= 50% lower", 1 - check300.optimized / Math.max(check300.simple, 1 / probes), (m) => m >= 0.5, command),
  target(
    "same-memory wiped Bloom filter: retries counted again grow with retry frequency (thesis: error grows exponentially), 80% vs 5% of ops retried",
    ">= 4x",
    highShare.rbf.doubleCounts / Math.max(1, lowShare.rbf.doubleCounts),
    (m) => m >= 4,
    command,
  ),
  target(
    "FBF: ops counted wrongly stay roughly flat as retries rise (thesis: low and flat), 80% vs 5% of ops retried",
    "<= 2x",
    highShare.fbfError / Math.max(lowShare.fbfError, 1 / lowShare.ops),
    (m) => m <= 2,
    command,
  ),
  target("FBF counts fewer retries again than the same-memory wiped filter at every retry share", "every share", retries.filter((r) => r.fbf.doubleCounts < r.rbf.doubleCounts).length / retries.length, (m) => m === 1, command),
];

const dir = quick ? mkdtempSync(join(tmpdir(), "deltaset-counters-")) : resultsDir;
const path = writeResultFile(join(dir, "counters.json"), {
  params: {
    quick,
    probes,
    cluster: { nodes: 3, deadlineMs: 300, slowAnswersMs: 600, pauseBeforeRetryMs: 300, increments: withIds.increments, crash: cluster.crash, faultWindows: cluster.faultWindows },
    checks: { m: 6250, k: 5, t: "5 s", rate: "50 ops/s", N: [1, 4] },
    refreshPeriods: { m: 25_000, k: 5, N: 1, load: "5,000 inserts, 5 ops/s rising e-fold every 15 s" },
    filterCounts: { m: 6250, k: 5, t: "5 s", load: "3,000 inserts, rate rising 3.75 ops/s every second" },
    retries: { fbf: { m: 500, k: 3, N: 1, t: "1 s" }, rbf: { m: 1500, k: 3, wipedAbove: 0.05 }, rate: "20 ops/s", retryDelay: "0.2-1 s" },
    notes: [
      "The optimized check here always checks the oldest filter alone (the thesis's printed Algorithm 2 skips it for N >= 2), so that an id is kept for the whole (N+1)·t window; with N = 1 that leaves only the present filter out of the solo checks, which is why the reduction is smaller than the thesis's 90%.",
      "Without request ids every retry of an applied increment counts again: the over-count follows the share of answers the fault windows delay past the client's deadline, not the thesis's 5-6%.",
      "FPPs at 1 s refresh are far below what 400,000 probes can see: the refresh-period ratio uses Eq 4.3, which matches the measured rate where hits are frequent enough (t = 5 s, 200 ops/s).",
    ],
  },
  metrics: { checks, periods, filterCounts, retries, cluster },
  targets,
});
await drawChart(path);
printTargets(targets);
console.log(`results: ${path} (${Math.round((performance.now() - started) / 1000)} s)`);
