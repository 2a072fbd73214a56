// The client API against its ceilings, for bench:replica: a real node (fsync) and a no-op server
// of the same Replica service (noop-server.ts, its own process) measured alternately in one run:
// single-element unary Add with 32 calls in flight over 4 channels, and AddStream with 4 streams
// in three shapes: 1, 10 and 100 elements per message (256, 64 and 16 messages unacknowledged).
// The stream's target is judged at one element per message, the shape of a client streaming the
// elements it would otherwise send one unary Add each; the larger messages are bulk ingest, where
// the no-op's cost per element vanishes and the node's storage is the limit, so beside them the
// run measures that limit: LevelDB puts from this process, one record per element, fsync'd
// batches, no deltaset code (storageCeiling). Redis SADD (AOF everysec) beside them, unpipelined
// (32 connections) and pipelined (4 connections, 1000 per round trip), when redis-server is installed.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { ClassicLevel } from "classic-level";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { addStream } from "../../services/client/add-stream.ts";
import { replicaClient } from "../../services/client/rpc.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { redisAvailable, saddRate, startRedis } from "./redis-baseline.ts";
import { mainThreadCpuSecondsOf } from "./lib/proc-cpu.ts";
import { unaryRate } from "./lib/unary-load.ts";

type Client = ReturnType<typeof replicaClient>;
const NOOP = fileURLToPath(new URL("./noop-server.ts", import.meta.url));
// Run through the same module loader as a node, so both servers run the same transformed code.
const REGISTER = fileURLToPath(new URL("../../bin/register-ts.mjs", import.meta.url));

async function startNoop(host: string): Promise<{ address: string; pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ["--import", REGISTER, NOOP, host], { stdio: ["ignore", "pipe", "inherit"] });
  const address = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (l) => l.startsWith("listening ") && resolve(l.slice(10)));
    child.once("exit", (code) => reject(new Error(`no-op server exited (${code})`)));
  });
  return { address, pid: child.pid!, stop: async () => void (child.kill("SIGTERM"), await new Promise((r) => child.once("exit", r))) };
}

/**
 * unaryRate, also measuring the server's event-loop CPU per call: a server whose event loop is
 * saturated can answer at most 1e6 / that many calls a second, whatever the client does.
 */
async function unaryRateWithCpu(channels: Client[], seconds: number, tag: string, serverPid: number): Promise<{ rate: number; mainCpuMicrosPerCall: number }> {
  const before = mainThreadCpuSecondsOf(serverPid);
  const start = performance.now();
  const rate = await unaryRate(channels, seconds, tag);
  const calls = rate * ((performance.now() - start) / 1000);
  return { rate, mainCpuMicrosPerCall: ((mainThreadCpuSecondsOf(serverPid) - before) * 1e6) / calls };
}

/** AddStream shapes: elements per message, and messages a stream leaves unacknowledged. */
export const STREAM_SHAPES = [
  { perMessage: 1, window: 256 },
  { perMessage: 10, window: 64 },
  { perMessage: 100, window: 16 },
] as const;
type Shape = (typeof STREAM_SHAPES)[number];

/** One AddStream per channel in the given shape for `seconds`; returns acknowledged elements/s. */
async function streamRate(channels: Client[], seconds: number, tag: string, shape: Shape): Promise<number> {
  const start = performance.now();
  const end = start + seconds * 1000;
  const n = shape.perMessage;
  const results = await Promise.all(
    channels.map((c, s) => {
      function* batches(): Generator<Buffer[]> {
        for (let b = 0; performance.now() < end; b++) yield Array.from({ length: n }, (_, i) => Buffer.from(`${tag}-${s}-${b * n + i}`));
      }
      return addStream(c, `${tag}-stream-${s}`, batches(), { window: shape.window });
    }),
  );
  return results.reduce((a, r) => a + r.elements, 0) / ((performance.now() - start) / 1000);
}

/**
 * What the disk path allows with no deltaset code at all: LevelDB (the node's classic-level) puts
 * from this process, one 9-byte record per element under a key shaped like an element record's,
 * 400 records per chained batch, fsync'd, two batches in flight, for `seconds`; returns puts/s.
 */
async function storageCeiling(dir: string, seconds: number, tag: string): Promise<number> {
  mkdirSync(dir, { recursive: true });
  const db = new ClassicLevel<Buffer, Buffer>(join(dir, tag), { keyEncoding: "buffer", valueEncoding: "buffer" });
  await db.open();
  const value = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  let puts = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  try {
    const inFlight: Promise<void>[] = [];
    for (let b = 0; performance.now() < end; b++) {
      const batch = db.batch();
      for (let i = 0; i < 400; i++) batch.put(Buffer.from(`\u0001\u0000\u0000\u0003${tag}-stream-0\u0000${tag}-0-${b * 400 + i}`), value);
      inFlight.push(batch.write({ sync: true }).then(() => void (puts += 400)));
      if (inFlight.length >= 2) await inFlight.shift();
    }
    await Promise.all(inFlight);
  } finally {
    await db.close();
  }
  return puts / ((performance.now() - start) / 1000);
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export async function clientApiCeilings(quick: boolean, root: string) {
  const seconds = quick ? 2 : 4;
  const rounds = quick ? 1 : 3;
  const node = await startNodeProcess(["--listen", "127.0.0.55:0", "--data-dir", join(root, "ceilings"), "--log-level", "warn"]);
  const noop = await startNoop("127.0.0.56");
  const redis = redisAvailable() ? await startRedis("127.0.0.57", 6390) : undefined;
  const nodeCh = Array.from({ length: 4 }, () => replicaClient(node.address));
  const noopCh = Array.from({ length: 4 }, () => replicaClient(noop.address));
  const cpu = { noopUnary: [] as number[], unary: [] as number[] };
  const runs = { noopUnary: [] as number[], unary: [] as number[], storageCeiling: [] as number[], redisUnpipelined: [] as number[], redisPipelined: [] as number[] };
  const streamRuns = STREAM_SHAPES.map((shape) => ({ ...shape, noop: [] as number[], node: [] as number[] }));
  try {
    // Warm-up: JIT, connections, the node's first LevelDB files.
    await unaryRate(nodeCh, 1, "warm");
    await unaryRate(noopCh, 1, "warm");
    for (const shape of STREAM_SHAPES) {
      await streamRate(nodeCh, 1, `warm${shape.perMessage}`, shape);
      await streamRate(noopCh, 1, `warm${shape.perMessage}`, shape);
    }
    for (let r = 0; r < rounds; r++) {
      const nu = await unaryRateWithCpu(noopCh, seconds, `nu${r}`, noop.pid);
      const u = await unaryRateWithCpu(nodeCh, seconds, `u${r}`, node.child.pid!);
      runs.noopUnary.push(nu.rate);
      runs.unary.push(u.rate);
      cpu.noopUnary.push(nu.mainCpuMicrosPerCall);
      cpu.unary.push(u.mainCpuMicrosPerCall);
      for (const sr of streamRuns) {
        sr.noop.push(await streamRate(noopCh, seconds, `ns${sr.perMessage}-${r}`, sr));
        sr.node.push(await streamRate(nodeCh, seconds, `s${sr.perMessage}-${r}`, sr));
      }
      runs.storageCeiling.push(await storageCeiling(join(root, "ceiling"), seconds, `c${r}`));
      if (redis) {
        runs.redisUnpipelined.push(await saddRate("127.0.0.57", redis.port, 32, 1, seconds, `ru${r}`));
        runs.redisPipelined.push(await saddRate("127.0.0.57", redis.port, 4, 1000, seconds, `rp${r}`));
      }
      console.log(
        `ceilings round ${r + 1}: unary ${runs.unary.at(-1)!.toFixed(0)}/s (no-op ${runs.noopUnary.at(-1)!.toFixed(0)}; event-loop CPU per call ${cpu.unary.at(-1)!.toFixed(0)} µs, no-op ${cpu.noopUnary.at(-1)!.toFixed(0)} µs), stream el/s ` +
          streamRuns.map((sr) => `${sr.node.at(-1)!.toFixed(0)} at ${sr.perMessage}/message (no-op ${sr.noop.at(-1)!.toFixed(0)})`).join(", ") +
          `, LevelDB puts ${runs.storageCeiling.at(-1)!.toFixed(0)}/s` +
          (redis ? `, redis SADD ${runs.redisUnpipelined.at(-1)!.toFixed(0)}/s unpipelined, ${runs.redisPipelined.at(-1)!.toFixed(0)}/s pipelined` : ""),
      );
    }
  } finally {
    for (const c of [...nodeCh, ...noopCh]) c.close();
    await node.stop();
    await noop.stop();
    await redis?.close();
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, v.length ? mean(v) : null])) as Record<keyof typeof runs, number | null>;
  const streams = streamRuns.map((sr) => {
    const noop = mean(sr.noop);
    const node = mean(sr.node);
    // What the 0.5x target asks at this shape, against what LevelDB alone allows in this run.
    return { ...sr, noopMean: noop, nodeMean: node, vsNoop: node / noop, halfNoopVsStorageCeiling: (0.5 * noop) / m.storageCeiling! };
  });
  const single = streams.find((s) => s.perMessage === 1)!;
  return {
    secondsPerRun: seconds,
    rounds,
    runs,
    means: m,
    streams,
    unaryVsNoop: m.unary! / m.noopUnary!,
    /**
     * Each server's event-loop (main-thread) CPU per unary call, means over the rounds, and their
     * ratio (no-op / node): the most the node's rate can be of the no-op's on a machine where both
     * event loops are saturated (enough cores for the client). Where the client or the cores limit
     * the no-op first, as on a small machine, unaryVsNoop is above it.
     */
    unaryMainCpu: { nodeMicrosPerCall: mean(cpu.unary), noopMicrosPerCall: mean(cpu.noopUnary), eventLoopBoundRatio: mean(cpu.noopUnary) / mean(cpu.unary) },
    /** The stream target's ratio: one element per message. */
    streamVsNoop: single.vsNoop,
    redis:
      redis === undefined
        ? null
        : {
            note: "redis-server (Debian package), AOF everysec",
            unaryVsSaddUnpipelined: m.unary! / m.redisUnpipelined!,
            streamVsSaddUnpipelined: single.nodeMean / m.redisUnpipelined!,
            streamsVsSaddUnpipelined: streams.map((s) => ({ perMessage: s.perMessage, ratio: s.nodeMean / m.redisUnpipelined! })),
          },
    redisNote: redis === undefined ? "redis-server is not installed (apt-get install redis-server): Redis lines skipped" : undefined,
  };
}
