// The chart of docs/results/counters.json (npm run bench:counters): the FBF's false-positive rate
// against the load for each refresh period and filter count, the optimized check against the
// simple one, the FBF against a same-memory wiped Bloom filter as retries rise, and the cluster's
// counter error with and without request ids.
import { type ChartSpec, barChart, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Sample {
  rate: number;
  measured: number;
  estimate: number;
}

interface Metrics {
  checks: Array<{ N: number; ops: number; optimized: number; simple: number }>;
  periods: Array<{ tSeconds: number; samples: Sample[] }>;
  filterCounts: Array<{ filters: number; samples: Sample[] }>;
  retries: Array<{ retryShare: number; fbfError: number; rbfError: number }>;
  cluster: { runs: Array<{ withIds: boolean; error: number }> };
}

export function countersChart(doc: ResultDoc): ChartSpec {
  const m = doc.metrics as unknown as Metrics;
  const floor = 1e-7; // log axes: a rate too small to see is drawn at the floor
  return panels(
    [
      lineChart({
        title: "FPP (Eq 4.3) against the load, by refresh period",
        series: m.periods.map((p) => ({ name: `t = ${p.tSeconds} s`, points: p.samples.map((s) => [s.rate, Math.max(floor, s.estimate)] as [number, number]) })),
        xLabel: "inserts per second",
        yLabel: "false-positive rate (log)",
        logY: true,
      }),
      lineChart({
        title: "FPP (measured) against a rising load, by filter count",
        series: m.filterCounts.map((p) => ({ name: `${p.filters} filters`, points: p.samples.map((s) => [s.rate, Math.max(floor, s.measured)] as [number, number]) })),
        xLabel: "inserts per second",
        yLabel: "false-positive rate (log)",
        logY: true,
      }),
      lineChart({
        title: "Optimized (adjacent pairs) and simple check",
        series: [1, 4].flatMap((N) => [
          { name: `optimized, N = ${N}`, points: m.checks.filter((c) => c.N === N).map((c) => [c.ops, Math.max(floor, c.optimized)] as [number, number]) },
          { name: `simple, N = ${N}`, points: m.checks.filter((c) => c.N === N).map((c) => [c.ops, Math.max(floor, c.simple)] as [number, number]) },
        ]),
        xLabel: "ops inserted",
        yLabel: "false-positive rate (log)",
        logY: true,
      }),
      lineChart({
        title: "Ops counted wrongly as retries rise (same memory)",
        series: [
          { name: "FBF (3 x 500 bits)", points: m.retries.map((r) => [r.retryShare * 100, r.fbfError * 100] as [number, number]) },
          { name: "wiped Bloom filter (1,500 bits)", points: m.retries.map((r) => [r.retryShare * 100, r.rbfError * 100] as [number, number]) },
        ],
        xLabel: "% of ops retried",
        yLabel: "% of ops",
      }),
      barChart({
        title: "Counter error on 3 nodes behind fault proxies, with a node crash",
        categories: m.cluster.runs.map((r) => (r.withIds ? "with request ids" : "without")),
        series: [{ name: "error %", values: m.cluster.runs.map((r) => r.error * 100) }],
        yLabel: "% over the increments sent",
      }),
    ],
    { columns: 2, title: "Retry-safe counters (Forgetful Bloom Filter)" },
  );
}
