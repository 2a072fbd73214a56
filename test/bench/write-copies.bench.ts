// What a write concern costs: Add on 3 real node processes (fsync, default 200 ms gossip period,
// pushes of local changes off) asking for 1, 2 or 3 copies. Latency: one Add at a time, the three
// settings taking turns call by call so the machine's load falls on each alike. Throughput: 32
// Adds in flight over 4 channels for a few seconds per setting, settings alternated by round;
// and AddStream: 4 streams of 100-element batches (64 unacknowledged) for as long, alternated alike.
// Writes docs/results/write-copies.json and its chart (no target: what the option costs).
// Usage: npm run bench:write-copies [-- --quick]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { addStream } from "../../services/client/add-stream.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { drawChart } from "./charts/draw.ts";
import { percentile } from "./lib/timing.ts";
import { isQuick, writeResults } from "./lib/results.ts";

const quick = isQuick();
const LATENCY_CALLS = quick ? 60 : 600;
const THROUGHPUT_MS = quick ? 1000 : 4000;
const ROUNDS = quick ? 1 : 3;
const IN_FLIGHT = 32;
const SETTINGS = [1, 2, 3] as const;
const FLAGS = ["--partitions", "64", "--log-level", "warn"];

const dir = mkdtempSync(join(tmpdir(), "deltaset-bench-copies-"));
const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.28.${i}:7801`), FLAGS, "c");
const clients = Array.from({ length: 4 }, () => replicaClient(c.addresses[0]!));
const add = (key: string, element: string, copies: number, i = 0) =>
  call(clients[i % clients.length]!, clients[0]!.add, { key, elements: [Buffer.from(element)], texts: [], copies }, { timeoutMs: 10_000 });

/** Every stream key takes an Add with 3 copies within the timeout: the other nodes hold its partitions up to now. */
const settled = () =>
  Promise.all(clients.map((_, w) => eventually(`stream${w} to settle`, () => add(`stream${w}`, `settle-${Date.now()}`, 3).catch(() => ({ copies: 0 })), (r) => r.copies === 3, 120_000)));

try {
  await c.startAll();
  await eventually("3 copies to be had", () => add("warm", "w", 3), (r) => r.copies === 3, 30_000);

  // Latency: one call at a time, settings in turn.
  const ms = new Map<number, number[]>(SETTINGS.map((s) => [s, []]));
  for (let i = 0; i < LATENCY_CALLS; i++) {
    for (const s of SETTINGS) {
      const t0 = performance.now();
      const r = await add(`lat${i % 16}`, `l${s}-${i}`, s);
      ms.get(s)!.push(performance.now() - t0);
      if (s > 1 && r.copies < s) throw new Error(`copies ${s} answered with ${r.copies}`);
    }
  }
  const latency = SETTINGS.map((s) => {
    const sorted = [...ms.get(s)!].sort((a, b) => a - b);
    return { copies: s, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), calls: sorted.length };
  });

  // Throughput: IN_FLIGHT callers for THROUGHPUT_MS per setting, alternated by round.
  const rates = new Map<number, number[]>(SETTINGS.map((s) => [s, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of SETTINGS) {
      let done = 0;
      const t0 = performance.now();
      const until = t0 + THROUGHPUT_MS;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async (_, w) => {
          for (let i = 0; performance.now() < until; i++) {
            await add(`tp${w % 8}`, `t${round}-${s}-${w}-${i}`, s, w);
            done++;
          }
        }),
      );
      rates.get(s)!.push(done / ((performance.now() - t0) / 1000));
    }
  }
  // AddStream: acknowledged elements/s, 4 streams on one key each.
  const streamRates = new Map<number, number[]>(SETTINGS.map((s) => [s, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of SETTINGS) {
      // Each setting starts from a settled cluster: streaming with fewer copies outruns the other
      // nodes, and a write's copies wait until its holders have caught up with its partition.
      await settled();
      const t0 = performance.now();
      const until = t0 + THROUGHPUT_MS;
      const results = await Promise.all(
        clients.map((cl, w) => {
          function* batches() {
            for (let b = 0; performance.now() < until; b++) yield Array.from({ length: 100 }, (_, i) => Buffer.from(`st${round}-${s}-${w}-${b}-${i}`));
          }
          return addStream(cl, `stream${w}`, batches(), { copies: s });
        }),
      );
      streamRates.get(s)!.push(results.reduce((n, r) => n + r.elements, 0) / ((performance.now() - t0) / 1000));
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const throughput = SETTINGS.map((s) => ({ copies: s, callsPerSecond: mean(rates.get(s)!), rounds: rates.get(s)! }));
  const streams = SETTINGS.map((s) => ({ copies: s, elementsPerSecond: mean(streamRates.get(s)!), rounds: streamRates.get(s)! }));
  for (const l of latency) process.stdout.write(`copies ${l.copies}: p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms (${l.calls} calls)\n`);
  for (const t of throughput) process.stdout.write(`copies ${t.copies}: ${t.callsPerSecond.toFixed(0)} Adds/s with ${IN_FLIGHT} in flight (rounds ${t.rounds.map((r) => r.toFixed(0)).join(", ")})\n`);
  for (const t of streams) process.stdout.write(`copies ${t.copies}: ${t.elementsPerSecond.toFixed(0)} streamed elements/s (rounds ${t.rounds.map((r) => r.toFixed(0)).join(", ")})\n`);
  const path = writeResults("write-copies", {
    params: { quick, nodes: 3, latencyCalls: LATENCY_CALLS, throughputMs: THROUGHPUT_MS, rounds: ROUNDS, inFlight: IN_FLIGHT, gossipIntervalMs: 200, sync: "fsync" },
    metrics: { latency, throughput, streams, streamCopies3OverCopies1: streams[2]!.elementsPerSecond / streams[0]!.elementsPerSecond, p50Copies3OverCopies1: latency[2]!.p50 / latency[0]!.p50, rateCopies3OverCopies1: throughput[2]!.callsPerSecond / throughput[0]!.callsPerSecond },
    targets: [],
  });
  await drawChart(path);
  process.stdout.write(`wrote ${path}\n`);
} finally {
  for (const cl of clients) cl.close();
  await c.close();
  rmSync(dir, { recursive: true, force: true });
}
