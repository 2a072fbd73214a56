// The chart of docs/results/eval-types.json (npm run eval:types): per data type, convergence p95
// and bytes on the wire per update against gossip loss, one line per sync mode and latency, with
// the physical limit ((gossip period + latency) × hops) drawn as a flat line on the convergence panels.
import { type ChartSpec, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Cell {
  type: string;
  /** Absent in results written before sizes were swept (3 nodes). */
  nodes?: number;
  mode: string;
  latency: string;
  lossWindowShare: number;
  measuredLoss: number | null;
  convergenceMs: { p95: number | null };
  physicalLimitMs: number;
  wireBytesPerUpdate: number | null;
}

export function evalTypesChart(doc: ResultDoc): ChartSpec {
  const cells = (doc.metrics as { cells: Cell[] }).cells;
  const types = [...new Set(cells.map((c) => c.type))];
  const sizes = [...new Set(cells.map((c) => c.nodes ?? 3))];
  const lineOf = (c: Cell) => `${sizes.length > 1 ? `${c.nodes ?? 3} nodes, ` : ""}${c.mode}, latency ${c.latency}`;
  const lines = [...new Set(cells.map(lineOf))];
  const series = (type: string, value: (c: Cell) => number | null) =>
    lines.map((l) => ({
      name: l,
      points: cells.filter((c) => c.type === type && lineOf(c) === l).map((c) => [c.lossWindowShare * 100, value(c) ?? NaN] as [number, number]),
    }));
  return panels(
    types.flatMap((t) => {
      const limits = [...new Set(cells.filter((c) => c.type === t).map((c) => `${sizes.length > 1 ? `${c.nodes ?? 3} nodes, ` : ""}latency ${c.latency}|${c.physicalLimitMs}`))].map((x) => x.split("|"));
      const losses = [...new Set(cells.map((c) => c.lossWindowShare * 100))];
      return [
        lineChart({
          title: `${t}: convergence p95 after the last update`,
          series: [
            ...series(t, (c) => c.convergenceMs.p95),
            ...limits.map(([where, ms]) => ({ name: `physical limit, ${where}`, points: losses.map((x) => [x, Number(ms)] as [number, number]) })),
          ],
          xLabel: "loss windows (% of link time)",
          yLabel: "ms",
        }),
        lineChart({ title: `${t}: bytes on the wire per update`, series: series(t, (c) => c.wireBytesPerUpdate), xLabel: "loss windows (% of link time)", yLabel: "bytes (log)", logY: true }),
      ];
    }),
    { columns: 2, title: `The newer data types under latency and loss (${sizes.join(", ")} real nodes)` },
  );
}
