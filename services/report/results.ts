// Result files of benchmarks, reproductions and chaos runs: docs/results/<name>.json (+ .svg).
//
// Usage:
//   import { machineInfo, target, writeResults, writeChart, isQuick, commandLine } from "./lib/results.js";
//
//   const quick = isQuick();                          // true when --quick is on the command line
//   const targets = [
//     target("p99 latency under 10 ms", "< 10 ms", p99, (m) => m < 10, "npm run bench:x"),
//   ];
//   writeResults("x", { params: { quick, n }, metrics: { p99 }, targets });   // docs/results/x.json
//   writeChart("x", someChart);                                              // docs/results/x.svg
//
// The JSON file is { machine: {cpus, memory, node, platform, arch, cpuModel}, generatedAt, params,
// metrics, targets: [{name, target, measured, met, command}] }. `met` is always computed from
// `measured` by the predicate given to target(), in the run that writes the file: numbers are
// never typed in. Files go to <repo>/docs/results/ wherever the process was started from.
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Chart } from "./svg-plot.js";

export interface MachineInfo {
  cpus: number;
  /** Total memory in bytes. */
  memory: number;
  /** Node version, e.g. "v20.20.2". */
  node: string;
  platform: string;
  arch: string;
  cpuModel: string;
}

export type Measured = number | string | boolean | null;

export interface Target {
  name: string;
  /** The goal, in words a reader understands: "<= 2x", "< 40 bytes". */
  target: string;
  measured: Measured;
  met: boolean;
  /** The command that reproduces the measurement. */
  command: string;
}

export interface Results {
  params: Record<string, unknown>;
  metrics: Record<string, unknown>;
  targets: Target[];
}

/** The repository root (three levels above this file). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const resultsDir = join(repoRoot, "docs", "results");

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    memory: os.totalmem(),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    cpuModel: cpus[0]?.model.trim() ?? "unknown",
  };
}

/** A target whose `met` is computed from `measured` (a non-finite or null measurement is not met). */
export function target<M extends Measured>(
  name: string,
  goal: string,
  measured: M,
  isMet: (m: M) => boolean,
  command: string,
): Target {
  const usable = measured !== null && (typeof measured !== "number" || Number.isFinite(measured));
  return { name, target: goal, measured, met: usable && isMet(measured), command };
}

/** Write docs/results/<name>.json; returns the path. bigint values are written as strings. */
export function writeResults(name: string, results: Results): string {
  mkdirSync(resultsDir, { recursive: true });
  const path = join(resultsDir, `${name}.json`);
  const doc = { machine: machineInfo(), generatedAt: new Date().toISOString(), ...results };
  const text = JSON.stringify(doc, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2);
  writeFileSync(path, `${text}\n`);
  return path;
}

/** Write docs/results/<name>.svg from a chart made with svg-plot.ts; returns the path. */
export function writeChart(name: string, chart: Chart): string {
  mkdirSync(resultsDir, { recursive: true });
  const path = join(resultsDir, `${name}.svg`);
  writeFileSync(path, chart.svg);
  return path;
}

/** True when --quick is among the arguments. */
export function isQuick(argv: readonly string[] = process.argv): boolean {
  return argv.includes("--quick");
}

/** "npm run bench:<name>" plus " -- --quick" in quick mode: the command recorded in targets. */
export function commandLine(script: string, quick: boolean): string {
  return quick ? `npm run ${script} -- --quick` : `npm run ${script}`;
}

/** Print the targets as a small table (for the console). */
export function printTargets(targets: readonly Target[]): void {
  for (const t of targets) {
    const m = typeof t.measured === "number" ? formatMeasured(t.measured) : String(t.measured);
    console.log(`${t.met ? "MET    " : "NOT MET"}  ${t.name}: ${m} (target ${t.target})`);
  }
}

function formatMeasured(x: number): string {
  return Math.abs(x) >= 100 ? x.toFixed(0) : x.toPrecision(3);
}
