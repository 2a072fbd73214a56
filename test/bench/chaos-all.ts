// npm run chaos:all [-- --quick] [-- --duration S] [-- --seed X] [-- --only a,b]
// Every fault scenario on 3 and on 5 local nodes (peer links through per-link fault proxies),
// one after another: writes docs/results/chaos/<scenario>-<n>n.json + .svg per run, and
// docs/results/chaos/summary.md, summary.json and summary.svg; prints the table.
// Targets per run: 0 acknowledged adds lost, 0 removed elements back, identical final reads
// within 5 s of the heal, then identical states (state digests, contexts included). Then the acknowledged-write crash loop (crash-loop.ts, 200 loops).
// --quick: two scenarios on 3 nodes with short faults, results in a
// temporary directory (the committed results stay those of the full run).
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { SCENARIOS } from "../../services/chaos/plan.js";
import { CONVERGENCE_TARGET_MS, DEFAULT_RESULTS_DIR, runCommand, runTargets, writeRunResults } from "../../services/chaos/report.js";
import { type RunResult, runScenario } from "../../services/chaos/run.js";
import { bar } from "../../services/cli/output.js";
import { drawChart } from "./charts/draw.js";
import { commandLine, machineInfo, target, type Target } from "./lib/results.js";
import { crashLoopBench } from "./crash-loop.ts";

interface Row {
  scenario: string;
  nodes: number;
  seed: number;
  result?: RunResult;
  error?: string;
  targets: Target[];
}

function fmtBytes(b: number | null): string {
  if (b === null) return "n/a";
  if (b >= 1e6) return `${(b / 1e6).toFixed(1)} MB`;
  if (b >= 1e3) return `${(b / 1e3).toFixed(0)} kB`;
  return `${b} B`;
}

export function summaryTable(rows: Row[]): string {
  const head = [
    "| scenario | nodes | lost | resurrected | ignored removes | divergent nodes | heal → identical reads (workload runs 2 s more) | workload stop → identical reads | heal → identical states | acked ops/s | adds ok / indeterminate | removes ok (no effect) | gossip bytes | met |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
  ];
  const body = rows.map((r) => {
    if (r.result === undefined) return `| ${r.scenario} | ${r.nodes} | – | – | – | – | – | – | – | – | – | – | – | run failed: ${r.error?.replace(/\|/g, "/").slice(0, 120)} |`;
    const c = r.result.check;
    const met = r.targets.every((t) => t.met);
    const secs = (ms: number | null) => (ms === null ? "never" : `${(ms / 1000).toFixed(2)} s`);
    const conv = secs(r.result.convergenceFromHealMs);
    const afterStop = secs(r.result.convergenceFromStopMs);
    const states = r.result.statesFromHealMs === "unknown" ? "n/a" : secs(r.result.statesFromHealMs);
    const div = c.divergence.nodes.length === 0 ? "0" : `${c.divergence.nodes.length} (${c.divergence.nodes.join(", ")})`;
    return `| ${r.scenario} | ${r.nodes} | ${c.lostCount} | ${c.resurrectedCount} | ${c.ignoredRemoveCount} | ${div} | ${conv} | ${afterStop} | ${states} | ${c.ackedOpsPerSec.toFixed(0)} | ${c.ops.add.ok} / ${c.ops.add.info} | ${c.ops.remove.ok} (${c.removesWithoutEffect}) | ${fmtBytes(r.result.gossipBytes)} | ${met ? "yes" : "**no**"} |`;
  });
  return [...head, ...body].join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      quick: { type: "boolean", default: false },
      duration: { type: "string" },
      seed: { type: "string", default: "1000" },
      only: { type: "string" },
      nodes: { type: "string" },
      out: { type: "string" },
    },
    strict: true,
  });
  const quick = values.quick === true;
  const scenarios = values.only ? values.only.split(",") : quick ? ["partition-halves", "kill-restart"] : [...SCENARIOS];
  const sizes = values.nodes ? values.nodes.split(",").map(Number) : quick ? [3] : [3, 5];
  const faultMs = Math.round(Number(values.duration ?? (quick ? 6 : 24)) * 1000);
  const baseSeed = Number(values.seed);
  const outDir = values.out ?? (quick ? mkdtempSync(join(tmpdir(), "deltaset-chaos-quick-")) : DEFAULT_RESULTS_DIR);
  mkdirSync(outDir, { recursive: true });
  const command = commandLine("chaos:all", quick);

  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort());
  process.once("SIGTERM", () => controller.abort());
  const tty = process.stderr.isTTY === true;
  const rows: Row[] = [];
  const total = scenarios.length * sizes.length;
  for (const nodes of sizes) {
    for (const [i, scenario] of scenarios.entries()) {
      if (controller.signal.aborted) break;
      const seed = baseSeed + i;
      const row: Row = { scenario, nodes, seed, targets: [] };
      const done = rows.length;
      const started = Date.now();
      let resultPath: string | undefined;
      try {
        row.result = await runScenario({
          scenario,
          nodes,
          faultMs,
          clients: 4,
          seed,
          firstHost: 111,
          signal: controller.signal,
          onProgress: (f, phase) => {
            if (tty) process.stderr.write(`\r\x1b[2K${bar(done + f, total)} ${scenario} ${nodes}n: ${phase}`);
          },
          log: (line) => {
            if (tty) process.stderr.write("\r\x1b[2K");
            process.stderr.write(`  ${scenario} ${nodes}n: ${line.slice(0, 400)}\n`);
          },
        });
        row.targets = runTargets(row.result, runCommand(row.result));
        resultPath = writeRunResults(row.result, outDir, runCommand(row.result));
      } catch (err) {
        row.error = (err as Error).message;
        row.targets = [target(`${scenario} on ${nodes} nodes completed`, "yes", false, (m) => m, command)];
      }
      if (resultPath !== undefined) await drawChart(resultPath);
      rows.push(row);
      if (tty) process.stderr.write("\r\x1b[2K");
      const r = row.result;
      process.stderr.write(
        r === undefined
          ? `${scenario} ${nodes}n: FAILED TO RUN: ${row.error}\n`
          : `${scenario} ${nodes}n: lost ${r.check.lostCount}, resurrected ${r.check.resurrectedCount}, divergent ${r.check.divergence.nodes.length}, identical ${r.convergenceFromHealMs ?? "never"} ms after heal (${((Date.now() - started) / 1000).toFixed(0)} s)\n`,
      );
    }
  }

  const table = summaryTable(rows);
  const all = rows.flatMap((r) => r.targets);
  const met = rows.filter((r) => r.targets.length > 0 && r.targets.every((t) => t.met)).length;
  const md = [
    "# Chaos runs",
    "",
    `Generated by \`${command}\` on ${new Date().toISOString()} (${machineInfo().cpus} CPUs, Node ${process.version}).`,
    `Every scenario runs ${faultMs / 1000} s of faults on a local cluster whose peer links go through per-link`,
    "Toxiproxy-compatible proxies, under 4 concurrent clients adding unique elements and removing some they read",
    "(Query with context, then Remove with it). After the heal the workload goes on for 2 s, then every node is",
    "read in full until all reads are identical, then the keys' state digests until every node shows the same",
    "(states identical, causal contexts included). Targets: 0 lost, 0 resurrected, 0 ignored removes, identical",
    `reads within ${CONVERGENCE_TARGET_MS / 1000} s of the heal, identical states. Lost: an acknowledged add absent at the end that no`,
    "acknowledged or indeterminate remove whose context covered it explains. Resurrected: present at the end after an",
    "acknowledged remove that reported it removed and whose context covered every acknowledged add of it (no",
    "indeterminate add of it). Ignored remove: present at the end although an acknowledged remove whose context",
    `covered it answered removed = 0. "no effect": acknowledged removes that answered removed = 0 (the node lagged`,
    "behind the node that served the read); the client then repeats the remove at the read's node.",
    "Gossip bytes: anti-entropy payload bytes sent by all nodes (deltaset_gossip_sent_bytes_total).",
    "",
    table,
    "",
    `${met} of ${rows.length} runs met every target.`,
    "",
  ].join("\n");
  writeFileSync(join(outDir, "summary.md"), md);
  const doc = {
    machine: machineInfo(),
    generatedAt: new Date().toISOString(),
    params: { quick, scenarios, sizes, faultMs, baseSeed, clients: 4 },
    metrics: {
      runs: rows.map((r) => ({
        scenario: r.scenario,
        nodes: r.nodes,
        seed: r.seed,
        error: r.error,
        lost: r.result?.check.lostCount ?? null,
        resurrected: r.result?.check.resurrectedCount ?? null,
        ignoredRemoves: r.result?.check.ignoredRemoveCount ?? null,
        divergentNodes: r.result?.check.divergence.nodes ?? null,
        convergenceFromHealMs: r.result?.convergenceFromHealMs ?? null,
        convergenceFromStopMs: r.result?.convergenceFromStopMs ?? null,
        statesFromHealMs: r.result?.statesFromHealMs ?? null,
        ackedOpsPerSec: r.result ? Number(r.result.check.ackedOpsPerSec.toFixed(1)) : null,
        gossipBytes: r.result?.gossipBytes ?? null,
        removesWithoutEffect: r.result?.check.removesWithoutEffect ?? null,
      })),
    },
    targets: [
      target("runs with 0 lost, 0 resurrected, identical reads within 5 s of heal and identical states", `${rows.length} of ${rows.length}`, met, (m) => m === rows.length && rows.length === total, command),
      ...all,
    ],
  };
  writeFileSync(join(outDir, "summary.json"), `${JSON.stringify(doc, null, 2)}\n`);
  await drawChart(join(outDir, "summary.json"));
  process.stdout.write(`\n${table}\n\n${met} of ${rows.length} runs met every target. Results in ${outDir}\n`);
  // The acknowledged-write crash loop at length (200 loops; 8 with --quick), unless --only.
  let crashLoopOk = true;
  if (values.only === undefined && !controller.signal.aborted) {
    process.stderr.write("crash loop: ack, SIGKILL, restart, every node must read the write\n");
    crashLoopOk = await crashLoopBench(quick ? ["--quick"] : []);
  }
  if (controller.signal.aborted) process.exitCode = 130;
  else if (met !== rows.length || !crashLoopOk) process.exitCode = 1;
}

await main();
