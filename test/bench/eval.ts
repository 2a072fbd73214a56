// npm run eval [-- --quick | --retarget]
// The evaluation sweep on real node processes: sync mode (full state, Algorithm 1, Algorithm 2,
// Algorithm 2 + BP + RR) × cluster size × link latency × gossip loss, every peer link through its
// own Toxiproxy-API proxy (services/chaos/eval/). Writes docs/results/eval.json and eval.svg
// (--quick: a reduced grid, written to a temporary directory; the committed results stay those of
// the full run) and prints one line per cell and the targets. --retarget recomputes the committed
// run's ratios and targets from its cells without measuring.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { evalGrid } from "../../services/chaos/eval/grid.js";
import { byteRatios, lagRatios, sweepTargets } from "../../services/chaos/eval/targets.js";
import { type FailedCell, isMeasured, runSweep } from "../../services/chaos/eval/sweep.js";
import type { CellResult } from "../../services/chaos/eval/cell.js";
import { writeResultFile } from "../../services/common/result-file.js";
import { drawChart } from "./charts/draw.js";
import { commandLine, isQuick, printTargets, resultsDir, target } from "./lib/results.js";

const quick = isQuick();
const grid = evalGrid(quick);
const command = commandLine("eval", quick);
const started = Date.now();
const fmt = (x: number | null, digits = 0) => (x === null ? "n/a" : x.toFixed(digits));
const dir = quick ? mkdtempSync(join(tmpdir(), "deltaset-eval-")) : resultsDir;
const cells: CellResult[] = [];
const failed: FailedCell[] = [];
/** What the results file derives from the cells: byte and lag ratios, and the targets. */
function derived() {
  return {
    metrics: {
      cells,
      failed,
      ratios: {
        "alg2+bp+rr": byteRatios(cells, "alg2+bp+rr"),
        "alg2+bp+rr+push": byteRatios(cells, "alg2+bp+rr+push"),
        alg2: byteRatios(cells, "alg2"),
        alg1: byteRatios(cells, "alg1"),
      },
      // Replication lag p95 without loss over one gossip period plus one link latency, per mode:
      // the target reads the push mode; the others are for comparison.
      lagRatios: Object.fromEntries(["alg2+bp+rr+push", "alg2+bp+rr", "alg2", "alg1", "full-state"].map((m) => [m, lagRatios(cells, m, grid.gossipIntervalMs)])),
    },
    targets: [...sweepTargets(cells, grid.gossipIntervalMs, command), target("cells of the grid that could not be measured", "0", failed.length, (m) => m === 0, command)],
  };
}
/** The results file, rewritten after every cell: a run cut short still leaves what it measured. */
function write(complete: boolean): string {
  const minutes = (Date.now() - started) / 60_000;
  return writeResultFile(join(dir, "eval.json"), {
    params: {
      quick,
      grid,
      complete,
      cellsDone: cells.length,
      cellsFailed: failed.length,
      minutes: Number(minutes.toFixed(1)),
      lossMechanism: "reset_peer toxic windows on the upstream stream of one directed peer link at a time (services/chaos/eval/loss-windows.ts)",
    },
    ...derived(),
  });
}
if (process.argv.includes("--retarget")) {
  // The ratios and targets of the committed full run recomputed from its cells (after a change to
  // what a target reads), measuring nothing: the cells, parameters and run time stay as measured.
  const path = join(resultsDir, "eval.json");
  const run = JSON.parse(readFileSync(path, "utf8"));
  cells.push(...run.metrics.cells);
  failed.push(...run.metrics.failed);
  writeResultFile(path, { params: { ...run.params, measuredAt: run.params.measuredAt ?? run.generatedAt, targetsRecomputedAt: new Date().toISOString() }, ...derived() });
  await drawChart(path);
  printTargets(JSON.parse(readFileSync(path, "utf8")).targets);
  process.exit(0);
}
await runSweep({
  grid,
  firstHost: 141,
  port: 7270,
  seed: 20261124,
  log: (l) => console.log(l),
  onCell: (c, done, total) => {
    if (!isMeasured(c)) {
      failed.push(c);
      write(false);
      console.log(`[${done}/${total}] ${c.nodes}n ${c.mode} lat ${c.latency} loss ${c.loss}: NOT MEASURED: ${c.failed}`);
      return;
    }
    cells.push(c);
    write(false);
    console.log(
      `[${done}/${total}] ${c.nodes}n ${c.mode.padEnd(10)} lat ${c.latency.padEnd(9)} loss ${c.loss.padEnd(4)}: conv p95 ${fmt(c.convergenceMs.p95)} ms (limit ${c.physicalLimitMs}), lag p95 ${fmt(c.lagMs.p95)} ms, ` +
        `${fmt(c.wireBytesPerUpdate)} B/update on the wire, loss measured ${fmt(c.measuredLoss.rate === null ? null : c.measuredLoss.rate * 100, 1)}%, fallbacks ${c.stateFallbacks}, cpu ${fmt(c.cpuMsPerSecond.mean)} ms/s, valid ${c.valid}`,
    );
  },
});
const minutes = (Date.now() - started) / 60_000;
const path = write(true);
const targets = JSON.parse(readFileSync(path, "utf8")).targets;
await drawChart(path);
printTargets(targets);
console.log(`${cells.length} cells in ${minutes.toFixed(1)} min; results: ${path}`);
