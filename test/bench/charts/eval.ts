// The chart of docs/results/eval.json (npm run eval): per cluster size and loss level, convergence
// p95 after the last write against link latency (one line per sync mode, and the physical limit),
// and wire bytes per update against latency (log scale).
import { type ChartSpec, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Cell {
  mode: string;
  nodes: number;
  latencyMs: number;
  loss: string;
  convergenceMs: { p95: number | null };
  physicalLimitMs: number;
  wireBytesPerUpdate: number | null;
  measuredLoss: { rate: number | null };
}

export function evalChart(doc: ResultDoc): ChartSpec {
  const cells = (doc.metrics as { cells: Cell[] }).cells;
  const sizes = [...new Set(cells.map((c) => c.nodes))].sort((a, b) => a - b);
  const losses = [...new Set(cells.map((c) => c.loss))];
  const modes = [...new Set(cells.map((c) => c.mode))];
  const charts: ChartSpec[] = [];
  for (const n of sizes) {
    for (const loss of losses) {
      const here = cells.filter((c) => c.nodes === n && c.loss === loss);
      const measured = here.map((c) => c.measuredLoss.rate).filter((x): x is number => x !== null);
      const lossNote = measured.length ? ` (measured ${(Math.min(...measured) * 100).toFixed(1)}-${(Math.max(...measured) * 100).toFixed(1)}%)` : "";
      const limit = [...new Map(here.map((c) => [c.latencyMs, c.physicalLimitMs])).entries()].sort((a, b) => a[0] - b[0]);
      charts.push(
        lineChart({
          title: `${n} nodes, loss ${loss}${lossNote}: convergence p95`,
          series: [
            ...modes.map((m) => ({ name: m, points: here.filter((c) => c.mode === m && c.convergenceMs.p95 !== null).map((c) => [c.latencyMs, c.convergenceMs.p95!] as [number, number]) })),
            { name: "physical limit", points: limit },
          ],
          xLabel: "link latency (ms)",
          yLabel: "ms after the last write",
          width: 300,
          height: 200,
        }),
      );
      charts.push(
        lineChart({
          title: `${n} nodes, loss ${loss}: bytes on the wire per update`,
          series: modes.map((m) => ({ name: m, points: here.filter((c) => c.mode === m && c.wireBytesPerUpdate !== null).map((c) => [c.latencyMs, c.wireBytesPerUpdate!] as [number, number]) })),
          xLabel: "link latency (ms)",
          yLabel: "bytes (log)",
          logY: true,
          width: 300,
          height: 200,
        }),
      );
    }
  }
  return panels(charts, { columns: 4, title: "Sync modes on real nodes under Toxiproxy latency and loss" });
}
