// The chart of docs/results/sync.json (npm run bench:sync): bytes sent by each anti-entropy
// protocol in simulation (relative to full-state sync, and per update) and on a real cluster.
import { type ChartSpec, barChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface SyncFigures {
  simulated: {
    ratios: Record<string, Record<string, number>>;
    runs: Array<{ overlay: string; protocol: string; bytesPerUpdate: number }>;
  };
  real: { runs: Array<{ protocol: string; bytesPerUpdate: number; lagMs: { p50: number; p99: number } }> };
}

const protocolLabel = (p: string) => (p === "state" ? "full state" : p);

export function syncChart(doc: ResultDoc): ChartSpec {
  const params = doc.params.simulated as { protocols: string[]; updatePeriods: number };
  const { simulated: sim, real } = doc.metrics as unknown as SyncFigures;
  const overlays = Object.keys(sim.ratios);
  const byProtocol = (value: (overlay: string, protocol: string) => number | undefined) =>
    params.protocols.map((p) => ({ name: protocolLabel(p), values: overlays.map((o) => value(o, p) ?? null) }));
  const ratio = barChart({
    title: "Bytes sent relative to full-state sync",
    categories: overlays,
    series: byProtocol((o, p) => sim.ratios[o]?.[p]),
    yLabel: "ratio (log)",
    logY: true,
  });
  const perUpdate = barChart({
    title: "Bytes sent per update",
    categories: overlays,
    series: byProtocol((o, p) => sim.runs.find((r) => r.overlay === o && r.protocol === p)?.bytesPerUpdate),
    yLabel: "bytes (log)",
    logY: true,
  });
  const realChart = barChart({
    title: "Real 3-node cluster: bytes per update and lag",
    categories: real.runs.map((r) => protocolLabel(r.protocol)),
    series: [
      { name: "bytes per update", values: real.runs.map((r) => r.bytesPerUpdate) },
      { name: "lag p50 (ms)", values: real.runs.map((r) => r.lagMs.p50) },
      { name: "lag p99 (ms)", values: real.runs.map((r) => r.lagMs.p99) },
    ],
    yLabel: "log scale",
    logY: true,
  });
  return panels([ratio, perUpdate, realChart], {
    columns: 2,
    title: `Simulated sync, 15 nodes, ${params.updatePeriods} updates/node (Enes et al. ICDE 2019 setup)`,
  });
}
