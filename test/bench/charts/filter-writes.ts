// The chart of docs/results/filter-writes.json (npm run bench:filter-writes): single-element Add,
// Query and Remove p50 on one node by filter type and capacity (filter half full), and the first
// Query after a restart, log scale.
import { type ChartSpec, barChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Cell {
  type: string;
  capacity: number;
  addP50Ms: number;
  queryP50Ms: number;
  removeP50Ms: number | null;
  coldQueryMs?: number;
}

export function filterWritesChart(doc: ResultDoc): ChartSpec {
  const cells = (doc.metrics.cells as Cell[]) ?? [];
  const capacities = [...new Set(cells.map((c) => c.capacity))];
  const types = [...new Set(cells.map((c) => c.type))];
  const chart = (title: string, value: (c: Cell) => number | null) =>
    barChart({
      title,
      categories: types,
      xLabel: "filter type",
      yLabel: "p50 ms (log)",
      logY: true,
      series: capacities.map((cap) => ({ name: `capacity ${cap.toLocaleString("en")}`, values: types.map((t) => { const c = cells.find((x) => x.type === t && x.capacity === cap); return c === undefined ? null : value(c); }) })),
    });
  return panels(
    [chart("Single-element Add (fsync), filter half full", (c) => c.addP50Ms), chart("Query of one element", (c) => c.queryP50Ms), chart("Remove of one element (ORCF, AWSET_PROB)", (c) => c.removeP50Ms), chart("First Query after a restart (reads the filter back)", (c) => c.coldQueryMs ?? null)],
    { columns: 4, title: "One operation on a filter key as it grows, one node" },
  );
}
