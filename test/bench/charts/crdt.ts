// The chart of docs/results/crdt.json (npm run bench:crdt): kernel throughput and bytes per
// element by set size, and the cost of one delta join against a plain Map baseline.
import { type ChartSpec, barChart, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

/** The figures of one set size that the chart shows (a subset of what the bench records). */
interface SizeFigures {
  addDeltaOpsPerSec: number;
  removeDeltaOpsPerSec: number;
  deltaJoinPerSec: number;
  deltaJoinMedianNs: number;
  deltaJoinP99Ns: number;
  plainMapChurnOpsPerSec: number;
  fullJoinElementsPerSec: number;
  fullJoinWireOrderElementsPerSec: number;
  encodeElementsPerSec: number;
  decodeElementsPerSec: number;
  encodedBytesPerElement: number;
  heapBytesPerElement: number | null;
}

/** 1000 → "1k", 1000000 → "1M": the keys of metrics.bySize. */
export function sizeLabel(n: number): string {
  return n >= 1e6 ? `${n / 1e6}M` : n >= 1e3 ? `${n / 1e3}k` : String(n);
}

export function crdtChart(doc: ResultDoc): ChartSpec {
  const sizes = doc.params.sizes as number[];
  const bySize = doc.metrics.bySize as Record<string, SizeFigures>;
  const at = (n: number) => bySize[sizeLabel(n)]!;
  const throughput = barChart({
    title: "AWSet kernel throughput by set size",
    yLabel: "operations or elements per second (log)",
    logY: true,
    categories: ["addDelta (ops/s)", "removeDelta (ops/s)", "delta join (deltas/s)", "full join (elements/s)", "full join, wire order (elements/s)", "encode (elements/s)", "decode (elements/s)"],
    series: sizes.map((n) => {
      const m = at(n);
      return {
        name: `${sizeLabel(n)} elements`,
        values: [m.addDeltaOpsPerSec, m.removeDeltaOpsPerSec, m.deltaJoinPerSec, m.fullJoinElementsPerSec, m.fullJoinWireOrderElementsPerSec, m.encodeElementsPerSec, m.decodeElementsPerSec],
      };
    }),
    width: 820,
    height: 300,
  });
  const bytes = barChart({
    title: "Bytes per element",
    yLabel: "bytes per element",
    categories: ["encoded (protobuf)", "heap (V8, after gc)"],
    series: sizes.map((n) => ({ name: `${sizeLabel(n)} elements`, values: [at(n).encodedBytesPerElement, at(n).heapBytesPerElement] })),
    xLabel: "8-byte elements, one or two replicas' dots",
    width: 380,
    height: 300,
  });
  const latency = lineChart({
    title: "Cost of joining one single-element delta, by set size",
    xLabel: "elements in the set (log)",
    yLabel: "nanoseconds per join (log)",
    logX: true,
    logY: true,
    series: [
      { name: "median join", points: sizes.map((n) => [n, at(n).deltaJoinMedianNs]) },
      { name: "p99 join", points: sizes.map((n) => [n, at(n).deltaJoinP99Ns]) },
      { name: "mean join (wall clock)", points: sizes.map((n) => [n, 1e9 / at(n).deltaJoinPerSec]) },
      { name: "plain Map insert/delete (baseline)", points: sizes.map((n) => [n, 1e9 / at(n).plainMapChurnOpsPerSec]) },
    ],
    width: 820,
    height: 280,
  });
  return panels([throughput, bytes, latency], { columns: 2, title: `deltaset CRDT kernel (${doc.params.quick ? "quick" : "full"} run)` });
}
