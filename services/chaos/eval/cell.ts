// One cell of the evaluation sweep on a running cluster: every peer link gets the cell's latency
// (a latency toxic on both streams), loss windows run (loss-windows.ts), and `rounds` times a
// steady workload of adds and context-removes runs for writeMs while lag probes measure
// acknowledgement → visible everywhere; then the workload stops and the time until every node's
// reads are identical is the round's convergence time. The chaos checker checks every round's
// history against its final reads (no acknowledged write lost, none resurrected). Counters read
// before and after give bytes on the wire at the proxies, engine payload bytes, failed exchanges,
// state fallbacks and CPU per node.
import * as grpc from "@grpc/grpc-js";
import { call } from "../../client/rpc.js";
import { seededRandom } from "../../common/prng.js";
import { ReplicaClient } from "../../gen/deltaset/v1/replica.js";
import { checkHistory } from "../checker.js";
import { readUntilIdentical } from "../final-reads.js";
import { HistoryRecorder } from "../history.js";
import type { LinkTable } from "../links.js";
import { Workload, type WorkloadNode } from "../workload.js";
import { type NodeCounters, cpuSecondsOf, diffCounters, exchangeLoss, scrapeNode, scrapeProxyBytes, sumCounters } from "./counters.js";
import { deleteEverywhere } from "./delete-everywhere.js";
import { type EvalGrid, type LatencyLevel, type LossLevel, type SyncMode, percentile, physicalLimitMs } from "./grid.js";
import { LagProbe } from "./lag-probe.js";
import { LossWindows } from "./loss-windows.js";

export interface EvalCluster {
  nodes: WorkloadNode[];
  links: LinkTable;
  /** The Toxiproxy API(s) holding the peer-link proxies. */
  proxyApis: string[];
  metricsAddress(nodeId: string): string | undefined;
  /** A local node's process id (CPU is read from /proc), undefined for remote nodes. */
  pid(nodeId: string): number | undefined;
}

export interface CellSpec {
  mode: SyncMode;
  latency: LatencyLevel;
  loss: LossLevel;
  grid: EvalGrid;
  seed: number;
}

export interface RoundResult {
  convergenceMs: number | null;
  valid: boolean;
  lost: number;
  resurrected: number;
  /** Acknowledged adds and removes of the cell so far (prefill excluded). */
  ackedAdds: number;
  ackedRemoves: number;
}

export interface CellResult {
  mode: SyncMode;
  nodes: number;
  latency: string;
  latencyMs: number;
  loss: string;
  lossWindowShare: number;
  rounds: RoundResult[];
  convergenceMs: { p50: number | null; p95: number | null; max: number | null; unconverged: number };
  physicalLimitMs: number;
  lagMs: { p50: number | null; p95: number | null; samples: number; unseen: number };
  updates: number;
  wireBytes: number;
  wireBytesPerUpdate: number | null;
  payloadBytesPerUpdate: number | null;
  measuredLoss: { attempted: number; failed: number; rate: number | null };
  lossWindows: number;
  stateFallbacks: number;
  /** CPU time per node per second of the cell (ms/s: 1000 = one core). */
  cpuMsPerSecond: { mean: number | null; max: number | null };
  valid: boolean;
  seconds: number;
  /** After the cell: until its keys, deleted at every node, read empty everywhere (ms; null past 60 s). */
  keysEmptiedMs: number | null;
}

/**
 * Fill each key with `count` elements (acknowledged adds of 1000 at a time, recorded in the
 * history so the checker knows them), then wait until every node reads the same.
 */
async function prefill(env: EvalCluster, keys: readonly string[], count: number, history: HistoryRecorder): Promise<void> {
  const node = env.nodes[0]!;
  const c = new ReplicaClient(node.address, grpc.credentials.createInsecure());
  try {
    for (const key of keys) {
      for (let base = 0; base < count; base += 1000) {
        const elements = Array.from({ length: Math.min(1000, count - base) }, (_, i) => `pre-${base + i}`);
        const index = history.invoke();
        const start = Date.now();
        const r = await call(c, c.add, { key, elements: elements.map((e) => Buffer.from(e)), texts: [] }, { timeoutMs: 30_000 });
        const end = Date.now();
        elements.forEach((element, i) =>
          history.record({ index: i === 0 ? index : history.invoke(), client: "prefill", node: node.nodeId, key, start, end, outcome: "ok", kind: "add", element, dots: [`${r.replica}:${r.counters[i]}`] }),
        );
      }
    }
  } finally {
    c.close();
  }
  const settled = await readUntilIdentical(env.nodes, keys, { boundMs: 60_000, intervalMs: 100 });
  if (settled.identicalAt === null) throw new Error("the prefilled keys did not become identical on every node within 60 s");
}

async function countersOf(env: EvalCluster): Promise<NodeCounters[]> {
  return Promise.all(env.nodes.map((n) => scrapeNode(env.metricsAddress(n.nodeId) ?? "")));
}

export async function runCell(env: EvalCluster, spec: CellSpec, log: (line: string) => void = () => {}): Promise<CellResult> {
  const { grid, latency, loss } = spec;
  const random = seededRandom(spec.seed);
  const started = performance.now();
  // Keys of this cell only, deleted everywhere once it is measured: every cell starts from the
  // same state size, whatever ran before.
  const keys = Array.from({ length: 4 }, (_, i) => `eval-${spec.seed}-${i}`);
  // One history for the cell: each round is checked against everything written so far.
  const history = new HistoryRecorder();
  const proxies = (await env.links.list()).map((l) => l.proxy);
  const allLinks = env.nodes.flatMap((a) => env.nodes.filter((b) => b !== a).map((b) => [a.nodeId, b.nodeId] as [string, string]));
  if (latency.latencyMs > 0) {
    await env.links.toxic(allLinks, { type: "latency", streams: ["upstream", "downstream"], attributes: { latency: latency.latencyMs, jitter: latency.jitterMs } });
  }
  await prefill(env, keys, grid.prefill, history);
  const prefilled = history.size;
  // Connections settle under the new latency before anything is counted.
  await new Promise((r) => setTimeout(r, 500 + 4 * latency.latencyMs));
  const before = await countersOf(env);
  const wireBefore = await scrapeProxyBytes(env.proxyApis);
  const cpuBefore = await Promise.all(env.nodes.map((n) => cpuSecondsOf(env.pid(n.nodeId))));
  const t0 = performance.now();

  const rounds: RoundResult[] = [];
  const lags: number[] = [];
  let unseen = 0;
  let probeAdds = 0;
  // One probe for the cell, every node followed before the loss windows and the first round's
  // writes start (the marker it waits for is one more add); it probes during each round's writes.
  const lagKey = `eval-lag-${spec.seed}`;
  const probe = new LagProbe({ nodes: env.nodes, key: lagKey, random, probeEveryMs: grid.probeEveryMs, tag: `s${spec.seed}`, boundMs: grid.settleBoundMs / 2 });
  const losses = new LossWindows(proxies, loss.windowShare, random);
  try {
    await probe.start();
    probeAdds++;
    losses.start();
    for (let r = 0; r < grid.rounds; r++) {
      const workload = new Workload({ nodes: env.nodes, clients: grid.clients, keys, history, random, opTimeoutMs: 2000 + 4 * latency.latencyMs, thinkMs: grid.thinkMs });
      try {
        probe.begin();
        workload.start();
        await new Promise((res) => setTimeout(res, grid.writeMs));
        await workload.stop();
        const stopAt = Date.now();
        const lagReport = probe.stop();
        const final = await readUntilIdentical(env.nodes, keys, { boundMs: grid.settleBoundMs, intervalMs: 25 });
        const lr = await lagReport;
        lags.push(...lr.samples);
        unseen += lr.unseen;
        probeAdds += lr.samples.length + lr.unseen;
        const check = checkHistory(history.ops(), final.reads);
        rounds.push({
          convergenceMs: final.identicalAt === null ? null : final.identicalAt - stopAt,
          valid: check.valid,
          lost: check.lostCount,
          resurrected: check.resurrectedCount,
          ackedAdds: check.ops.add.ok - prefilled,
          ackedRemoves: check.ops.remove.ok,
        });
        log(`  round ${r + 1}: converged ${rounds.at(-1)!.convergenceMs ?? "never"} ms after the last write; valid ${check.valid}`);
      } finally {
        workload.close();
      }
    }
  } finally {
    probe.close();
    await losses.stop();
  }
  const seconds = (performance.now() - t0) / 1000;
  const after = await countersOf(env);
  const wireAfter = await scrapeProxyBytes(env.proxyApis);
  const cpuAfter = await Promise.all(env.nodes.map((n) => cpuSecondsOf(env.pid(n.nodeId))));
  await env.links.heal();
  const cleanup = await deleteEverywhere(env.nodes, [...keys, lagKey]);
  if (cleanup.emptiedMs === null) log(`  the cell's keys did not read empty on every node within 60 s: the next cell starts with more state`);

  const counters = sumCounters(after.map((a, i) => diffCounters(a, before[i]!)));
  const last = rounds.at(-1);
  const updates = (last ? last.ackedAdds + last.ackedRemoves : 0) + probeAdds;
  const wireBytes = wireAfter - wireBefore;
  const conv = rounds.map((r) => r.convergenceMs).filter((x): x is number => x !== null);
  const cpu = cpuAfter.map((a, i) => (a === null || cpuBefore[i] === null ? null : ((a - cpuBefore[i]!) * 1000) / seconds)).filter((x): x is number => x !== null);
  return {
    mode: spec.mode,
    nodes: env.nodes.length,
    latency: latency.name,
    latencyMs: latency.latencyMs,
    loss: loss.name,
    lossWindowShare: loss.windowShare,
    rounds,
    convergenceMs: { p50: percentile(conv, 50), p95: percentile(conv, 95), max: conv.length ? Math.max(...conv) : null, unconverged: rounds.length - conv.length },
    physicalLimitMs: physicalLimitMs(env.nodes.length, grid.gossipIntervalMs, latency.latencyMs),
    lagMs: { p50: percentile(lags, 50), p95: percentile(lags, 95), samples: lags.length, unseen },
    updates,
    wireBytes,
    wireBytesPerUpdate: updates > 0 ? wireBytes / updates : null,
    payloadBytesPerUpdate: updates > 0 ? counters.payloadBytes / updates : null,
    measuredLoss: exchangeLoss(counters),
    lossWindows: losses.windows,
    stateFallbacks: counters.stateFallbacks,
    cpuMsPerSecond: { mean: cpu.length ? cpu.reduce((a, b) => a + b, 0) / cpu.length : null, max: cpu.length ? Math.max(...cpu) : null },
    valid: rounds.every((r) => r.valid && r.convergenceMs !== null),
    seconds: (performance.now() - started) / 1000,
    keysEmptiedMs: cleanup.emptiedMs,
  };
}
