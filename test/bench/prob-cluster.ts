// npm run bench:prob-cluster [-- --quick]
// The probabilistic add-wins set on a real cluster under churn: 8 node processes, every peer link
// through a fault proxy (the evaluation's setup, services/chaos/eval, no faults injected), the same
// stream of adds and removes (over a small universe, at random live nodes) given to an AWSET key
// (exact, dots under replica ids) and an AWSET_PROB key (anonymous dots, removes in an
// Age-Partitioned Bloom Filter). Every `churnEvery` operations one node is killed, loses its data
// directory and comes back: a new replica id, so the AWSET's causal context gains an entry for
// good while the AWSET_PROB's filter keeps its size. At each churn point writes pause until every
// node reads the same, then the keys are compared on a node (the AWSET is the exact shadow): what
// the probabilistic set holds that the exact one does not (a forgotten remove) and the reverse (a
// lost add). Run three times with the same operations and churn: both keys (the comparison, the
// metadata sizes and each node's memory), then each key alone (its bytes on the wire, at the
// proxies). Writes docs/results/prob-cluster.json and .svg (--quick: fewer operations, to a
// temporary directory).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { type Random, seededRandom } from "../../services/common/prng.ts";
import { writeResultFile } from "../../services/common/result-file.ts";
import { AWSetProbLattice, ObjectType, apbfStateEncodedSize } from "../../services/crdt/index.ts";
import { apbfEncodedSize } from "../../services/crdt/apbf-codec.ts";
import { scrapeProxyBytes } from "../../services/chaos/eval/counters.ts";
import { evalGrid } from "../../services/chaos/eval/grid.ts";
import { startEvalGroup } from "../../services/chaos/eval/sweep.ts";
import { type ExportChunk, ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { CausalContext } from "../../services/gen/deltaset/v1/types.ts";
import { drawChart } from "./charts/draw.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { DEFAULT_PARTITIONS } from "../../services/gossip/engine.ts";
import { commandLine, isQuick, printTargets, resultsDir, target } from "./lib/results.ts";

const quick = isQuick();
const command = commandLine("bench:prob-cluster", quick);
const NODES = 8;
const OPS = quick ? 300 : 2000;
const CHURN_EVERY = quick ? 100 : 200;
const UNIVERSE = 100;
const ADD_SHARE = 0.6;
const SETTLE_MS = 30_000;
const IDLE_MS = 5000;
const started = performance.now();

type Which = "both" | "exact" | "prob";

/**
 * Two key names in one partition: gossip carries a partition's keys in the same frames and state
 * streams, so both keys reach a node together and see the same operations in the same order.
 * (Keys in different partitions arrive at different moments, and a remove at a node that has one
 * key's add but not yet the other's would make them differ for reasons of timing, not of the filter.)
 */
function samePartitionKeys(): { exact: string; prob: string } {
  const target = partitionOf("shadow", DEFAULT_PARTITIONS);
  for (let i = 0; ; i++) if (partitionOf(`prob-${i}`, DEFAULT_PARTITIONS) === target) return { exact: "shadow", prob: `prob-${i}` };
}
const KEYS = samePartitionKeys();

interface Checkpoint {
  op: number;
  replicaIds: number;
  awsetContextBytes: number;
  apbfBytesSent: number;
  apbfBytesDense: number;
  onlyProb: number;
  onlyExact: number;
  settledMs: number | null;
}

interface RunResult {
  which: Which;
  ops: number;
  churns: number;
  wireBytes: number;
  wireBytesPerOp: number;
  /** The cluster's own traffic with no operations (membership, empty gossip), bytes per second. */
  idleBytesPerSecond: number;
  /** wireBytes less the idle traffic of the run's duration, per operation. */
  opBytesPerOp: number;
  checkpoints: Checkpoint[];
  rssMiB: number[];
}

async function members(c: ReplicaClient, key: string): Promise<string[]> {
  const q = await call(c, c.query, { key, elements: [], texts: [], pageSize: 10_000, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 10_000 });
  return q.members.map((m) => m.element.toString()).sort();
}

/** Wait until every node lists the same members of every key (bounded); the time it took, or null. */
async function settle(clients: ReplicaClient[], keys: string[]): Promise<number | null> {
  const t0 = performance.now();
  while (performance.now() - t0 < SETTLE_MS) {
    try {
      const views = await Promise.all(keys.flatMap((k) => clients.map((c) => members(c, k).then((m) => `${k}:${m.join(",")}`))));
      const byKey = keys.map((k) => new Set(views.filter((v) => v.startsWith(`${k}:`))));
      if (byKey.every((s) => s.size === 1)) return performance.now() - t0;
    } catch {
      // A node still restarting: try again.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return null;
}

async function metadata(c: ReplicaClient): Promise<{ replicaIds: number; awsetContextBytes: number; apbfBytesSent: number; apbfBytesDense: number }> {
  const q = await call(c, c.query, { key: KEYS.exact, elements: [], texts: [], pageSize: 1, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 10_000 });
  const ctx = q.context ?? { vv: [], cloud: [] };
  const ids = new Set([...ctx.vv.map((e) => e.replica), ...ctx.cloud.map((e) => e.replica)]);
  const chunks: ExportChunk[] = [];
  for await (const ch of c.export({ key: KEYS.prob, maxEntries: 0, maxBytes: 0 }, new grpc.Metadata(), { deadline: Date.now() + 10_000 }) as AsyncIterable<ExportChunk>) chunks.push(ch);
  const state = AWSetProbLattice.decode(chunks[0]!.slice!.payload);
  return { replicaIds: ids.size, awsetContextBytes: CausalContext.encode(ctx).finish().length, apbfBytesSent: apbfStateEncodedSize(state.tombstones), apbfBytesDense: apbfEncodedSize(state.params) };
}

function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m === null ? NaN : Number(m[1]) / 1024;
}

async function run(which: Which, seed: number): Promise<RunResult> {
  const grid = { ...evalGrid(false), gossipIntervalMs: 100 };
  const group = await startEvalGroup({ grid, firstHost: 181, port: 7390 }, NODES, "alg2+bp+rr");
  const ids = group.env.nodes.map((n) => n.nodeId);
  const clientOf = new Map(group.env.nodes.map((n) => [n.nodeId, new ReplicaClient(n.address, grpc.credentials.createInsecure())]));
  const random: Random = seededRandom(seed);
  const keys = which === "both" ? [KEYS.exact, KEYS.prob] : [KEYS[which]];
  const checkpoints: Checkpoint[] = [];
  let churns = 0;
  try {
    // The idle cluster's traffic first, so that what the operations cost can be told from it.
    const idleStart = await scrapeProxyBytes(group.env.proxyApis);
    const idleT0 = performance.now();
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const idleBytesPerSecond = ((await scrapeProxyBytes(group.env.proxyApis)) - idleStart) / ((performance.now() - idleT0) / 1000);
    const wireBefore = await scrapeProxyBytes(group.env.proxyApis);
    const runT0 = performance.now();
    for (let op = 0; op < OPS; op++) {
      if (op > 0 && op % CHURN_EVERY === 0) {
        const settledMs = await settle([...clientOf.values()], keys);
        if (which === "both") {
          const [exact, prob] = await Promise.all([members(clientOf.get(ids[0]!)!, KEYS.exact), members(clientOf.get(ids[0]!)!, KEYS.prob)]);
          checkpoints.push({
            op,
            ...(await metadata(clientOf.get(ids[0]!)!)),
            onlyProb: prob.filter((e) => !exact.includes(e)).length,
            onlyExact: exact.filter((e) => !prob.includes(e)).length,
            settledMs,
          });
        }
        // A new identity: the node loses its data directory and comes back (a new replica id).
        const victim = ids[1 + Math.floor(random() * (NODES - 1))]!;
        await group.cluster.kill(victim);
        rmSync(group.cluster.spec(victim).dataDir, { recursive: true, force: true });
        await group.cluster.startNode(victim);
        churns++;
      }
      const node = ids[Math.floor(random() * NODES)]!;
      const c = clientOf.get(node)!;
      const element = Buffer.from(`e${Math.floor(random() * UNIVERSE)}`);
      const add = random() < ADD_SHARE;
      for (const key of keys) {
        const type = key === KEYS.prob ? ObjectType.AWSET_PROB : ObjectType.AWSET;
        try {
          if (add) await call(c, c.add, { key, elements: [element], texts: [], type }, { timeoutMs: 5000 });
          else await call(c, c.remove, { key, elements: [element], texts: [] }, { timeoutMs: 5000 });
        } catch {
          // A remove on a node that has not received the key yet: nothing to remove there.
        }
      }
    }
    const settledMs = await settle([...clientOf.values()], keys);
    if (which === "both") {
      const [exact, prob] = await Promise.all([members(clientOf.get(ids[0]!)!, KEYS.exact), members(clientOf.get(ids[0]!)!, KEYS.prob)]);
      checkpoints.push({ op: OPS, ...(await metadata(clientOf.get(ids[0]!)!)), onlyProb: prob.filter((e) => !exact.includes(e)).length, onlyExact: exact.filter((e) => !prob.includes(e)).length, settledMs });
    }
    await new Promise((r) => setTimeout(r, 1000));
    const wireBytes = (await scrapeProxyBytes(group.env.proxyApis)) - wireBefore;
    const idle = (idleBytesPerSecond * (performance.now() - runT0)) / 1000;
    return { which, ops: OPS, churns, wireBytes, wireBytesPerOp: wireBytes / OPS, idleBytesPerSecond, opBytesPerOp: (wireBytes - idle) / OPS, checkpoints, rssMiB: ids.map((id) => rssMiB(group.cluster.pid(id))) };
  } finally {
    for (const c of clientOf.values()) c.close();
    await group.stop();
  }
}

const both = await run("both", 21);
console.log(JSON.stringify(both));
const exactOnly = await run("exact", 21);
console.log(JSON.stringify({ ...exactOnly, checkpoints: undefined }));
const probOnly = await run("prob", 21);
console.log(JSON.stringify({ ...probOnly, checkpoints: undefined }));

const first = both.checkpoints[0]!;
const last = both.checkpoints.at(-1)!;
const mismatches = both.checkpoints.reduce((n, c) => n + c.onlyProb + c.onlyExact, 0);
const compared = both.checkpoints.length * UNIVERSE;
const targets = [
  target(
    "AWSET causal context grows with the replica ids that ever wrote (new identities under churn), first to last checkpoint",
    "> 1.5x",
    last.awsetContextBytes / first.awsetContextBytes,
    (m) => m > 1.5,
    command,
  ),
  target("AWSET_PROB tombstone filter, dense size, first to last checkpoint (fixed by its parameters)", "1x", last.apbfBytesDense / first.apbfBytesDense, (m) => m === 1, command),
  target(
    "membership of AWSET_PROB against the exact AWSET at quiescent checkpoints: elements that differ, of all compared (the dissertation: about 2% of syncs at frequent sync)",
    "<= 2%",
    mismatches / compared,
    (m) => m <= 0.02,
    command,
  ),
  target("every checkpoint settled (every node reading the same) within 30 s", "all", both.checkpoints.filter((c) => c.settledMs !== null).length / both.checkpoints.length, (m) => m === 1, command),
];
const dir = quick ? mkdtempSync(join(tmpdir(), "deltaset-prob-cluster-")) : resultsDir;
const path = writeResultFile(join(dir, "prob-cluster.json"), {
  params: { quick, nodes: NODES, ops: OPS, churnEvery: CHURN_EVERY, universe: UNIVERSE, addShare: ADD_SHARE, sync: "Algorithm 2 + BP + RR, 100 ms period", filter: "default: error 2, capacity 4096, level 5, Current Generation" },
  metrics: { both, exactOnly: { ...exactOnly, checkpoints: undefined }, probOnly: { ...probOnly, checkpoints: undefined } },
  targets,
});
await drawChart(path);
printTargets(targets);
console.log(`results: ${path} (${Math.round((performance.now() - started) / 1000)} s)`);
