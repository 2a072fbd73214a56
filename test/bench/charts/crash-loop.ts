// The chart of docs/results/crash-loop.json (npm run chaos:crash-loop): per loop, the time from
// the restart of the killed node to every node reading its acknowledged write.
import { type ChartSpec, lineChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

export function crashLoopChart(doc: ResultDoc): ChartSpec {
  const loops = doc.params.loops as number;
  const replicateMs = doc.metrics.replicateMs as number[];
  return lineChart({
    title: `Ack, SIGKILL, restart: restart to identical reads on 3 nodes (${doc.metrics.replicated as number} of ${loops} loops)`,
    xLabel: "loop",
    yLabel: "ms",
    series: [{ name: "restart → every node reads the write", points: replicateMs.map((ms, i) => [i + 1, ms] as [number, number]) }],
  });
}
