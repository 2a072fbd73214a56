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

interface Placement {
  nodes: number;
  partitions: number;
  perNode: { maxOverMean: number };
  joinMoved: number;
  joinIdeal: number;
}

export function scaleChart(doc: ResultDoc): ChartSpec {
  const runs = (doc.metrics as { runs: Run[] }).runs;
  const placed = (doc.metrics as { placed?: Array<{ nodes: number; bytesPerUpdate: number; periodsToConverge: number }> }).placed ?? [];
  const placements = (doc.metrics as { placements?: Placement[] }).placements ?? [];
  const byPartitions = (value: (p: Placement) => number) =>
    [...new Set(placements.map((p) => p.partitions))].map((count) => ({
      name: `${count} partitions`,
      points: placements.filter((p) => p.partitions === count).map((p) => [p.nodes, value(p)] as [number, number]),
    }));
  const series = (value: (r: Run) => number) =>
    ["fingers", "all"].map((o) => ({ name: o === "all" ? "full mesh" : "finger overlay", points: runs.filter((r) => r.overlay === o).map((r) => [r.nodes, value(r)] as [number, number]) }));
  return panels(
    [
      lineChart({
        title: "Bytes per update (until every delta is acknowledged)",
        series: [...series((r) => r.bytesPerUpdate), ...(placed.length === 0 ? [] : [{ name: "placement, R = 3 (owners only)", points: placed.map((p) => [p.nodes, p.bytesPerUpdate] as [number, number]) }])],
        xLabel: "nodes (log)",
        yLabel: "bytes (log)",
        logX: true,
        logY: true,
      }),
      lineChart({ title: "Periods from the last update to convergence", series: series((r) => r.periodsToConverge), xLabel: "nodes (log)", yLabel: "gossip periods", logX: true }),
      ...(placements.length === 0
        ? []
        : [
            lineChart({ title: "Placement, R = 3: most partitions on one node / mean", series: byPartitions((p) => p.perNode.maxOverMean), xLabel: "nodes (log)", yLabel: "max / mean", logX: true }),
            lineChart({ title: "Placement: copies one join moves / ideal 1/(N+1)", series: byPartitions((p) => p.joinMoved / p.joinIdeal), xLabel: "nodes (log)", yLabel: "ratio", logX: true }),
          ]),
    ],
    { columns: 2, title: "Gossip overlay at scale (simulator: real engine, exchange and stores)" },
  );
}
