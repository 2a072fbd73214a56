// npm run eval:types [-- --quick]
// The evaluation's sweep (npm run eval) for the newer data types: the probabilistic set
// (AWSET_PROB), a grow-only Bloom filter (GBF), an observed-remove cuckoo filter (ORCF) and a
// PN-counter, on real node processes with every peer link through its own fault proxy, over
// latency (none, 50 ± 10 ms) × gossip loss (0, about 10%: reset windows, the rate of failed
// exchanges measured) × sync mode (full state, Algorithm 2 + BP + RR) × 3, 5 and 9 nodes, `rounds`
// rounds per cell: steady updates from 3 clients for writeMs, then the time until every node reads the same
// (convergence), bytes on the wire per update at the proxies. Writes docs/results/eval-types.json
// and .svg (--quick: 3 nodes, 2 rounds and one latency, to a temporary directory).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { seededRandom } from "../../services/common/prng.ts";
import { writeResultFile } from "../../services/common/result-file.ts";
import { diffCounters, exchangeLoss, scrapeNode, scrapeProxyBytes, sumCounters } from "../../services/chaos/eval/counters.ts";
import { LATENCIES, LOSSES, type SyncMode, evalGrid, percentile, physicalLimitMs } from "../../services/chaos/eval/grid.ts";
import { LossWindows } from "../../services/chaos/eval/loss-windows.ts";
import { startEvalGroup } from "../../services/chaos/eval/sweep.ts";
import { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { drawChart } from "./charts/draw.ts";
import { EVAL_TYPES, type EvalType, read, update } from "./eval-type-ops.ts";
import { commandLine, isQuick, printTargets, resultsDir, target } from "./lib/results.ts";

const quick = isQuick();
const command = commandLine("eval:types", quick);
const SIZES = quick ? [3] : [3, 5, 9];
const ROUNDS = quick ? 2 : 5;
const WRITE_MS = 1500;
const CLIENTS = 3;
const THINK_MS = 20;
const SETTLE_BOUND_MS = 20_000;
const MODES: SyncMode[] = ["full-state", "alg2+bp+rr"];
const LATENCY_LEVELS = quick ? [LATENCIES[0]!] : [LATENCIES[0]!, LATENCIES[1]!];
const LOSS_LEVELS = [LOSSES[0]!, LOSSES[2]!];
const grid = { ...evalGrid(false), gossipIntervalMs: 100 };
const started = performance.now();

interface TypeCell {
  type: EvalType;
  nodes: number;
  mode: SyncMode;
  latency: string;
  latencyMs: number;
  loss: string;
  lossWindowShare: number;
  rounds: Array<{ updates: number; convergenceMs: number | null }>;
  convergenceMs: { p50: number | null; p95: number | null; unconverged: number };
  physicalLimitMs: number;
  updates: number;
  wireBytesPerUpdate: number | null;
  measuredLoss: number | null;
  stateFallbacks: number;
}

async function convergence(clients: ReplicaClient[], type: EvalType, key: string): Promise<number | null> {
  const t0 = performance.now();
  while (performance.now() - t0 < SETTLE_BOUND_MS) {
    try {
      const reads = await Promise.all(clients.map((c) => read(type, c, key, 5000)));
      if (reads.every((r) => r === reads[0])) return performance.now() - t0;
    } catch {
      // A read that failed (under loss windows nothing is lost on client links, but be safe): again.
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}

async function runCell(env: Awaited<ReturnType<typeof startEvalGroup>>["env"], clients: ReplicaClient[], type: EvalType, mode: SyncMode, latency: (typeof LATENCY_LEVELS)[number], loss: (typeof LOSS_LEVELS)[number], seed: number): Promise<TypeCell> {
  const random = seededRandom(seed);
  const key = `types-${type}-${seed}`;
  const scrape = () => Promise.all(env.nodes.map((n) => scrapeNode(env.metricsAddress(n.nodeId) ?? "")));
  const before = await scrape();
  const wireBefore = await scrapeProxyBytes(env.proxyApis);
  const losses = new LossWindows((await env.links.list()).map((l) => l.proxy), loss.windowShare, random);
  losses.start();
  const rounds: TypeCell["rounds"] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      let updates = 0;
      const end = performance.now() + WRITE_MS;
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, w) => {
          const cr = seededRandom(seed * 31 + r * 7 + w);
          while (performance.now() < end) {
            try {
              await update(type, clients[Math.floor(cr() * clients.length)]!, key, cr, 2000 + 4 * latency.latencyMs);
              updates++;
            } catch {
              // A remove before the key reached that node, or a deadline: not counted.
            }
            await new Promise((res) => setTimeout(res, THINK_MS));
          }
        }),
      );
      rounds.push({ updates, convergenceMs: await convergence(clients, type, key) });
    }
  } finally {
    await losses.stop();
  }
  await new Promise((r) => setTimeout(r, 500));
  const wire = (await scrapeProxyBytes(env.proxyApis)) - wireBefore;
  const totals = sumCounters((await scrape()).map((a, i) => diffCounters(a, before[i]!)));
  const updates = rounds.reduce((n, r) => n + r.updates, 0);
  const times = rounds.flatMap((r) => (r.convergenceMs === null ? [] : [r.convergenceMs]));
  return {
    type,
    nodes: env.nodes.length,
    mode,
    latency: latency.name,
    latencyMs: latency.latencyMs,
    loss: loss.name,
    lossWindowShare: loss.windowShare,
    rounds,
    convergenceMs: { p50: percentile(times, 50), p95: percentile(times, 95), unconverged: rounds.length - times.length },
    physicalLimitMs: physicalLimitMs(env.nodes.length, grid.gossipIntervalMs, latency.latencyMs),
    updates,
    wireBytesPerUpdate: updates > 0 ? wire / updates : null,
    measuredLoss: exchangeLoss(totals).rate,
    stateFallbacks: totals.stateFallbacks,
  };
}

const cells: TypeCell[] = [];
let seed = 500;
for (const size of SIZES) for (const mode of MODES) {
  for (const latency of LATENCY_LEVELS) {
    const group = await startEvalGroup({ grid, firstHost: 191, port: 7395 }, size, mode, latency);
    const clients = group.env.nodes.map((n) => new ReplicaClient(n.address, grpc.credentials.createInsecure()));
    try {
      if (latency.latencyMs > 0) {
        const all = group.env.nodes.flatMap((a) => group.env.nodes.filter((b) => b !== a).map((b) => [a.nodeId, b.nodeId] as [string, string]));
        await group.env.links.toxic(all, { type: "latency", streams: ["upstream", "downstream"], attributes: { latency: latency.latencyMs, jitter: latency.jitterMs } });
      }
      for (const loss of LOSS_LEVELS) {
        for (const type of EVAL_TYPES) {
          const cell = await runCell(group.env, clients, type, mode, latency, loss, seed++);
          cells.push(cell);
          console.log(JSON.stringify({ ...cell, rounds: undefined }));
        }
      }
    } finally {
      for (const c of clients) c.close();
      await group.stop();
    }
  }
}

const of = (type: EvalType, nodes: number, mode: SyncMode, lossShare: number, latencyMs = 0) =>
  cells.find((c) => c.type === type && c.nodes === nodes && c.mode === mode && c.lossWindowShare === lossShare && c.latencyMs === latencyMs)!;
const targets = [
  target("every round of every cell converged (every node reading the same) within 20 s of its last update", "all", cells.filter((c) => c.convergenceMs.unconverged === 0).length / cells.length, (m) => m === 1, command),
  ...SIZES.flatMap((n) =>
    EVAL_TYPES.map((t) =>
      target(
        `${t}, ${n} nodes: bytes on the wire per update, Algorithm 2 + BP + RR relative to full state (no latency, no loss)`,
        "< 1x",
        (of(t, n, "alg2+bp+rr", 0).wireBytesPerUpdate ?? NaN) / (of(t, n, "full-state", 0).wireBytesPerUpdate ?? NaN),
        (m) => m < 1,
        command,
      ),
    ),
  ),
  ...SIZES.flatMap((n) =>
    EVAL_TYPES.map((t) => {
      const c = of(t, n, "alg2+bp+rr", 0);
      return target(`${t}, ${n} nodes: convergence p95 after the last update, Algorithm 2 + BP + RR, no latency, no loss, relative to the physical limit`, "<= 3x", (c.convergenceMs.p95 ?? Infinity) / c.physicalLimitMs, (m) => m <= 3, command);
    }),
  ),
];
const dir = quick ? mkdtempSync(join(tmpdir(), "deltaset-eval-types-")) : resultsDir;
const path = writeResultFile(join(dir, "eval-types.json"), {
  params: { quick, nodes: SIZES, rounds: ROUNDS, writeMs: WRITE_MS, clients: CLIENTS, thinkMs: THINK_MS, gossipIntervalMs: grid.gossipIntervalMs, modes: MODES, latencies: LATENCY_LEVELS, losses: LOSS_LEVELS, types: EVAL_TYPES },
  metrics: { cells },
  targets,
});
await drawChart(path);
printTargets(targets);
console.log(`results: ${path} (${Math.round((performance.now() - started) / 1000)} s)`);
