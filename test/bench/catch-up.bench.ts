// What a node's return costs the cluster: full-state bytes shipped (deltaset_gossip_sent_bytes,
// kind="state") and Contexts answers (deltaset_gossip_transport_events, contexts_reply_bytes),
// summed over the nodes, relative to one copy of the data, on 3 real node processes
// holding the same sets, in three events of the third node:
//  - restarted with its data (SIGTERM, start again): it lost nothing;
//  - killed (SIGKILL) and started again with its data: it lost nothing acknowledged;
//  - wiped (SIGKILL, data directory removed) and started again: it needs one copy;
// and a rolling restart of all three, one at a time (what an orchestrated update does).
// One copy is the slice bytes of an Export of every key from the first node. Each event also
// reports how long until every node read the same sizes and the nodes shipped no more state, and
// how many of the sets the pushes decided about their senders read from their stores to cut a
// delta (the others were left out on their live digests alone).
// Akka Distributed Data, after a restart with its durable store, exchanges per-key digests and
// ships only keys that differ (its Replicator gossips SHA-1 digests per key): the target for a node
// that lost nothing.
// Writes docs/results/catch-up.json and .svg (--quick: fewer elements, a temporary directory).
// Usage: npm run bench:catch-up [-- --quick]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sumSamples } from "../../services/chaos/eval/counters.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import type { ExportChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { drawChart } from "./charts/draw.ts";
import { writeResultFile } from "../../services/common/result-file.ts";
import { commandLine, isQuick, printTargets, resultsDir, target } from "./lib/results.ts";

const quick = isQuick();
const command = commandLine("bench:catch-up", quick);
const KEYS = 60;
const PER_KEY = quick ? 1000 : 5000;
const HOSTS = [1, 2, 3].map((i) => `127.0.7.${i}`);
const METRICS = HOSTS.map((h) => `${h}:9871`);
const FLAGS = ["--partitions", "64", "--gossip-interval-ms", "200", "--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--log-level", "warn"];

const dir = mkdtempSync(join(tmpdir(), "deltaset-bench-catchup-"));
const c = new TestCluster(dir, HOSTS.map((h) => `${h}:7871`), FLAGS, "cu");
const start = (i: number) => c.start(i, ["--metrics-listen", METRICS[i]!]);

/**
 * Bytes node i sent to catch a neighbour up since its process started: full-state payload (with
 * the removes of keys sent as deltas) and its answers to neighbours' Contexts requests.
 */
async function stateBytesSent(i: number): Promise<number> {
  const text = await (await fetch(`http://${METRICS[i]}/metrics`)).text();
  return sumSamples(text, "deltaset_gossip_sent_bytes_total", { kind: "state" }) + sumSamples(text, "deltaset_gossip_transport_events_total", { event: "contexts_reply_bytes" });
}

/**
 * Sets node i's pushes cut as deltas or left out since its process started, and how many of them
 * it read from its store to decide (the others were left out on their live digests alone).
 */
async function setsDecided(i: number): Promise<{ decided: number; read: number }> {
  const text = await (await fetch(`http://${METRICS[i]}/metrics`)).text();
  const ev = (event: string) => sumSamples(text, "deltaset_gossip_transport_events_total", { event });
  const decided = ev("catch_up_delta_keys") + ev("catch_up_keys_skipped");
  return { decided, read: decided - ev("catch_up_keys_unread") };
}

/** Live elements per key on node i. */
async function sizes(i: number): Promise<string> {
  const page = await c.replica(i, (r) => call(r, r.keys, { prefix: "", pageSize: 1000, pageToken: Buffer.alloc(0) }));
  return page.keys.map((k) => `${k.key}=${k.size}`).sort().join(",");
}

/** Slice bytes of an Export of every key from node 0: one copy of the data. */
async function oneCopy(): Promise<number> {
  const client = replicaClient(c.addresses[0]!);
  let bytes = 0;
  try {
    for (let k = 0; k < KEYS; k++) {
      await new Promise<void>((resolve, reject) => {
        const s = client.export({ key: `k${k}`, maxEntries: 0, maxBytes: 0 });
        s.on("data", (x: ExportChunk) => (bytes += x.slice?.payload.length ?? 0));
        s.on("error", reject);
        s.on("end", resolve);
      });
    }
  } finally {
    client.close();
  }
  return bytes;
}

/** Wait until every node reads the same sizes and no node shipped state for 2 s; returns ms and bytes shipped since `before`. */
async function settle(before: number[], expected: string, t0: number): Promise<{ ms: number; bytes: number }> {
  let last = -1;
  let quietSince = performance.now();
  let settledAt = 0;
  for (const deadline = performance.now() + 300_000; performance.now() < deadline; ) {
    const sent = await Promise.all([0, 1, 2].map(stateBytesSent));
    const total = sent.reduce((a, b, i) => a + b - before[i]!, 0);
    const same = (await Promise.all([0, 1, 2].map(sizes))).every((s) => s === expected);
    if (total !== last) {
      last = total;
      quietSince = performance.now();
    }
    if (same && settledAt === 0) settledAt = performance.now();
    if (!same) settledAt = 0;
    if (same && performance.now() - quietSince >= 2000) return { ms: Math.max(settledAt, quietSince) - t0, bytes: total };
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("the cluster did not settle within 5 minutes");
}

type Event = { name: string; bytes: number; copies: number; settleMs: number; setsDecided: number; setsRead: number };

/** Sets decided and read by every node since `before` (a restarted node counts from 0: its entry is zeroed). */
async function setsSince(before: Array<{ decided: number; read: number }>): Promise<{ setsDecided: number; setsRead: number }> {
  const now = await Promise.all([0, 1, 2].map(setsDecided));
  return {
    setsDecided: now.reduce((a, x, i) => a + x.decided - before[i]!.decided, 0),
    setsRead: now.reduce((a, x, i) => a + x.read - before[i]!.read, 0),
  };
}
const ZERO = { decided: 0, read: 0 };
const events: Event[] = [];
let copy = 0;
try {
  await Promise.all([0, 1, 2].map(start));
  await c.replica(0, (r) =>
    Promise.all(
      Array.from({ length: KEYS }, async (_, k) => {
        for (let e = 0; e < PER_KEY; e += 1000) {
          const elements = Array.from({ length: Math.min(1000, PER_KEY - e) }, (_, j) => Buffer.from(`element-${k}-${e + j}`));
          await call(r, r.add, { key: `k${k}`, elements, texts: [] }, { timeoutMs: 60_000 });
        }
      }),
    ),
  );
  const expected = Array.from({ length: KEYS }, (_, k) => `k${k}=${PER_KEY}`).sort().join(",");
  await settle([0, 0, 0], expected, performance.now());
  copy = await oneCopy();
  console.log(`${KEYS * PER_KEY} elements in ${KEYS} keys: one copy ${copy} bytes`);
  const returns: Array<[string, () => Promise<void>]> = [
    ["restart with its data (SIGTERM)", async () => void (await c.nodes.get(2)!.stop(), c.nodes.delete(2))],
    ["crash, restart with its data (SIGKILL)", () => c.kill(2)],
    ["wiped, restart empty", async () => (await c.kill(2), rmSync(c.dataDir(2), { recursive: true, force: true }))],
  ];
  for (const [name, down] of returns) {
    const before = await Promise.all([0, 1, 2].map(stateBytesSent));
    const setsBefore = await Promise.all([0, 1, 2].map(setsDecided));
    await down();
    before[2] = 0; // a new process counts from 0
    setsBefore[2] = ZERO;
    const t0 = performance.now();
    await start(2);
    const r = await settle(before, expected, t0);
    const sets = await setsSince(setsBefore);
    events.push({ name, bytes: r.bytes, copies: r.bytes / copy, settleMs: r.ms, ...sets });
    console.log(`${name}: ${r.bytes} state bytes = ${(r.bytes / copy).toFixed(2)} copies; settled in ${Math.round(r.ms)} ms; sets read to cut a delta: ${sets.setsRead} of ${sets.setsDecided}`);
  }
  // A rolling restart (as a Deployment or StatefulSet update does): each node in turn stopped
  // (SIGTERM), started again with its data, and the cluster settled before the next. Bytes of
  // every node's processes, each counted from its start.
  {
    const t0 = performance.now();
    let bytes = 0;
    const sets = { setsDecided: 0, setsRead: 0 };
    for (const i of [0, 1, 2]) {
      const before = await Promise.all([0, 1, 2].map(stateBytesSent));
      const setsBefore = await Promise.all([0, 1, 2].map(setsDecided));
      await c.nodes.get(i)!.stop();
      c.nodes.delete(i);
      before[i] = 0;
      setsBefore[i] = ZERO;
      await start(i);
      bytes += (await settle(before, expected, performance.now())).bytes;
      const s = await setsSince(setsBefore);
      sets.setsDecided += s.setsDecided;
      sets.setsRead += s.setsRead;
    }
    const name = "rolling restart of all 3 nodes (SIGTERM, one at a time)";
    events.push({ name, bytes, copies: bytes / copy, settleMs: performance.now() - t0, ...sets });
    console.log(`${name}: ${bytes} state bytes = ${(bytes / copy).toFixed(2)} copies; done in ${Math.round(performance.now() - t0)} ms; sets read to cut a delta: ${sets.setsRead} of ${sets.setsDecided}`);
  }
} finally {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
}

const of = (i: number) => events[i]!;
const targets = [
  target("a node restarted with its data (SIGTERM): full-state bytes the cluster ships, in copies of the data", "<= 0.1", of(0).copies, (m) => m <= 0.1, command),
  target("a node restarted with its data after SIGKILL: full-state bytes the cluster ships, in copies of the data", "<= 0.1", of(1).copies, (m) => m <= 0.1, command),
  target("a wiped node: full-state bytes the cluster ships to bring it back, in copies of the data", "<= 1.5", of(2).copies, (m) => m <= 1.5, command),
  target("a rolling restart of every node: full-state bytes the cluster ships, in copies of the data", "<= 0.3", of(3).copies, (m) => m <= 0.3, command),
];
const path = writeResultFile(join(quick ? mkdtempSync(join(tmpdir(), "deltaset-catchup-")) : resultsDir, "catch-up.json"), {
  params: { quick, nodes: 3, keys: KEYS, elementsPerKey: PER_KEY, partitions: 64, gossipIntervalMs: 200 },
  metrics: { copyBytes: copy, events },
  targets,
});
await drawChart(path);
printTargets(targets);
console.log(`results: ${path}`);
