// npm run bench:filters-cluster [-- --quick]
// The replicated filters beyond the thesis's two replicas: 5 real node processes, every peer link
// through its own fault proxy (the evaluation's setup, services/chaos/eval), gossip loss made of
// short random reset windows on the links, two sync modes (Algorithm 2 + BP + RR, shipping deltas,
// and Algorithm 1 shipping full states). For GBF, GCF and ORCF: n random keys added spread over
// the 5 nodes, then, once every node answers the same, the false-positive rate on fresh keys and
// the bytes on the wire per key (at the proxies), against the same filter built in one process
// (all adds on one replica) and by two replicas of half the adds each, joined once (the thesis's
// 50-50 split with a final merge). Writes docs/results/filters-cluster.json and .svg (--quick: a
// smaller n, to a temporary directory).
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { seededRandom, type Random } from "../../services/common/prng.ts";
import { writeResultFile } from "../../services/common/result-file.ts";
import { type CreateParams, ObjectType, latticeFor, operationsFor } from "../../services/crdt/index.ts";
import { type NodeCounters, diffCounters, scrapeNode, scrapeProxyBytes, sumCounters, exchangeLoss } from "../../services/chaos/eval/counters.ts";
import { evalGrid, LOSSES, type SyncMode } from "../../services/chaos/eval/grid.ts";
import { LossWindows } from "../../services/chaos/eval/loss-windows.ts";
import { startEvalGroup } from "../../services/chaos/eval/sweep.ts";
import { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import type { FilterParams } from "../../services/gen/deltaset/v1/types.ts";
import { drawChart } from "./charts/draw.ts";
import { commandLine, isQuick, printTargets, resultsDir, target } from "./lib/results.ts";

const quick = isQuick();
const command = commandLine("bench:filters-cluster", quick);
const N = quick ? 2 ** 11 : 2 ** 14;
const PROBES = quick ? 20_000 : 100_000;
const NODES = 5;
const TYPES = [ObjectType.GBF, ObjectType.GCF, ObjectType.ORCF] as const;
const MODES: SyncMode[] = ["alg2+bp+rr", "full-state"];
const LOSS_LEVELS = [LOSSES.find((l) => l.windowShare === 0)!, LOSSES.at(-1)!];
const BATCH = 256;
const started = performance.now();

/** The thesis's filters at 1/32, sized for n; cuckoo filters with 8-bit fingerprints in buckets of 4. */
function paramsOf(type: ObjectType): CreateParams {
  const cuckoo = type !== ObjectType.GBF;
  return { capacity: N, falsePositiveRate: 1 / 32, fingerprintBits: cuckoo ? 8 : 0, bucketSize: cuckoo ? 4 : 0 };
}

/** The same parameters as an Add carries them. */
function wireParams(type: ObjectType): FilterParams {
  const p = paramsOf(type);
  return { capacity: BigInt(p.capacity!), falsePositiveRate: p.falsePositiveRate!, hashes: 0, bits: 0n, fingerprintBits: p.fingerprintBits!, bucketSize: p.bucketSize!, ageSlices: 0, unionStrategy: 0 };
}

function keys(n: number, random: Random): Buffer[] {
  return Array.from({ length: n }, () => {
    const b = Buffer.alloc(16);
    for (let i = 0; i < 16; i += 4) b.writeUInt32LE(Math.floor(random() * 2 ** 32), i);
    return b;
  });
}

/** The same filter built in this process: all adds on one replica, and 50-50 on two then joined. */
function reference(type: ObjectType, elements: Buffer[], probes: Buffer[]): { single: number; pair: number } {
  const ops = operationsFor(type)!;
  const lattice = latticeFor(type);
  const env = (replica: string) => ({ replica, random: seededRandom(5), randomId: () => 1n });
  const params = paramsOf(type);
  const one = ops.create(params);
  ops.add(one, elements, env("a"));
  const a = ops.create(params);
  const b = ops.create(params);
  ops.add(a, elements.filter((_, i) => i % 2 === 0), env("a"));
  ops.add(b, elements.filter((_, i) => i % 2 === 1), env("b"));
  const joined = lattice.join(a, b);
  const rate = (s: unknown) => ops.contains(s, probes).filter((p) => p).length / probes.length;
  return { single: rate(one), pair: rate(joined) };
}

interface Cell {
  type: string;
  mode: SyncMode;
  loss: string;
  lossWindowShare: number;
  n: number;
  convergedMs: number | null;
  fpr: number;
  reference: { single: number; pair: number };
  wireBytes: number;
  wireBytesPerKey: number;
  payloadBytesPerKey: number;
  measuredLoss: number | null;
  stateFallbacks: number;
}

async function queryPresence(c: ReplicaClient, key: string, elements: Buffer[]): Promise<{ present: boolean[]; count: number }> {
  const present: boolean[] = [];
  let count = 0;
  for (let i = 0; i < elements.length; i += 5000) {
    const q = await call(c, c.query, { key, elements: elements.slice(i, i + 5000), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 30_000 });
    present.push(...q.presence.map((p) => p.present));
    count = Number(q.filter?.estimatedCount ?? 0n);
  }
  return { present, count };
}

async function runCell(clients: ReplicaClient[], env: Awaited<ReturnType<typeof startEvalGroup>>["env"], type: ObjectType, mode: SyncMode, loss: (typeof LOSS_LEVELS)[number], seed: number): Promise<Cell> {
  const random = seededRandom(seed);
  const elements = keys(N, random);
  const probes = keys(PROBES, seededRandom(seed ^ 0x5bd1e995));
  const sample = [...elements.slice(0, 300), ...probes.slice(0, 300)];
  const key = `f-${ObjectType[type]}-${seed}`;
  const counters = () => Promise.all(env.nodes.map((n) => scrapeNode(env.metricsAddress(n.nodeId) ?? "")));
  const before: NodeCounters[] = await counters();
  const wireBefore = await scrapeProxyBytes(env.proxyApis);
  const losses = new LossWindows((await env.links.list()).map((l) => l.proxy), loss.windowShare, random);
  losses.start();
  try {
    for (let i = 0, b = 0; i < N; i += BATCH, b++) {
      const c = clients[b % clients.length]!;
      await call(c, c.add, { key, elements: elements.slice(i, i + BATCH), texts: [], type, params: wireParams(type) }, { timeoutMs: 30_000 });
    }
  } finally {
    await losses.stop();
  }
  const writesDone = performance.now();
  let convergedMs: number | null = null;
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    const reads = await Promise.all(clients.map((c) => queryPresence(c, key, sample)));
    const first = JSON.stringify(reads[0]);
    if (reads.every((r) => JSON.stringify(r) === first) && reads[0]!.count > 0) {
      convergedMs = performance.now() - writesDone;
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const fpr = (await queryPresence(clients[0]!, key, probes)).present.filter((p) => p).length / PROBES;
  // Let acknowledgements settle before the counters are read.
  await new Promise((r) => setTimeout(r, 1000));
  const wire = (await scrapeProxyBytes(env.proxyApis)) - wireBefore;
  const totals = sumCounters((await counters()).map((a, i) => diffCounters(a, before[i]!)));
  return {
    type: ObjectType[type],
    mode,
    loss: loss.name,
    lossWindowShare: loss.windowShare,
    n: N,
    convergedMs,
    fpr,
    reference: reference(type, elements, probes),
    wireBytes: wire,
    wireBytesPerKey: wire / N,
    payloadBytesPerKey: totals.payloadBytes / N,
    measuredLoss: exchangeLoss(totals).rate,
    stateFallbacks: totals.stateFallbacks,
  };
}

const cells: Cell[] = [];
let seed = 100;
const grid = { ...evalGrid(false), gossipIntervalMs: 100 };
for (const mode of MODES) {
  const group = await startEvalGroup({ grid, firstHost: 171, port: 7380 }, NODES, mode);
  const clients = group.env.nodes.map((n) => new ReplicaClient(n.address, grpc.credentials.createInsecure()));
  try {
    for (const loss of LOSS_LEVELS) {
      for (const type of TYPES) {
        try {
          const cell = await runCell(clients, group.env, type, mode, loss, seed++);
          cells.push(cell);
          console.log(JSON.stringify(cell));
        } catch (err) {
          // What the nodes logged last, to say why (the group's directory goes with it).
          for (const f of readdirSync(group.dir).filter((x) => x.endsWith(".log"))) {
            console.error(`--- ${f}\n${readFileSync(join(group.dir, f), "utf8").split("\n").slice(-15).join("\n")}`);
          }
          throw err;
        }
      }
    }
  } finally {
    for (const c of clients) c.close();
    await group.stop();
  }
}

const find = (type: string, mode: SyncMode, lossShare: number) => cells.find((c) => c.type === type && c.mode === mode && c.lossWindowShare === lossShare)!;
const lossy = LOSS_LEVELS.at(-1)!.windowShare;
const targets = [
  target("every cell converged (identical answers on all 5 nodes) within 60 s of the last add", "all", cells.filter((c) => c.convergedMs !== null).length / cells.length, (m) => m === 1, command),
  ...["GBF", "GCF", "ORCF"].map((t) => {
    const c = find(t, "alg2+bp+rr", lossy);
    return target(
      `${t}: false-positive rate on 5 nodes under gossip loss (deltas) relative to the same adds joined from two replicas in one process`,
      "0.8x to 1.25x",
      c.fpr / Math.max(c.reference.pair, 1 / PROBES),
      (m) => m >= 0.8 && m <= 1.25,
      command,
    );
  }),
  ...["GBF", "GCF", "ORCF"].map((t) =>
    target(
      `${t}: bytes on the wire per key added, deltas (Algorithm 2 + BP + RR) relative to full states (Algorithm 1), no loss`,
      "< 1x",
      find(t, "alg2+bp+rr", 0).wireBytesPerKey / find(t, "full-state", 0).wireBytesPerKey,
      (m) => m < 1,
      command,
    ),
  ),
];
const dir = quick ? mkdtempSync(join(tmpdir(), "deltaset-filters-cluster-")) : resultsDir;
const path = writeResultFile(join(dir, "filters-cluster.json"), {
  params: { quick, nodes: NODES, n: N, probes: PROBES, batch: BATCH, gossipIntervalMs: grid.gossipIntervalMs, modes: MODES, losses: LOSS_LEVELS, targetFpr: 1 / 32, cuckoo: { fingerprintBits: 8, bucketSize: 4 } },
  metrics: { cells },
  targets,
});
await drawChart(path);
printTargets(targets);
console.log(`results: ${path} (${Math.round((performance.now() - started) / 1000)} s)`);
