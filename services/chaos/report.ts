// Result files of a chaos run: <dir>/<scenario>-<nodes>n.json in the shape every benchmark uses
// ({machine, generatedAt, params, metrics, targets}, `met` computed from `measured`) and an SVG
// of acknowledged and indeterminate operations per second over the run, with the fault phase.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { machineInfo, repoRoot, target, type Target } from "../report/results.js";
import { lineChart } from "../report/svg-plot.js";
import type { RunResult } from "./run.js";

export const DEFAULT_RESULTS_DIR = join(repoRoot, "docs", "results", "chaos");

/** Most convergence time from heal to identical reads that counts as met (ms). */
export const CONVERGENCE_TARGET_MS = 5000;

export function runCommand(r: RunResult): string {
  const p = r.params;
  return `npx deltaset chaos run ${r.scenario} --nodes ${r.nodes} --duration ${Number(p.faultMs) / 1000} --clients ${p.clients} --seed ${p.seed}`;
}

export function runTargets(r: RunResult, command = runCommand(r)): Target[] {
  return [
    target("acknowledged adds lost", "0", r.check.lostCount, (m) => m === 0, command),
    target("removed elements that came back", "0", r.check.resurrectedCount, (m) => m === 0, command),
    target("acknowledged removes that left an element their context covered", "0", r.check.ignoredRemoveCount, (m) => m === 0, command),
    target("nodes whose final reads differ", "0", r.check.divergence.nodes.length, (m) => m === 0, command),
    target("elements no add wrote", "0", r.check.unexpected.length, (m) => m === 0, command),
    target(`identical final reads within ${CONVERGENCE_TARGET_MS / 1000} s of heal`, `<= ${CONVERGENCE_TARGET_MS} ms`, r.convergenceFromHealMs, (m) => m !== null && m <= CONVERGENCE_TARGET_MS, command),
  ];
}

/** The metrics section: the checker's report (long lists cut to their first entries) and the run's figures. */
export function runMetrics(r: RunResult): Record<string, unknown> {
  const c = r.check;
  return {
    valid: c.valid,
    lostCount: c.lostCount,
    lost: c.lost.slice(0, 20),
    resurrectedCount: c.resurrectedCount,
    resurrected: c.resurrected.slice(0, 20),
    excusedByIndeterminateAdd: c.excusedByIndeterminateAdd,
    removesWithoutEffect: c.removesWithoutEffect,
    ignoredRemoveCount: c.ignoredRemoveCount,
    ignoredRemoves: c.ignoredRemoves.slice(0, 20),
    divergence: c.divergence,
    unexpected: c.unexpected.slice(0, 20),
    unexpectedCount: c.unexpected.length,
    ops: c.ops,
    elements: c.elements,
    ackedOpsPerSec: Number(c.ackedOpsPerSec.toFixed(1)),
    convergenceFromHealMs: r.convergenceFromHealMs,
    convergenceFromStopMs: r.convergenceFromStopMs,
    finalReadRounds: r.finalReadRounds,
    gossipBytes: r.gossipBytes,
    gossipBytesPerNode: r.gossipBytesPerNode,
    gossipBytesNote: r.gossipBytesNote,
    steps: r.steps,
    timelineMs: {
      faultStart: r.timeline.faultStart - r.timeline.workloadStart,
      heal: r.timeline.healAt - r.timeline.workloadStart,
      workloadStop: r.timeline.workloadStop - r.timeline.workloadStart,
      identical: r.timeline.identicalAt === null ? null : r.timeline.identicalAt - r.timeline.workloadStart,
    },
    series: r.series,
    dataDir: r.dataDir,
  };
}

export function runChart(r: RunResult): string {
  const { bucketMs, ok, info } = r.series;
  const perSec = (v: number) => v / (bucketMs / 1000);
  const pts = (vals: number[]): Array<[number, number]> => vals.map((v, i) => [((i + 1) * bucketMs) / 1000, perSec(v)]);
  const peak = Math.max(1, ...ok.map(perSec), ...info.map(perSec));
  const from = (r.timeline.faultStart - r.timeline.workloadStart) / 1000;
  const heal = (r.timeline.healAt - r.timeline.workloadStart) / 1000;
  const conv = r.convergenceFromHealMs === null ? "no identical reads" : `identical reads ${r.convergenceFromHealMs} ms after heal`;
  return lineChart({
    title: `${r.scenario}, ${r.nodes} nodes: lost ${r.check.lostCount}, resurrected ${r.check.resurrectedCount}, ${conv}`,
    xLabel: "seconds since the workload started",
    yLabel: "operations/s",
    series: [
      { name: "acknowledged", points: pts(ok) },
      { name: "indeterminate", points: pts(info) },
      { name: "fault phase", points: [[from, peak * 1.05], [heal, peak * 1.05]] },
    ],
  }).svg;
}

/** Write <dir>/<scenario>-<nodes>n.json and .svg; returns the JSON path. */
export function writeRunResults(r: RunResult, dir = DEFAULT_RESULTS_DIR, command?: string): string {
  mkdirSync(dir, { recursive: true });
  const name = `${r.scenario}-${r.nodes}n`;
  const doc = { machine: machineInfo(), generatedAt: new Date().toISOString(), params: r.params, metrics: runMetrics(r), targets: runTargets(r, command) };
  const path = join(dir, `${name}.json`);
  writeFileSync(path, `${JSON.stringify(doc, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2)}\n`);
  writeFileSync(join(dir, `${name}.svg`), runChart(r));
  return path;
}
