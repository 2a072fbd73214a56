// What a write concern costs: Add on 3 real node processes (fsync, default 200 ms gossip period,
// pushes of local changes off) asking for 1, 2 or 3 copies. Latency: one Add at a time, the three
// settings taking turns call by call so the machine's load falls on each alike. Throughput: 32
// Adds in flight over 4 channels for a few seconds per setting, settings alternated by round;
// and AddStream: 4 streams of 100-element batches (64 unacknowledged) for as long, alternated alike.
// Catch-up: on a second cluster of 3 nodes with a 64 KiB delta buffer, one node is SIGKILLed, a bulk load
// outruns the buffer, and the node restarts, needing the partition's full state: copies-3 Adds are
// then made one at a time until 20 are confirmed, beside how long that node took to hold the load.
// Writes docs/results/write-copies.json and its chart; one target, on the catch-up: no copies-3
// Add times out while a holder catches up.
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
import { commandLine, isQuick, printTargets, target, writeResults } from "./lib/results.ts";
import { batchFill } from "./lib/fill.ts";

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

const BULK = quick ? 50_000 : 200_000;
const CONFIRMED = 20;

/**
 * A holder returning behind the delta buffer: how soon copies-3 Adds are confirmed, against how
 * long its catch-up (the bulk load's full state) takes. Attempts before the others count it a
 * member again are refused UNAVAILABLE and not counted.
 */
async function catchUp() {
  const b = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.28.${10 + i}:7802`), [...FLAGS, "--gossip-max-buffer-bytes", "65536", "--copies-timeout-ms", "5000"], "u");
  const loaders = Array.from({ length: 4 }, () => replicaClient(b.addresses[0]!));
  try {
    await b.startAll();
    const one = (element: string) => b.replica(0, (r) => call(r, r.add, { key: "w", elements: [Buffer.from(element)], texts: [], copies: 3 }, { timeoutMs: 10_000 }));
    await eventually("3 copies to be had", () => one("warm").catch(() => ({ copies: 0 })), (r) => r.copies === 3, 30_000);
    await b.kill(2);
    await batchFill(loaders, "bulk", 0, BULK, (i) => Buffer.from(`bulk-${String(i).padStart(7, "0")}`));
    const back = performance.now();
    await b.start(2);
    const listeningMs = performance.now() - back;
    let caughtUpMs: number | undefined;
    const watching = (async () => {
      while (caughtUpMs === undefined && performance.now() - back < 120_000) {
        if ((await b.size(2, "bulk").catch(() => 0)) >= BULK) caughtUpMs = performance.now() - back;
        else await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const confirmed: Array<{ atMs: number; ms: number }> = [];
    let timedOut = 0;
    let unavailable = 0;
    for (let i = 0; confirmed.length < CONFIRMED && performance.now() - back < 120_000; i++) {
      const t0 = performance.now();
      try {
        const r = await one(`w${i}`);
        if (r.copies !== 3) throw new Error(`copies 3 answered with ${r.copies}`);
        confirmed.push({ atMs: t0 - back, ms: performance.now() - t0 });
      } catch (err) {
        const code = (err as { code?: number }).code;
        if (code === 14) unavailable++;
        else if (code === 4) timedOut++;
        else throw err;
        if (code === 14) await new Promise((r) => setTimeout(r, 20));
      }
    }
    await watching;
    const sorted = confirmed.map((x) => x.ms).sort((a, c2) => a - c2);
    return {
      bulk: BULK,
      /** From the restart until the node listened again, then until the first Add confirmed (its start). */
      listeningMs,
      restartToFirstConfirmedMs: confirmed[0] === undefined ? undefined : confirmed[0].atMs + confirmed[0].ms,
      attempts: confirmed.map((x) => [Math.round(x.atMs), Math.round(x.ms * 10) / 10]),
      confirmed: confirmed.length,
      confirmedBeforeCaughtUp: confirmed.filter((x) => caughtUpMs === undefined || x.atMs + x.ms < caughtUpMs).length,
      p50Ms: percentile(sorted, 0.5),
      maxMs: sorted.at(-1),
      timedOut,
      unavailable,
      caughtUpMs,
    };
  } finally {
    for (const l of loaders) l.close();
    await b.close();
  }
}

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
  const caught = await catchUp();
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const throughput = SETTINGS.map((s) => ({ copies: s, callsPerSecond: mean(rates.get(s)!), rounds: rates.get(s)! }));
  const streams = SETTINGS.map((s) => ({ copies: s, elementsPerSecond: mean(streamRates.get(s)!), rounds: streamRates.get(s)! }));
  for (const l of latency) process.stdout.write(`copies ${l.copies}: p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms (${l.calls} calls)\n`);
  for (const t of throughput) process.stdout.write(`copies ${t.copies}: ${t.callsPerSecond.toFixed(0)} Adds/s with ${IN_FLIGHT} in flight (rounds ${t.rounds.map((r) => r.toFixed(0)).join(", ")})\n`);
  for (const t of streams) process.stdout.write(`copies ${t.copies}: ${t.elementsPerSecond.toFixed(0)} streamed elements/s (rounds ${t.rounds.map((r) => r.toFixed(0)).join(", ")})\n`);
  process.stdout.write(
    `catch-up: a holder back after missing ${caught.bulk} elements took ${caught.caughtUpMs?.toFixed(0) ?? "more than 120 000"} ms to hold them; ` +
      `it listened again after ${caught.listeningMs.toFixed(0)} ms and the first copies-3 Add was answered ${caught.restartToFirstConfirmedMs?.toFixed(0)} ms after its restart, ${caught.confirmedBeforeCaughtUp} of ${caught.confirmed} before its catch-up ended ` +
      `(p50 ${caught.p50Ms.toFixed(1)} ms, max ${caught.maxMs?.toFixed(1)} ms; ${caught.timedOut} timed out, ${caught.unavailable} refused before it was a member again)\n`,
  );
  const targets = [
    target("copies-3 Adds that time out (DEADLINE_EXCEEDED, 5 s) while a holder catches up on a full state", "0", caught.timedOut, (m) => m === 0, commandLine("bench:write-copies", quick)),
  ];
  printTargets(targets);
  const path = writeResults("write-copies", {
    params: { quick, nodes: 3, latencyCalls: LATENCY_CALLS, throughputMs: THROUGHPUT_MS, rounds: ROUNDS, inFlight: IN_FLIGHT, gossipIntervalMs: 200, sync: "fsync" },
    metrics: { latency, throughput, streams, catchUp: caught, streamCopies3OverCopies1: streams[2]!.elementsPerSecond / streams[0]!.elementsPerSecond, p50Copies3OverCopies1: latency[2]!.p50 / latency[0]!.p50, rateCopies3OverCopies1: throughput[2]!.callsPerSecond / throughput[0]!.callsPerSecond },
    targets,
  });
  await drawChart(path);
  process.stdout.write(`wrote ${path}\n`);
} finally {
  for (const cl of clients) cl.close();
  await c.close();
  rmSync(dir, { recursive: true, force: true });
}
