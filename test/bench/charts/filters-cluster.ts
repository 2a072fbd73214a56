// The chart of docs/results/filters-cluster.json (npm run bench:filters-cluster): per filter type,
// the false-positive rate on 5 nodes against the in-process references, and bytes on the wire per
// key for deltas and full states, without and with gossip loss.
import { type ChartSpec, barChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Cell {
  type: string;
  mode: string;
  loss: string;
  fpr: number;
  reference: { single: number; pair: number };
  wireBytesPerKey: number;
}

export function filtersClusterChart(doc: ResultDoc): ChartSpec {
  const cells = (doc.metrics as { cells: Cell[] }).cells;
  const types = [...new Set(cells.map((c) => c.type))];
  const variants = [...new Set(cells.map((c) => `${c.mode}, loss ${c.loss}`))];
  const cellOf = (t: string, v: string) => cells.find((c) => c.type === t && `${c.mode}, loss ${c.loss}` === v);
  return panels(
    [
      barChart({
        title: "False-positive rate on fresh keys (5 nodes, and in one process)",
        categories: types,
        series: [
          ...variants.map((v) => ({ name: `5 nodes: ${v}`, values: types.map((t) => (cellOf(t, v)?.fpr ?? NaN) * 100) })),
          { name: "one process, two replicas joined", values: types.map((t) => (cells.find((c) => c.type === t)?.reference.pair ?? NaN) * 100) },
        ],
        yLabel: "% of fresh keys reported present",
      }),
      barChart({
        title: "Bytes on the wire per key added (5 nodes)",
        categories: types,
        series: variants.map((v) => ({ name: v, values: types.map((t) => cellOf(t, v)?.wireBytesPerKey ?? NaN) })),
        yLabel: "bytes per key (log)",
        logY: true,
      }),
    ],
    { columns: 2, title: "Replicated filters on a 5-node cluster under gossip loss" },
  );
}
