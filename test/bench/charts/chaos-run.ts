// The chart of one chaos run, <scenario>-<nodes>n.json (deltaset chaos run, npm run chaos:all):
// acknowledged and indeterminate operations per second over the run, the fault phase shaded.
import { type ChartSpec, lineChart } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";

interface RunFigures {
  lostCount: number;
  resurrectedCount: number;
  convergenceFromHealMs: number | null;
  timelineMs: { faultStart: number; heal: number };
  series: { bucketMs: number; ok: number[]; info: number[] };
}

export function chaosRunChart(doc: ResultDoc): ChartSpec {
  const p = doc.params as { scenario: string; nodes: number };
  const m = doc.metrics as unknown as RunFigures;
  const { bucketMs, ok, info } = m.series;
  const points = (counts: number[]): Array<[number, number]> => counts.map((v, i) => [((i + 1) * bucketMs) / 1000, v / (bucketMs / 1000)]);
  const conv = m.convergenceFromHealMs === null ? "no identical reads" : `identical reads ${m.convergenceFromHealMs} ms after heal`;
  return lineChart({
    title: `${p.scenario}, ${p.nodes} nodes: lost ${m.lostCount}, resurrected ${m.resurrectedCount}, ${conv}`,
    xLabel: "seconds since the workload started",
    yLabel: "operations/s",
    series: [
      { name: "acknowledged", points: points(ok) },
      { name: "indeterminate", points: points(info) },
    ],
    bands: [{ label: "fault phase", from: m.timelineMs.faultStart / 1000, to: m.timelineMs.heal / 1000 }],
    width: 640,
  });
}
