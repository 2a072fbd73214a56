// The chart of docs/results/add-stream-routing.json (npm run bench:add-stream-routing): AddStream
// acknowledged elements/s through every node of 5, with every node holding every key (R = all)
// and with R = 3 (two batches in five forwarded to an owner), per round.
import { type ChartSpec, barChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

export function addStreamRoutingChart(doc: ResultDoc): ChartSpec {
  const rounds = (doc.metrics as { rounds: Array<{ all: number; r3: number }> }).rounds;
  return barChart({
    title: "AddStream through 5 nodes: acknowledged elements/s, R = all vs R = 3, alternated rounds",
    categories: rounds.map((_, i) => `round ${i + 1}`),
    series: [
      { name: "R = all", values: rounds.map((r) => r.all) },
      { name: "R = 3", values: rounds.map((r) => r.r3) },
    ],
    yLabel: "elements/s",
  });
}
