// The chart of docs/results/write-copies.json (npm run bench:write-copies): what asking for 1, 2
// or 3 copies costs an Add on 3 nodes: latency of one call at a time (p50, p99), and Adds/s with
// 32 in flight, and AddStream elements/s; and how soon a holder catching up confirms copies.
import { type ChartSpec, barChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Metrics {
  latency: Array<{ copies: number; p50: number; p99: number }>;
  throughput: Array<{ copies: number; callsPerSecond: number }>;
  streams?: Array<{ copies: number; elementsPerSecond: number }>;
  catchUp?: { bulk: number; listeningMs: number; restartToFirstConfirmedMs?: number; caughtUpMs?: number };
}

export function writeCopiesChart(doc: ResultDoc): ChartSpec {
  const m = doc.metrics as unknown as Metrics;
  const categories = m.latency.map((l) => `copies ${l.copies}`);
  return panels(
    [
      barChart({
        title: "Add latency, one call at a time (ms)",
        categories,
        series: [
          { name: "p50", values: m.latency.map((l) => l.p50) },
          { name: "p99", values: m.latency.map((l) => l.p99) },
        ],
        yLabel: "ms",
      }),
      barChart({
        title: "Adds/s, 32 in flight",
        categories,
        series: [{ name: "Adds/s", values: m.throughput.map((t) => t.callsPerSecond) }],
        yLabel: "calls/s",
      }),
      ...(m.streams === undefined
        ? []
        : [
            barChart({
              title: "AddStream elements/s (4 streams, 100 per batch)",
              categories,
              series: [{ name: "elements/s", values: m.streams.map((t) => t.elementsPerSecond) }],
              yLabel: "elements/s",
            }),
          ]),
      ...(m.catchUp === undefined
        ? []
        : [
            barChart({
              title: `A holder back after missing ${m.catchUp.bulk} elements: ms after its restart`,
              categories: ["listening", "first copies-3 Add answered", "holding the elements"],
              series: [{ name: "ms", values: [m.catchUp.listeningMs, m.catchUp.restartToFirstConfirmedMs ?? 0, m.catchUp.caughtUpMs ?? 0] }],
              yLabel: "ms",
            }),
          ]),
    ],
    { columns: 2, title: "Write copies on 3 nodes (fsync)" },
  );
}
