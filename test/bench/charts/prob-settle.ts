// The chart of docs/results/prob-settle.json (npm run bench:prob-settle): how long the replicas of
// a probabilistic set took to read the same after writes stopped, per union strategy, beside an
// exact ORCF; rounds that never settled within the bound are in the JSON and the bar labels.
import { type ChartSpec, barChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Summary {
  variant: string;
  rounds: number;
  unsettled: number;
  p50: number | null;
  p95: number | null;
  max: number | null;
}

export function probSettleChart(doc: ResultDoc): ChartSpec {
  const summary = (doc.metrics as { summary: Summary[] }).summary;
  return barChart({
    title: `Probabilistic set, ${String(doc.params.nodes)} nodes: ms from the last write until every node reads the same`,
    categories: summary.map((s) => `${s.variant} (${s.unsettled} of ${s.rounds} rounds never settled)`),
    series: [
      { name: "p50", values: summary.map((s) => s.p50) },
      { name: "p95", values: summary.map((s) => s.p95) },
      { name: "max", values: summary.map((s) => s.max) },
    ],
    yLabel: "ms",
  });
}
