// The chart of docs/results/replica.json (npm run bench:replica): Add latency by set size in
// process (fsync and buffered) and over gRPC, gRPC throughput, and the telemetry overhead.
import { type ChartSpec, barChart, lineChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface LayoutRow {
  size: number;
  decomposedP50: number;
  baselineP50: number;
}

interface ReplicaFigures {
  layout: { fsync: LayoutRow[]; buffered: LayoutRow[] };
  grpc: { singleOpsPerSec: number; batchElementsPerSec: number; latency: Array<{ size: number; p50: number; p99: number }> };
  telemetry: { offOpsPerSec: number; metricsOpsPerSec: number; onOpsPerSec: number; overhead: number };
  ceilings?: { means: { storageCeiling: number | null }; streams?: Array<{ perMessage: number; noopMean: number; nodeMean: number }> };
}

function layoutLatency(rows: LayoutRow[], title: string): ChartSpec {
  return lineChart({
    title,
    xLabel: "elements in the set",
    yLabel: "Add p50 latency (ms)",
    logX: true,
    logY: true,
    series: [
      { name: "decomposed (deltaset)", points: rows.map((r) => [r.size, r.decomposedP50]) },
      { name: "object per set (baseline)", points: rows.map((r) => [r.size, r.baselineP50]) },
    ],
  });
}

export function replicaChart(doc: ResultDoc): ChartSpec {
  const m = doc.metrics as unknown as ReplicaFigures;
  const { grpc, telemetry } = m;
  const streams = m.ceilings?.streams;
  const storage = m.ceilings?.means.storageCeiling;
  return panels(
    [
      layoutLatency(m.layout.fsync, "Add latency, sync=fsync (in-process)"),
      layoutLatency(m.layout.buffered, "Add latency, sync=buffered (in-process)"),
      lineChart({
        title: "Add latency over gRPC, real node",
        xLabel: "elements in the set",
        yLabel: "latency (ms)",
        logX: true,
        series: [
          { name: "p50", points: grpc.latency.map((r) => [r.size, r.p50]) },
          { name: "p99", points: grpc.latency.map((r) => [r.size, r.p99]) },
        ],
      }),
      barChart({
        title: "Throughput over gRPC",
        categories: ["single Add, 32 clients (ops/s)", "batch Add x1000 (elements/s)"],
        series: [{ name: "deltaset", values: [grpc.singleOpsPerSec, grpc.batchElementsPerSec] }],
        yLabel: "per second",
        logY: true,
      }),
      barChart({
        title: `Telemetry overhead on single Add: ${(telemetry.overhead * 100).toFixed(1)}%`,
        categories: ["telemetry off", "metrics", "metrics + tracing"],
        series: [{ name: "ops/s, 32 clients", values: [telemetry.offOpsPerSec, telemetry.metricsOpsPerSec, telemetry.onOpsPerSec] }],
        yLabel: "ops/s",
      }),
      ...(streams === undefined
        ? []
        : [
            lineChart({
              title: "AddStream by elements per message (fsync), same run",
              xLabel: "elements per message",
              yLabel: "acknowledged elements/s",
              logX: true,
              logY: true,
              series: [
                { name: "no-op stream", points: streams.map((s) => [s.perMessage, s.noopMean]) },
                { name: "deltaset node", points: streams.map((s) => [s.perMessage, s.nodeMean]) },
                { name: "0.5x no-op (target)", points: streams.map((s) => [s.perMessage, s.noopMean / 2]) },
                ...(storage == null ? [] : [{ name: "LevelDB puts alone", points: streams.map((s): [number, number] => [s.perMessage, storage]) }]),
              ],
            }),
          ]),
    ],
    { columns: 2, title: `deltaset replica benchmark${doc.params.quick ? " (quick)" : ""}` },
  );
}
