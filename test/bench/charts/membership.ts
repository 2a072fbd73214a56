// The chart of docs/results/membership.json (npm run bench:membership): crash detection by
// cluster size, timings per churn model, and false accusations of running nodes.
import { type ChartSpec, barChart, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Quantiles {
  p50?: number | null;
  p99?: number | null;
  max?: number | null;
}

interface DetectionRow {
  nodes: number;
  lossRate: number;
  detectMs: Quantiles;
  deadEverywhereMs: Quantiles;
}

interface ModelFigures {
  crashDetectMs: Quantiles;
  crashDeadEverywhereMs: Quantiles;
  leaveLeftEverywhereMs: Quantiles;
  agreementAfterChurnMs?: Quantiles | null;
  falseSuspicions: number;
  falseDeaths: number;
}

const sec = (x: number | null | undefined) => (x === null || x === undefined ? null : x / 1000);

export function membershipChart(doc: ResultDoc): ChartSpec {
  const p = doc.params as { nodes: number; lossRate: number; runsPerModel: number; churnSteps: number; stepMs: number };
  const models = doc.metrics.models as Record<string, ModelFigures>;
  const detection = doc.metrics.detection as DetectionRow[];
  const names = Object.keys(models);
  const sizeSeries = (lossRate: number, key: "detectMs" | "deadEverywhereMs", q: "p50" | "p99", name: string) => ({
    name,
    points: detection.filter((d) => d.lossRate === lossRate).map((d) => [d.nodes, (d[key][q] ?? 0) / 1000] as [number, number]),
  });
  const detectionChart = lineChart({
    title: "Crash detection vs cluster size (default settings)",
    xLabel: "nodes",
    yLabel: "seconds after the crash",
    logX: true,
    series: [
      sizeSeries(0, "detectMs", "p50", "first SUSPECT p50, 0% loss"),
      sizeSeries(0, "detectMs", "p99", "first SUSPECT p99, 0% loss"),
      sizeSeries(0.1, "detectMs", "p99", "first SUSPECT p99, 10% loss"),
      sizeSeries(0, "deadEverywhereMs", "p50", "DEAD everywhere p50, 0% loss"),
      sizeSeries(0.1, "deadEverywhereMs", "p99", "DEAD everywhere p99, 10% loss"),
    ],
    width: 420,
  });
  const timingChart = barChart({
    title: `Churn models, ${p.nodes} nodes, ${p.lossRate * 100}% loss`,
    yLabel: "seconds",
    categories: names,
    series: [
      { name: "detect p50", values: names.map((m) => sec(models[m]!.crashDetectMs.p50)) },
      { name: "detect p99", values: names.map((m) => sec(models[m]!.crashDetectMs.p99)) },
      { name: "DEAD everywhere p99", values: names.map((m) => sec(models[m]!.crashDeadEverywhereMs.p99)) },
      { name: "LEFT everywhere p99", values: names.map((m) => sec(models[m]!.leaveLeftEverywhereMs.p99)) },
      { name: "views agree after churn (max)", values: names.map((m) => sec(models[m]!.agreementAfterChurnMs?.max)) },
    ],
    width: 420,
  });
  const falseChart = barChart({
    title: `False accusations of running nodes (${p.runsPerModel} x ${(p.churnSteps * p.stepMs) / 1000} s per model)`,
    yLabel: "count",
    categories: names,
    series: [
      { name: "false suspicions (refuted)", values: names.map((m) => models[m]!.falseSuspicions) },
      { name: "false deaths", values: names.map((m) => models[m]!.falseDeaths) },
    ],
    width: 420,
  });
  return panels([detectionChart, timingChart, falseChart], { columns: 3, title: "deltaset membership (SWIM) in simulation" });
}
