// bench:replica --large: one set filled to 10 million elements on a real node (fsync), with
// single-element Add latency at 1k, 1M and 10M elements, the node's RSS and data directory per
// element at 10M; and, when redis-server is installed, Redis's memory for the same set (SADD of the
// same members, pipelined) for bytes per element side by side.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { batchFill } from "./lib/fill.ts";
import { redisAvailable, redisUsedMemory, saddFill, startRedis } from "./redis-baseline.ts";

const member = (i: number) => `f${String(i).padStart(8, "0")}`;

function dirBytes(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = statSync(p);
    total += s.isDirectory() ? dirBytes(p) : s.size;
  }
  return total;
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

export async function largeSetBench(root: string, rssOf: (pid: number) => number, total = 10_000_000, samples = 300) {
  const dataDir = join(root, "large");
  const node = await startNodeProcess(["--listen", "127.0.0.58:0", "--data-dir", dataDir, "--log-level", "warn"]);
  const clients = Array.from({ length: 4 }, () => replicaClient(node.address));
  const checkpoints = [...new Set([1_000, 1_000_000, total])].filter((n) => n <= total).sort((a, b) => a - b);
  const latency: Array<{ size: number; p50: number; p99: number }> = [];
  let filled = 0;
  const t0 = performance.now();
  try {
    for (const size of checkpoints) {
      await batchFill(clients, "huge", filled, size, (i) => Buffer.from(member(i)));
      filled = size;
      const lat: number[] = [];
      const c = clients[0]!;
      for (let i = 0; i < samples; i++) {
        const t = performance.now();
        await call(c, c.add, { key: "huge", elements: [Buffer.from(`lat${size}-${i}`)], texts: [] });
        lat.push(performance.now() - t);
      }
      latency.push({ size, p50: percentile(lat, 50), p99: percentile(lat, 99) });
      console.log(`large set: Add latency at ${size}: p50 ${percentile(lat, 50).toFixed(3)} ms, p99 ${percentile(lat, 99).toFixed(3)} ms (filled in ${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    }
    const elements = total + samples * checkpoints.length;
    const rssBytes = rssOf(node.child.pid!);
    const diskBytes = dirBytes(dataDir);
    let redis: { usedMemoryBytes: number; bytesPerElement: number } | null = null;
    let redisNote: string | undefined;
    if (redisAvailable()) {
      const r = await startRedis("127.0.0.59", 6391);
      try {
        const before = await redisUsedMemory("127.0.0.59", r.port);
        await saddFill("127.0.0.59", r.port, "huge", total, member);
        const after = await redisUsedMemory("127.0.0.59", r.port);
        redis = { usedMemoryBytes: after - before, bytesPerElement: (after - before) / total };
      } finally {
        await r.close();
      }
    } else {
      redisNote = "redis-server is not installed: no Redis figures";
    }
    const out = {
      elements,
      latency,
      p50Ratio: latency.at(-1)!.p50 / latency[0]!.p50,
      rssBytes,
      rssBytesPerElement: rssBytes / elements,
      diskBytes,
      diskBytesPerElement: diskBytes / elements,
      redis,
      redisNote,
      fillSeconds: (performance.now() - t0) / 1000,
    };
    console.log(
      `large set: ${elements} elements, p50 at ${total} / at 1k ${out.p50Ratio.toFixed(2)}x; node RSS ${(rssBytes / 2 ** 20).toFixed(0)} MiB (${out.rssBytesPerElement.toFixed(1)} B/element), ` +
        `data dir ${(diskBytes / 2 ** 20).toFixed(0)} MiB (${out.diskBytesPerElement.toFixed(1)} B/element)` +
        (redis ? `; Redis used_memory ${(redis.usedMemoryBytes / 2 ** 20).toFixed(0)} MiB (${redis.bytesPerElement.toFixed(1)} B/element)` : ""),
    );
    return out;
  } finally {
    for (const c of clients) c.close();
    await node.stop();
  }
}
