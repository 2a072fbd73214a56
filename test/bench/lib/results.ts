// Result files of benchmarks and reproductions: docs/results/<name>.json, in the document shape of
// services/common/result-file.ts. Their charts (docs/results/<name>.svg) are drawn from these
// files by ../charts/draw.ts, so `npm run plots` can redraw them without measuring again.
//
// Usage:
//   import { target, writeResults, isQuick, commandLine, printTargets } from "./lib/results.js";
//   import { drawChart } from "./charts/draw.js";
//
//   const quick = isQuick();                          // true when --quick is on the command line
//   const targets = [
//     target("p99 latency under 10 ms", "< 10 ms", p99, (m) => m < 10, "npm run bench:x"),
//   ];
//   const path = writeResults("x", { params: { quick, n }, metrics: { p99 }, targets });  // docs/results/x.json
//   await drawChart(path);                                                               // docs/results/x.svg
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Results, type Target, writeResultFile } from "../../../services/common/result-file.js";

export { machineInfo, target, type MachineInfo, type Measured, type Results, type Target } from "../../../services/common/result-file.js";

/** The repository root (three levels above this file). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const resultsDir = join(repoRoot, "docs", "results");

/** Write docs/results/<name>.json; returns the path. */
export function writeResults(name: string, results: Results): string {
  return writeResultFile(join(resultsDir, `${name}.json`), results);
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

/** A result file as read back: what the charts are drawn from. */
export interface ResultDoc {
  params: Record<string, unknown>;
  metrics: Record<string, unknown>;
  targets: Target[];
}
