// The chart of a chaos summary, summary.json (npm run chaos:all): per scenario and cluster size,
// the time from heal to identical final reads, from the workload's stop to identical final reads
// (convergence after the last write, without the time under load), and the acknowledged
// operations per second.
import { type ChartSpec, barChart, panels } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface SummaryRun {
  scenario: string;
  nodes: number;
  convergenceFromHealMs: number | null;
  /** Absent in files written before it was recorded. */
  convergenceFromStopMs?: number | null;
  ackedOpsPerSec: number | null;
}

export function chaosSummaryChart(doc: ResultDoc): ChartSpec {
  const p = doc.params as { scenarios: string[]; sizes: number[] };
  const runs = doc.metrics.runs as SummaryRun[];
  // The first target counts the runs that met every target.
  const met = doc.targets[0]?.measured;
  const perSize = (value: (r: SummaryRun) => number | null) =>
    p.sizes.map((n) => ({ name: `${n} nodes`, values: p.scenarios.map((s) => { const r = runs.find((x) => x.scenario === s && x.nodes === n); return r === undefined ? null : value(r); }) }));
  return panels(
    [
      barChart({ title: "Heal to identical final reads (the workload runs on for 2 s after the heal)", yLabel: "ms", categories: p.scenarios, series: perSize((r) => r.convergenceFromHealMs), width: 860 }),
      barChart({ title: "Workload stop to identical final reads (convergence after the last write)", yLabel: "ms", categories: p.scenarios, series: perSize((r) => r.convergenceFromStopMs ?? null), width: 860 }),
      barChart({ title: "Acknowledged operations per second", yLabel: "ops/s", categories: p.scenarios, series: perSize((r) => r.ackedOpsPerSec), width: 860 }),
    ],
    { columns: 1, title: `Chaos runs: ${met} of ${runs.length} met every target` },
  );
}
