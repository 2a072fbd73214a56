// The result file of a chaos run: <dir>/<scenario>-<nodes>n.json in the shape every benchmark uses
// ({machine, generatedAt, params, metrics, targets}, `met` computed from `measured`). Its chart
// (operations per second over the run, with the fault phase) is drawn from this file by the
// benchmarks (npm run chaos:all, npm run plots), not by the node's command line.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { target, type Target, writeResultFile } from "../common/result-file.js";
import type { RunResult } from "./run.js";

export const DEFAULT_RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "results", "chaos");

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
    target("reads that missed an add the reading node had acknowledged before them (no remove invoked meanwhile)", "0", r.check.staleReadCount, (m) => m === 0, command),
    target("reads that saw an element no add had been invoked for", "0", r.check.phantomReads.length, (m) => m === 0, command),
    target("final Query answers that disagree with the node's own Scan", "0", r.finalQueries.mismatchCount, (m) => m === 0, command),
    target("links whose proxy passed no traffic (faults could not reach them)", "0", r.linkTraffic.measured ? r.linkTraffic.silentLinks.length : null, (m) => m === 0, command),
    target(`identical final reads within ${CONVERGENCE_TARGET_MS / 1000} s of heal`, `<= ${CONVERGENCE_TARGET_MS} ms`, r.convergenceFromHealMs, (m) => m !== null && m <= CONVERGENCE_TARGET_MS, command),
    target(
      "identical states, causal contexts included (state digests), within the settle bound of the workload's stop",
      "every node the same",
      r.statesFromHealMs,
      (m) => typeof m === "number",
      command,
    ),
  ];
}

/** The metrics section: the checker's report (long lists cut to their first entries) and the run's figures. */
export function runMetrics(r: RunResult): Record<string, unknown> {
  const c = r.check;
  return {
    valid: r.valid,
    checkerValid: c.valid,
    problems: r.problems,
    staleReadCount: c.staleReadCount,
    staleReads: c.staleReads.slice(0, 20),
    phantomReads: c.phantomReads.slice(0, 20),
    readAnswersChecked: c.readAnswersChecked,
    finalQueries: r.finalQueries,
    linkTraffic: r.linkTraffic,
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
    statesFromHealMs: r.statesFromHealMs,
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

/** Write <dir>/<scenario>-<nodes>n.json; returns its path. */
export function writeRunResults(r: RunResult, dir = DEFAULT_RESULTS_DIR, command?: string): string {
  return writeResultFile(join(dir, `${r.scenario}-${r.nodes}n.json`), { params: r.params, metrics: runMetrics(r), targets: runTargets(r, command) });
}
