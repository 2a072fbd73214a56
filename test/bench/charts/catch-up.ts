// The chart of docs/results/catch-up.json (npm run bench:catch-up): full-state bytes the cluster
// shipped when its third node came back, in copies of the data, per way of coming back.
import { type ChartSpec, barChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

export function catchUpChart(doc: ResultDoc): ChartSpec {
  const events = (doc.metrics as { events: Array<{ name: string; copies: number; settleMs: number }> }).events;
  return barChart({
    title: "A node comes back (3 nodes): full-state bytes shipped, in copies of the data",
    categories: events.map((e) => `${e.name} (${(e.settleMs / 1000).toFixed(1)} s)`),
    series: [{ name: "copies shipped", values: events.map((e) => e.copies) }],
    yLabel: "copies of the data",
  });
}
