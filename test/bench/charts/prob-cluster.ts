// The chart of docs/results/prob-cluster.json (npm run bench:prob-cluster): metadata per key as
// nodes are replaced by new identities, elements where the probabilistic set and the exact one
// differ at each quiescent checkpoint, and bytes on the wire per operation of each key alone.
import { type ChartSpec, barChart, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface Checkpoint {
  op: number;
  replicaIds: number;
  awsetContextBytes: number;
  apbfBytesSent: number;
  apbfBytesDense: number;
  onlyProb: number;
  onlyExact: number;
}

interface Metrics {
  both: { checkpoints: Checkpoint[]; rssMiB: number[] };
  exactOnly: { wireBytesPerOp: number; opBytesPerOp?: number; rssMiB: number[] };
  probOnly: { wireBytesPerOp: number; opBytesPerOp?: number; rssMiB: number[] };
}

export function probClusterChart(doc: ResultDoc): ChartSpec {
  const m = doc.metrics as unknown as Metrics;
  const cps = m.both.checkpoints;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return panels(
    [
      lineChart({
        title: "Metadata a full-state sync carries, as nodes are replaced",
        series: [
          { name: "AWSET causal context", points: cps.map((c) => [c.op, c.awsetContextBytes] as [number, number]) },
          { name: "AWSET_PROB filter, as sent (sparse)", points: cps.map((c) => [c.op, c.apbfBytesSent] as [number, number]) },
          { name: "AWSET_PROB filter, dense", points: cps.map((c) => [c.op, c.apbfBytesDense] as [number, number]) },
        ],
        xLabel: "operations",
        yLabel: "bytes (log)",
        logY: true,
      }),
      barChart({
        title: "Elements where AWSET_PROB differs from the exact AWSET",
        categories: cps.map((c) => `op ${c.op}`),
        series: [
          { name: "only in AWSET_PROB (a forgotten remove)", values: cps.map((c) => c.onlyProb) },
          { name: "only in AWSET (a lost add)", values: cps.map((c) => c.onlyExact) },
        ],
        yLabel: "elements",
      }),
      barChart({
        title: "Bytes on the wire per operation, each key alone; mean node RSS",
        categories: ["bytes per operation", "the same, idle traffic removed", "mean RSS (MiB)"],
        series: [
          { name: "AWSET", values: [m.exactOnly.wireBytesPerOp, m.exactOnly.opBytesPerOp ?? NaN, mean(m.exactOnly.rssMiB)] },
          { name: "AWSET_PROB", values: [m.probOnly.wireBytesPerOp, m.probOnly.opBytesPerOp ?? NaN, mean(m.probOnly.rssMiB)] },
        ],
        yLabel: "value",
      }),
    ],
    { columns: 2, title: "The probabilistic add-wins set on 8 nodes under churn" },
  );
}
