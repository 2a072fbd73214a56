// AddStream throughput on 5 real node processes: --replication-factor 3 (a batch of a key the
// node called does not own is forwarded to an owner as a unary Add) against the default `all`
// (every node takes every batch itself), same clients, same run. One stream per node, batches of
// BATCH elements, each batch to a key drawn from KEYS; elements/s counts acknowledged elements.
// The setups alternate for `rounds` rounds, so a shared machine's load falls on both alike.
// Writes docs/results/add-stream-routing.json and its chart (no target: a comparison).
// Usage: npm run bench:add-stream-routing [-- seconds [rounds]]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { replicaClient } from "../../services/client/rpc.ts";
import type { AddStreamAck } from "../../services/gen/deltaset/v1/replica.ts";
import { eventually } from "../helpers/eventually.ts";
import { ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { drawChart } from "./charts/draw.ts";
import { writeResults } from "./lib/results.ts";

const SECONDS = Number(process.argv[2] ?? 8);
const ROUNDS = Number(process.argv[3] ?? 1);
const BATCH = 100;
const KEYS = 200;
const WINDOW = 64;
const FLAGS = ["--partitions", "64", "--gossip-interval-ms", "200", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--log-level", "warn"];

/** One stream to address for `ms`: acknowledged elements. */
async function stream(address: string, ms: number, seed: number): Promise<number> {
  const client = replicaClient(address);
  const s = client.addStream();
  let acked = 0n;
  let elements = 0;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const ended = new Promise<void>((resolve) => {
    s.on("data", (a: AddStreamAck) => {
      acked = a.seq;
      elements += Number(a.elements);
      wake?.();
    });
    s.on("error", (e: Error) => {
      failure = e;
      wake?.();
      resolve();
    });
    s.on("end", () => resolve());
  });
  const until = Date.now() + ms;
  let r = seed;
  for (let seq = 1n; Date.now() < until && failure === undefined; seq++) {
    while (seq - acked > BigInt(WINDOW) && failure === undefined) await new Promise<void>((w) => (wake = w));
    r = (r * 1103515245 + 12345) & 0x7fffffff;
    const key = `bench${r % KEYS}`;
    const batch = Array.from({ length: BATCH }, (_, i) => Buffer.from(`${seed}-${seq}-${i}`));
    if (!s.write({ key, elements: batch, texts: [], seq })) await new Promise((w) => s.once("drain", w));
  }
  s.end();
  await ended;
  client.close();
  if (failure !== undefined) throw failure;
  return elements;
}

/** Acknowledged elements/s of one setup. */
async function run(setup: string, factor: string, hosts: number[], port: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-bench-route-"));
  const c = new TestCluster(dir, hosts.map((h) => `127.0.5.${h}:${port}`), [...FLAGS, "--replication-factor", factor], factor === "all" ? "f" : "p");
  try {
    await c.startAll();
    const all = hosts.map((_, i) => i);
    await eventually("5 members agree", async () => Promise.all(all.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.join() === v[0]!.join() && o.length === (factor === "all" ? 5 : Number(factor))), 30_000);
    const started = performance.now();
    const counts = await Promise.all(all.map((i) => stream(c.addresses[i]!, SECONDS * 1000, i + 1)));
    const secs = (performance.now() - started) / 1000;
    const total = counts.reduce((a, b) => a + b, 0);
    process.stdout.write(`${setup}: ${total} elements in ${secs.toFixed(1)} s = ${Math.round(total / secs)} elements/s (5 streams, batches of ${BATCH}, ${KEYS} keys)\n`);
    return total / secs;
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const rounds: Array<{ all: number; r3: number }> = [];
for (let r = 0; r < ROUNDS; r++) {
  const all = await run("R = all, 5 nodes", "all", [71, 72, 73, 74, 75], 7841);
  const r3 = await run("R = 3, 5 nodes  ", "3", [76, 77, 78, 79, 80], 7842);
  rounds.push({ all, r3 });
}
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const path = writeResults("add-stream-routing", {
  params: { nodes: 5, seconds: SECONDS, rounds: ROUNDS, batch: BATCH, keys: KEYS, window: WINDOW, streams: "one per node" },
  metrics: { rounds, meanAll: mean(rounds.map((x) => x.all)), meanR3: mean(rounds.map((x) => x.r3)), r3OverAll: mean(rounds.map((x) => x.r3)) / mean(rounds.map((x) => x.all)) },
  targets: [],
});
await drawChart(path);
process.stdout.write(`wrote ${path}\n`);
