// npm run chaos:crash-loop [-- --quick] [-- --loops N]
// The acknowledged-write crash loop at length (test/helpers/crash-loop.ts): a real 3-node
// cluster, a 1 s gossip period, and for each loop a write to a fresh key (every fourth a
// 200-element batch) acknowledged by one node, that node SIGKILLed at once and restarted, then
// every node read until it holds the write. Target: every acknowledged write reaches every node
// (the crash invariant: a restarted node ships full state before it can look caught up).
// Writes docs/results/crash-loop.json and .svg (time from restart to identical reads per loop);
// --quick (8 loops, a smoke run) only prints, so the committed results stay those of a full run.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runCrashLoops } from "../helpers/crash-loop.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { drawChart } from "./charts/draw.js";
import { commandLine, printTargets, target, writeResults } from "./lib/results.js";

export async function crashLoopBench(argv: string[]): Promise<boolean> {
  const { values } = parseArgs({ args: argv, options: { quick: { type: "boolean", default: false }, loops: { type: "string" } }, strict: false });
  const quick = values.quick === true;
  const loops = Number(values.loops ?? (quick ? 8 : 200));
  const command = commandLine("chaos:crash-loop", quick);
  const dir = mkdtempSync(join(tmpdir(), "deltaset-crash-loop-"));
  const gossipIntervalMs = 1000;
  const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.0.${150 + i}:7611`), ["--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--partitions", "64", "--gossip-interval-ms", String(gossipIntervalMs)], "cl");
  try {
    await c.startAll();
    const r = await runCrashLoops(c, {
      loops,
      nodes: 3,
      timeoutMs: 30_000,
      onLoop: (loop, ms) => process.stderr.write(`loop ${loop + 1}/${loops}: every node read the write ${ms} ms after the restart\n`),
    });
    const sorted = [...r.replicateMs].sort((a, b) => a - b);
    const q = (p: number) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!);
    const targets = [
      target(`acknowledged writes reaching every node after their node's SIGKILL (${loops} loops)`, `${loops} of ${loops}`, r.replicated, (m) => m === loops, command),
    ];
    if (!quick) {
      const resultsPath = writeResults("crash-loop", {
        params: { quick, loops, nodes: 3, gossipIntervalMs, batchEvery: 4, batchSize: 200, partitions: 64 },
        metrics: { loops: r.loops, replicated: r.replicated, failures: r.failures, replicateMsP50: q(0.5), replicateMsP99: q(0.99), replicateMsMax: sorted.at(-1) ?? null, replicateMs: r.replicateMs },
        targets,
      });
      await drawChart(resultsPath);
    }
    printTargets(targets);
    return r.replicated === loops;
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const ok = await crashLoopBench(process.argv.slice(2));
  process.exitCode = ok ? 0 : 1;
}
