// The client API against its ceilings, for bench:replica: a real node (fsync) and a no-op server
// of the same Replica service (noop-server.ts, its own process) measured alternately in one run:
// single-element unary Add with 32 calls in flight over 4 channels, and AddStream with 4 streams
// of 100-element batches (16 unacknowledged each); and Redis SADD (AOF everysec) beside them,
// unpipelined (32 connections) and pipelined (4 connections, 1000 per round trip), when
// redis-server is installed.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { addStream } from "../../services/client/add-stream.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { redisAvailable, saddRate, startRedis } from "./redis-baseline.ts";

type Client = ReturnType<typeof replicaClient>;
const NOOP = fileURLToPath(new URL("./noop-server.ts", import.meta.url));
const TSX = fileURLToPath(new URL("../../node_modules/.bin/tsx", import.meta.url));

async function startNoop(host: string): Promise<{ address: string; stop: () => Promise<void> }> {
  const child = spawn(TSX, [NOOP, host], { stdio: ["ignore", "pipe", "inherit"] });
  const address = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (l) => l.startsWith("listening ") && resolve(l.slice(10)));
    child.once("exit", (code) => reject(new Error(`no-op server exited (${code})`)));
  });
  return { address, stop: async () => void (child.kill("SIGTERM"), await new Promise((r) => child.once("exit", r))) };
}

/** 32 single-element Adds in flight over the channels for `seconds`; returns calls/s. */
async function unaryRate(channels: Client[], seconds: number, tag: string): Promise<number> {
  let ops = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: 32 }, async (_, w) => {
      const c = channels[w % channels.length]!;
      for (let i = 0; performance.now() < end; i++) {
        await call(c, c.add, { key: `${tag}-${w % 8}`, elements: [Buffer.from(`${tag}-${w}-${i}`)], texts: [] });
        ops++;
      }
    }),
  );
  return ops / ((performance.now() - start) / 1000);
}

/** One AddStream per channel, 100-element batches, 16 unacknowledged, for `seconds`; returns acknowledged elements/s. */
async function streamRate(channels: Client[], seconds: number, tag: string): Promise<number> {
  const start = performance.now();
  const end = start + seconds * 1000;
  const results = await Promise.all(
    channels.map((c, s) => {
      function* batches(): Generator<Buffer[]> {
        for (let b = 0; performance.now() < end; b++) yield Array.from({ length: 100 }, (_, i) => Buffer.from(`${tag}-${s}-${b * 100 + i}`));
      }
      return addStream(c, `${tag}-stream-${s}`, batches(), { window: 16 });
    }),
  );
  return results.reduce((a, r) => a + r.elements, 0) / ((performance.now() - start) / 1000);
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
  const runs = { noopUnary: [] as number[], unary: [] as number[], noopStream: [] as number[], stream: [] as number[], redisUnpipelined: [] as number[], redisPipelined: [] as number[] };
  try {
    // Warm-up: JIT, connections, the node's first LevelDB files.
    await unaryRate(nodeCh, 1, "warm");
    await unaryRate(noopCh, 1, "warm");
    await streamRate(nodeCh, 1, "warm");
    await streamRate(noopCh, 1, "warm");
    for (let r = 0; r < rounds; r++) {
      runs.noopUnary.push(await unaryRate(noopCh, seconds, `nu${r}`));
      runs.unary.push(await unaryRate(nodeCh, seconds, `u${r}`));
      runs.noopStream.push(await streamRate(noopCh, seconds, `ns${r}`));
      runs.stream.push(await streamRate(nodeCh, seconds, `s${r}`));
      if (redis) {
        runs.redisUnpipelined.push(await saddRate("127.0.0.57", redis.port, 32, 1, seconds, `ru${r}`));
        runs.redisPipelined.push(await saddRate("127.0.0.57", redis.port, 4, 1000, seconds, `rp${r}`));
      }
      console.log(
        `ceilings round ${r + 1}: unary ${runs.unary.at(-1)!.toFixed(0)}/s (no-op ${runs.noopUnary.at(-1)!.toFixed(0)}), stream ${runs.stream.at(-1)!.toFixed(0)} el/s (no-op ${runs.noopStream.at(-1)!.toFixed(0)})` +
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
  return {
    secondsPerRun: seconds,
    rounds,
    runs,
    means: m,
    unaryVsNoop: m.unary! / m.noopUnary!,
    streamVsNoop: m.stream! / m.noopStream!,
    redis: redis === undefined ? null : { note: "redis-server (Debian package), AOF everysec", unaryVsSaddUnpipelined: m.unary! / m.redisUnpipelined!, streamVsSaddUnpipelined: m.stream! / m.redisUnpipelined! },
    redisNote: redis === undefined ? "redis-server is not installed (apt-get install redis-server): Redis lines skipped" : undefined,
  };
}
