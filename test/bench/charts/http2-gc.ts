// The chart of docs/results/http2-gc.json (npm run bench:http2-gc): what each server promotes to
// V8's old generation per young-generation collection under unary calls.
import { type ChartSpec, barChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

export function http2GcChart(doc: ResultDoc): ChartSpec {
  const variants = (doc.metrics as { variants: Array<{ name: string; promotedKiBMedian: number; scavengeMicrosPerCall: number }> }).variants;
  return barChart({
    title: "Promoted to the old generation per scavenge, 32 unary calls in flight (median)",
    categories: variants.map((v) => `${v.name} (${v.scavengeMicrosPerCall.toFixed(1)} µs scavenging per call)`),
    series: [{ name: "KiB promoted per scavenge", values: variants.map((v) => v.promotedKiBMedian) }],
    yLabel: "KiB per scavenge",
  });
}
