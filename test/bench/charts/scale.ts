// The chart of docs/results/scale.json (npm run bench:scale): bytes per update and periods to
// converge against the node count, for the finger overlay and the full mesh.
import { type ChartSpec, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Run {
  overlay: string;
  nodes: number;
  bytesPerUpdate: number;
  periodsToConverge: number;
}

export function scaleChart(doc: ResultDoc): ChartSpec {
  const runs = (doc.metrics as { runs: Run[] }).runs;
  const series = (value: (r: Run) => number) =>
    ["fingers", "all"].map((o) => ({ name: o === "all" ? "full mesh" : "finger overlay", points: runs.filter((r) => r.overlay === o).map((r) => [r.nodes, value(r)] as [number, number]) }));
  return panels(
    [
      lineChart({ title: "Bytes per update (until every delta is acknowledged)", series: series((r) => r.bytesPerUpdate), xLabel: "nodes (log)", yLabel: "bytes (log)", logX: true, logY: true }),
      lineChart({ title: "Periods from the last update to convergence", series: series((r) => r.periodsToConverge), xLabel: "nodes (log)", yLabel: "gossip periods", logX: true }),
    ],
    { columns: 2, title: "Gossip overlay at scale (simulator: real engine, exchange and stores)" },
  );
}
