// npm run bench:replica [-- --quick]
//
// 1. Layout: single-element Add latency when the set holds 1k, 100k and 1M elements, for the
//    decomposed store (one record per element, seed 004's bigset design) and for an
//    object-per-set baseline that keeps the whole set as one LevelDB value (the design bigset
//    replaces), measured in-process in the same run with the same sync policy; the decomposed
//    stores are all filled first, then timed in rounds that take the sizes in turn.
// 2. A real node process over gRPC: single-element Add throughput with 32 concurrent clients,
//    batch Add (1000 per call, 4 in flight) elements/s while filling the set to 1M, Add latency at 1k/100k/1M,
//    and the node's RSS at 1M elements.
// 3. Telemetry overhead: single-element Add throughput (32 clients) and node CPU per Add of a node
//    without telemetry, one with metrics (--metrics-listen) and one with metrics and tracing
//    (--tracing none: every call's spans recorded, batched, then dropped), measured alternately.
// 5. With --large: one set filled to 10M elements (replica-large.ts): Add p50 at 10M against 1k,
//    node RSS and data directory per element, Redis's memory for the same set.
// 4. The client API against its ceilings (replica-ceilings.ts): unary Add and AddStream against a
//    no-op server of the same service, and Redis SADD beside them when redis-server is installed.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClassicLevel } from "classic-level";
import { AWSet, AWSetLattice } from "../../services/crdt/index.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store, type SyncPolicy } from "../../services/store/store.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { drawChart } from "./charts/draw.ts";
import { clientApiCeilings } from "./replica-ceilings.ts";
import { batchFill } from "./lib/fill.ts";
import { cpuSecondsOf } from "./lib/proc-cpu.ts";
import { largeSetBench } from "./replica-large.ts";
import { commandLine, isQuick, printTargets, target, writeResults } from "./lib/results.ts";

const quick = isQuick();
const SIZES = quick ? [1_000, 10_000, 50_000] : [1_000, 100_000, 1_000_000];
const SAMPLES = quick ? 100 : 300;
const BASELINE_SAMPLES = (n: number) => (n >= 1_000_000 ? 5 : n >= 100_000 ? 20 : 100);
const CMD = commandLine("bench:replica", quick);
const root = mkdtempSync(join(tmpdir(), "deltaset-bench-replica-"));

const el = (prefix: string, i: number) => Buffer.from(`${prefix}${String(i).padStart(8, "0")}`);

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** The design bigset replaces: the whole set is one value, read, decoded, changed, encoded, written. */
class ObjectPerSetStore {
  constructor(private readonly db: ClassicLevel<string, Buffer>, private readonly sync: boolean, private readonly replica: string) {}
  async add(key: string, elements: Buffer[]): Promise<void> {
    const raw = await this.db.get(key);
    const state = raw === undefined ? AWSet.bottom() : AWSetLattice.decode(raw);
    const next = state.add(this.replica, elements);
    await this.db.put(key, Buffer.from(AWSetLattice.encode(next)), { sync: this.sync });
  }
  async fill(key: string, n: number): Promise<void> {
    // Built in memory and written once: filling through add() would cost O(n^2).
    const state = AWSet.bottom().add(this.replica, Array.from({ length: n }, (_, i) => el("f", i)));
    await this.db.put(key, Buffer.from(AWSetLattice.encode(state)), { sync: this.sync });
  }
}

async function timeAdds(add: (e: Buffer) => Promise<void>, n: number, prefix: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await add(el(prefix, i));
    out.push(performance.now() - t);
  }
  return out;
}

/** Timed rounds per size in layoutComparison (SAMPLES adds per size in all), after one untimed warm-up round. */
const LAYOUT_ROUNDS = 5;

async function layoutComparison(sync: SyncPolicy) {
  const rows: Array<{ size: number; decomposedP50: number; decomposedP99: number; baselineP50: number; baselineP99: number; fillElementsPerSec: number }> = [];
  // Every size's store is filled first and then timed in rounds that take the sizes in turn, so
  // whatever drifts during the run (JIT warm-up, the fills' background compactions, other load on
  // the machine) falls on every size alike; one size after the other, the first size was timed on
  // a cold process and the largest while its own fill was still being compacted.
  const filled: Array<{ size: number; store: Store; fillElementsPerSec: number; samples: number[] }> = [];
  for (const size of SIZES) {
    const store = await Store.open({ dir: join(root, `dec-${sync}-${size}`), partitions: 64, partitionOf, sync });
    // The fill doubles as the in-process batch ingest rate (one caller, 1000 per Add, no gRPC).
    const fillStart = performance.now();
    for (let i = 0; i < size; i += 1000) {
      await store.add("s", Array.from({ length: Math.min(1000, size - i) }, (_, j) => el("f", i + j)));
    }
    filled.push({ size, store, fillElementsPerSec: size / ((performance.now() - fillStart) / 1000), samples: [] });
  }
  const perRound = Math.ceil(SAMPLES / LAYOUT_ROUNDS);
  for (let r = -1; r < LAYOUT_ROUNDS; r++) {
    for (const f of filled) {
      const times = await timeAdds((e) => f.store.add("s", [e]).then(() => undefined), perRound, `new${r}-`);
      if (r >= 0) f.samples.push(...times);
    }
  }
  for (const f of filled) await f.store.close();

  for (const { size, samples: dec, fillElementsPerSec } of filled) {
    const db = new ClassicLevel<string, Buffer>(join(root, `obj-${sync}-${size}`), { valueEncoding: "buffer" });
    const base = new ObjectPerSetStore(db, sync === "fsync", "bench");
    await base.fill("s", size);
    const bl = await timeAdds((e) => base.add("s", [e]), BASELINE_SAMPLES(size), "new");
    await db.close();
    rows.push({
      size,
      decomposedP50: percentile(dec, 50),
      decomposedP99: percentile(dec, 99),
      baselineP50: percentile(bl, 50),
      baselineP99: percentile(bl, 99),
      fillElementsPerSec,
    });
    console.log(
      `layout ${sync} ${size}: decomposed p50 ${percentile(dec, 50).toFixed(3)} ms, object-per-set p50 ${percentile(bl, 50).toFixed(3)} ms; ` +
        `in-process fill ${fillElementsPerSec.toFixed(0)} elements/s`,
    );
  }
  return rows;
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

async function grpcBench() {
  const node = await startNodeProcess(["--listen", "127.0.0.51:0", "--data-dir", join(root, "node"), "--log-level", "warn"]);
  const clients = Array.from({ length: 32 }, () => replicaClient(node.address));
  try {
    // Single-element Add throughput, 32 concurrent clients, each on its own key range, after a
    // warm-up (JIT, connections, LevelDB's first files) that does not count.
    await addThroughput(clients, quick ? 0.5 : 1, "warm");
    const seconds = quick ? 2 : 5;
    let ops = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      clients.map(async (c, w) => {
        for (let i = 0; performance.now() < end; i++) {
          await call(c, c.add, { key: `single-${w % 8}`, elements: [el(`w${w}-`, i)], texts: [] });
          ops++;
        }
      }),
    );
    const singleOpsPerSec = ops / seconds;
    console.log(`grpc single-element Add, 32 clients: ${singleOpsPerSec.toFixed(0)} ops/s`);

    // Fill one set with batch adds (1000 per call, 4 callers each keeping one call in flight),
    // measuring latency at each size.
    const latency: Array<{ size: number; p50: number; p99: number }> = [];
    let filled = 0;
    let batchElements = 0;
    let batchMs = 0;
    for (const size of SIZES) {
      const t0 = performance.now();
      const startFilled = filled;
      await batchFill(clients.slice(0, 4), "big", filled, size, (i) => el("f", i));
      filled = size;
      batchElements += filled - startFilled;
      batchMs += performance.now() - t0;
      const c = clients[0]!;
      const lat = await timeAdds((e) => call(c, c.add, { key: "big", elements: [e], texts: [] }).then(() => undefined), SAMPLES, `lat${size}-`);
      latency.push({ size, p50: percentile(lat, 50), p99: percentile(lat, 99) });
      console.log(`grpc Add latency at ${size}: p50 ${percentile(lat, 50).toFixed(3)} ms p99 ${percentile(lat, 99).toFixed(3)} ms`);
    }
    const batchElementsPerSec = batchElements / (batchMs / 1000);
    const rss = rssOf(node.child.pid!);
    console.log(`grpc batch Add: ${batchElementsPerSec.toFixed(0)} elements/s; RSS at ${SIZES.at(-1)} elements: ${(rss / 2 ** 20).toFixed(0)} MiB`);
    return { singleOpsPerSec, batchElementsPerSec, latency, rssBytes: rss };
  } finally {
    for (const c of clients) c.close();
    await node.stop();
  }
}

/** Single-element Adds from 32 clients for `seconds`; returns ops/s. */
async function addThroughput(clients: ReturnType<typeof replicaClient>[], seconds: number, tag: string): Promise<number> {
  let ops = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    clients.map(async (c, w) => {
      for (let i = 0; performance.now() < end; i++) {
        await call(c, c.add, { key: `${tag}-${w % 8}`, elements: [el(`w${w}-`, i)], texts: [] });
        ops++;
      }
    }),
  );
  return ops / seconds;
}

async function telemetryOverhead() {
  const variants = [
    { name: "off", host: "127.0.0.52", args: [] as string[] },
    { name: "metrics", host: "127.0.0.53", args: ["--metrics-listen", "127.0.0.53:0"] },
    { name: "metrics+tracing", host: "127.0.0.54", args: ["--metrics-listen", "127.0.0.54:0", "--tracing", "none"] },
  ];
  const nodes = await Promise.all(
    variants.map((v) => startNodeProcess(["--listen", `${v.host}:0`, "--data-dir", join(root, `tel-${v.host}`), "--log-level", "info", ...v.args])),
  );
  const clients = nodes.map((n) => Array.from({ length: 32 }, () => replicaClient(n.address)));
  try {
    const seconds = quick ? 2 : 4;
    const rounds = quick ? 1 : 3;
    const runs = variants.map(() => [] as number[]);
    const cpu = variants.map(() => ({ seconds: 0, ops: 0 }));
    // Warm up each node (JIT, connections, first LevelDB files) before anything counts.
    for (let i = 0; i < variants.length; i++) await addThroughput(clients[i]!, quick ? 0.5 : 1, "warm");
    // Alternate, so that drift of the machine (other load, disk) hits every variant alike.
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < variants.length; i++) {
        const before = cpuSecondsOf(nodes[i]!.child.pid!);
        const opsPerSec = await addThroughput(clients[i]!, seconds, `tel${r}`);
        runs[i]!.push(opsPerSec);
        cpu[i]!.seconds += cpuSecondsOf(nodes[i]!.child.pid!) - before;
        cpu[i]!.ops += opsPerSec * seconds;
      }
      console.log(`telemetry round ${r + 1}: ${variants.map((v, i) => `${v.name} ${runs[i]!.at(-1)!.toFixed(0)} ops/s`).join(", ")}`);
    }
    // Evidence that telemetry was really on: the node counted the calls it served, with gRPC spans.
    const full = nodes[2]!;
    const endpoint = /"endpoint":"(http:[^"]+)"/.exec(full.logs())?.[1];
    const scraped = endpoint === undefined ? "" : await (await fetch(endpoint)).text();
    const countedAdds = Number(/^deltaset_rpc_calls_total\{method="Add",status="OK"\} (\d+)/m.exec(scraped)?.[1] ?? 0);
    const grpcSpans = /"msg":"tracing on".*"grpcSpans":true/.test(full.logs());
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const ops = runs.map(mean);
    const cpuMicrosPerOp = cpu.map((c) => (c.seconds / c.ops) * 1e6);
    const overhead = 1 - ops[2]! / ops[0]!;
    const metricsOverhead = 1 - ops[1]! / ops[0]!;
    console.log(
      `telemetry overhead on single-element Add: metrics ${(metricsOverhead * 100).toFixed(1)}%, metrics+tracing ${(overhead * 100).toFixed(1)}% ` +
        `(${variants.map((v, i) => `${v.name} ${ops[i]!.toFixed(0)} ops/s, ${cpuMicrosPerOp[i]!.toFixed(0)} µs CPU/op`).join("; ")}; ${countedAdds} Adds counted, gRPC spans ${grpcSpans})`,
    );
    return {
      secondsPerRun: seconds,
      rounds,
      variants: variants.map((v, i) => ({ name: v.name, flags: v.args.join(" "), runs: runs[i], opsPerSec: ops[i], cpuMicrosPerOp: cpuMicrosPerOp[i] })),
      offOpsPerSec: ops[0]!,
      metricsOpsPerSec: ops[1]!,
      onOpsPerSec: ops[2]!,
      metricsOverhead,
      overhead,
      countedAdds,
      grpcSpans,
    };
  } finally {
    for (const c of clients.flat()) c.close();
    await Promise.all(nodes.map((n) => n.stop()));
  }
}

const fsyncRows = await layoutComparison("fsync");
const bufferedRows = await layoutComparison("buffered");
const grpc = await grpcBench();
const telemetry = await telemetryOverhead();
const ceilings = await clientApiCeilings(quick, root);
// --large: one set to 10M elements (minutes); without it the file keeps no large-set figures.
const largeSet = process.argv.includes("--large") ? await largeSetBench(root, rssOf, quick ? 200_000 : 10_000_000) : undefined;
rmSync(root, { recursive: true, force: true });

const small = SIZES[0]!;
const large = SIZES.at(-1)!;
const ratio = (rows: typeof fsyncRows) => rows.at(-1)!.decomposedP50 / rows[0]!.decomposedP50;
const targets = [
  target(`Add p50 at ${large} within 1.5x of p50 at ${small} (decomposed store, fsync)`, "<= 1.5x", ratio(fsyncRows), (m) => m <= 1.5, CMD),
  target(`Add p50 at ${large} within 1.5x of p50 at ${small} (decomposed store, buffered)`, "<= 1.5x", ratio(bufferedRows), (m) => m <= 1.5, CMD),
  target(`Add p50 at ${large} within 1.5x of p50 at ${small} over gRPC (real node, fsync)`, "<= 1.5x", grpc.latency.at(-1)!.p50 / grpc.latency[0]!.p50, (m) => m <= 1.5, CMD),
  target("batch ingest, 1000 elements per Add, over gRPC (fsync)", ">= 250000 elements/s", grpc.batchElementsPerSec, (m) => m >= 250_000, CMD),
  target("single-element unary Add (32 in flight, fsync) relative to a no-op server of the same RPC, same run", ">= 0.75x", ceilings.unaryVsNoop, (m) => m >= 0.75, CMD),
  target(
    "AddStream acknowledged elements/s (fsync), one element per message, relative to a no-op bidirectional stream of the same shape, same run (10 and 100 per message: metrics.ceilings.streams)",
    ">= 0.5x",
    ceilings.streamVsNoop,
    (m) => m >= 0.5,
    CMD,
  ),
  target(
    "telemetry overhead: single-element Add throughput lost with metrics and tracing of every call on (1 - on/off)",
    "<= 20%",
    telemetry.countedAdds > 0 && telemetry.grpcSpans ? telemetry.overhead : null,
    (m) => m !== null && m <= 0.2,
    CMD,
  ),
  ...(largeSet === undefined
    ? []
    : [target(`Add p50 at ${largeSet.latency.at(-1)!.size} elements within 1.2x of p50 at 1000 (one set, real node, fsync)`, "<= 1.2x", largeSet.p50Ratio, (m) => m <= 1.2, `${CMD}${quick ? " --large" : " -- --large"}`)]),
];
// A run without --large keeps the last 10M measurement on record, marked with the run it came from.
const earlierLarge = largeSet === undefined ? carriedLargeSet() : undefined;
if (earlierLarge !== undefined) targets.push({ ...earlierLarge.target, name: `${earlierLarge.target.name} [earlier --large run of ${earlierLarge.runAt}, not re-run]` });
const resultsPath = writeResults("replica", {
  params: { quick, large: largeSet !== undefined, sizes: SIZES, samples: SAMPLES, clients: 32, batch: 1000, syncDefault: "fsync", telemetryOn: "--metrics-listen --tracing none" },
  metrics: {
    layout: { fsync: fsyncRows, buffered: bufferedRows },
    grpc: { ...grpc, rssMiB: grpc.rssBytes / 2 ** 20 },
    telemetry,
    ceilings,
    largeSet: largeSet ?? (earlierLarge === undefined ? undefined : { ...earlierLarge.metrics, carriedFromRunAt: earlierLarge.runAt }),
    baselineSlowdownAtLargest: { fsync: fsyncRows.at(-1)!.baselineP50 / fsyncRows.at(-1)!.decomposedP50, buffered: bufferedRows.at(-1)!.baselineP50 / bufferedRows.at(-1)!.decomposedP50 },
  },
  targets,
});
await drawChart(resultsPath);
printTargets(targets);

/** The 10M-element measurement of the last --large run in docs/results/replica.json, if any. */
function carriedLargeSet(): { metrics: object; target: (typeof targets)[number]; runAt: string } | undefined {
  try {
    const prev = JSON.parse(readFileSync(join(import.meta.dirname, "../../docs/results/replica.json"), "utf8")) as {
      generatedAt: string;
      metrics?: { largeSet?: { carriedFromRunAt?: string } };
      targets?: Array<(typeof targets)[number]>;
    };
    const metrics = prev.metrics?.largeSet;
    const t = prev.targets?.find((x) => x.name.startsWith("Add p50 at 10000000"));
    if (metrics === undefined || t === undefined) return undefined;
    const runAt = metrics.carriedFromRunAt ?? prev.generatedAt;
    return { metrics, target: { ...t, name: t.name.replace(/ \[earlier --large run.*$/, "") }, runAt };
  } catch {
    return undefined;
  }
}
