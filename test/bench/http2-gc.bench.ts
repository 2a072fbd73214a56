// bench:http2-gc: how much of each young-generation collection (scavenge) a server promotes to V8's
// old generation under unary calls (4 connections, 32 calls in flight), read from V8's
// --trace-gc-nvp lines. Seven servers, each its own process on loopback: a plain node:http2 server
// answering after 5 ms (no gRPC library, no deltaset code), the same with a full collection forced
// every second (force-gc.ts), the no-op gRPC server of bench:replica, the same with forced full
// collections, once with its sessions' streams in KeyTables (as a node's) and once in node:http2's
// own Map, a deltaset node (fsync), and one of 3 nodes with replication factor 1, which forwards
// the Adds of keys the other two own (its calls to them are gRPC clients in the node: their
// connections' tables, grpc-client-tables.ts, and node:http2's bind of each request,
// async-resource-bind.ts). A scavenge costs about what it copies, and what a server
// promotes it has copied at least twice: this measures the node's garbage-collection share of a
// unary Add against servers that do no work, and what node:http2's stream Map costs a server that
// collects fully (http2-stream-table.ts, docs/results/replica-history.md).
// usage: npm run bench:http2-gc [-- --quick]
import { type ChildProcess, spawn } from "node:child_process";
import { connect } from "node:http2";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { aliveIds } from "../helpers/members.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { drawChart } from "./charts/draw.ts";
import { commandLine, isQuick, writeResults } from "./lib/results.ts";
import { percentile } from "./lib/timing.ts";
import { unaryRate } from "./lib/unary-load.ts";

const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const REGISTER = here("../../bin/register-ts.mjs");
const BIN = here("../../bin/deltaset.mjs");
const quick = isQuick();
const SECONDS = quick ? 2 : 4;
/** As unaryRate keeps in flight (also the plain server's load). */
const IN_FLIGHT = 32;
const CONNECTIONS = 4;

interface Server {
  address: string;
  /** --trace-gc-nvp lines printed since the last take(). */
  take(): string[];
  stop(): Promise<void>;
}

/** Start a server process that prints "listening HOST:PORT" (or a node's JSON line with its address). */
async function startServer(args: string[]): Promise<Server> {
  const child: ChildProcess = spawn(process.execPath, ["--trace-gc-nvp", ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let lines: string[] = [];
  const address = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (l) => {
      if (l.includes("gc=")) lines.push(l);
      const m = /^listening (\S+)$/.exec(l) ?? /"event":"listening".*"address":"([^"]+)"/.exec(l);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`server exited (${code}) before listening: ${args.join(" ")}`)));
  });
  if (!/^127\.\d+\.\d+\.\d+:\d+$/.test(address)) throw new Error(`not a loopback address: ${address}`);
  return {
    address,
    take: () => {
      const out = lines;
      lines = [];
      return out;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** IN_FLIGHT POSTs at a time over CONNECTIONS sessions for `seconds`; returns calls answered. */
async function http2Load(address: string, seconds: number): Promise<number> {
  const sessions = Array.from({ length: CONNECTIONS }, () => connect(`http://${address}`));
  const end = performance.now() + seconds * 1000;
  let done = 0;
  try {
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async (_, w) => {
        while (performance.now() < end) {
          await new Promise<void>((resolve, reject) => {
            const s = sessions[w % CONNECTIONS]!.request({ ":method": "POST", ":path": "/deltaset.v1.Replica/Add", "content-type": "application/grpc" });
            s.on("data", () => {});
            s.on("end", resolve);
            s.on("error", reject);
            s.end(Buffer.alloc(30));
          });
          done++;
        }
      }),
    );
  } finally {
    for (const s of sessions) s.close();
  }
  return done;
}

/** bench:replica's unary load (IN_FLIGHT Adds) over CONNECTIONS channels for `seconds`; returns calls answered. */
async function grpcLoad(address: string, seconds: number, tag: string): Promise<number> {
  const channels = Array.from({ length: CONNECTIONS }, () => replicaClient(address));
  const started = performance.now();
  try {
    return (await unaryRate(channels, seconds, tag)) * ((performance.now() - started) / 1000);
  } finally {
    for (const c of channels) c.close();
  }
}

const median = (xs: number[]) => (xs.length === 0 ? 0 : percentile([...xs].sort((a, b) => a - b), 0.5));

/** Scavenges of the measured window: how many, median promoted bytes and pause, total pause. */
function scavenges(lines: string[]) {
  const rows = lines
    .filter((l) => / gc=s /.test(l))
    .map((l) => ({ pauseMs: Number(/ pause=([\d.]+)/.exec(l)?.[1] ?? NaN), promoted: Number(/ promoted=(\d+)/.exec(l)?.[1] ?? NaN) }))
    .filter((r) => Number.isFinite(r.pauseMs) && Number.isFinite(r.promoted));
  const full = lines.filter((l) => / gc=mc /.test(l)).length;
  return {
    count: rows.length,
    fullCollections: full,
    promotedKiBMedian: median(rows.map((r) => r.promoted)) / 1024,
    pauseMsMedian: median(rows.map((r) => r.pauseMs)),
    pauseMsTotal: rows.reduce((a, r) => a + r.pauseMs, 0),
  };
}

const root = mkdtempSync(join(tmpdir(), "deltaset-http2-gc-"));
/** The forwarding variant's nodes: the first is measured, the other two own most keys. */
const FORWARDING = ["127.0.31.7:7317", "127.0.31.8:7318", "127.0.31.9:7319"];
const FORWARDING_FLAGS = ["--replication-factor", "1", "--partitions", "16", "--gossip-interval-ms", "100", "--log-level", "warn"];

/** The forwarding variant's cluster: its peers are started from it; the first node is measured. */
const forwarding = new TestCluster(root, FORWARDING, FORWARDING_FLAGS, "fw");

/** Of the unary load's keys (the `tag`-0..7 of unary-load.ts), how many the node at address forwards. */
async function forwardedKeys(address: string, tag: string): Promise<number> {
  const c = replicaClient(address);
  try {
    let n = 0;
    for (let k = 0; k < 8; k++) if (!(await call(c, c.owners, { key: `${tag}-${k}` })).local) n++;
    return n;
  } finally {
    c.close();
  }
}
/** After the TypeScript loader: force-gc.ts goes through it. */
const FORCE_GC = ["--expose-gc", "--import", REGISTER, "--import", here("./force-gc.ts")];
const variants = [
  { name: "plain node:http2 server", args: ["--import", REGISTER, here("./http2-plain-server.ts"), "127.0.31.1"], load: "http2" },
  { name: "plain node:http2 server, full collection every second", args: [...FORCE_GC, here("./http2-plain-server.ts"), "127.0.31.2"], load: "http2" },
  { name: "no-op gRPC server", args: ["--import", REGISTER, here("./noop-server.ts"), "127.0.31.3"], load: "grpc" },
  { name: "no-op gRPC server, full collection every second", args: [...FORCE_GC, here("./noop-server.ts"), "127.0.31.4"], load: "grpc" },
  { name: "no-op gRPC server, full collection every second, node:http2's stream Map", args: [...FORCE_GC, here("./noop-server.ts"), "127.0.31.6", "map-streams"], load: "grpc" },
  { name: "deltaset node (fsync)", args: [BIN, "node", "--listen", "127.0.31.5:0", "--data-dir", join(root, "node"), "--log-level", "warn"], load: "grpc" },
  {
    name: "deltaset node forwarding to 2 peers (3 nodes, replication factor 1)",
    args: [BIN, "node", "--listen", FORWARDING[0], "--node-id", "fw0", "--data-dir", forwarding.dataDir(0), "--seeds", FORWARDING.slice(1).join(","), ...FORWARDING_FLAGS],
    load: "grpc",
    peers: true,
  },
] as const;

const rows = [];
try {
  for (const v of variants) {
    const peers = "peers" in v;
    if (peers) await Promise.all([1, 2].map((i) => forwarding.start(i)));
    const server = await startServer([...v.args]);
    try {
      const run = (s: number, tag: string) => (v.load === "http2" ? http2Load(server.address, s) : grpcLoad(server.address, s, tag));
      if (peers) await eventually(`${server.address} sees 3 members alive`, () => aliveIds(server.address), (ids) => ids.length >= 3, 30_000);
      await run(1, "warm");
      const forwarded = peers ? await forwardedKeys(server.address, "m") : undefined;
      server.take();
      const started = performance.now();
      const calls = await run(SECONDS, "m");
      const seconds = (performance.now() - started) / 1000;
      const gc = scavenges(server.take());
      const row = { name: v.name, callsPerSec: calls / seconds, ...gc, scavengeMicrosPerCall: (gc.pauseMsTotal * 1000) / calls, ...(forwarded === undefined ? {} : { keysForwarded: forwarded, keys: 8 }) };
      rows.push(row);
      console.log(
        `${v.name}: ${row.callsPerSec.toFixed(0)} calls/s; ${gc.count} scavenges, median ${gc.promotedKiBMedian.toFixed(0)} KiB promoted and ${gc.pauseMsMedian.toFixed(2)} ms each; ` +
          `${row.scavengeMicrosPerCall.toFixed(1)} µs of scavenging per call; ${gc.fullCollections} full collections` +
          (forwarded === undefined ? "" : `; ${forwarded} of the 8 keys forwarded`),
      );
    } finally {
      await server.stop();
      if (peers) await forwarding.close();
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}

const path = writeResults("http2-gc", {
  params: { quick, seconds: SECONDS, inFlight: IN_FLIGHT, connections: CONNECTIONS, plainServerDelayMs: 5, command: commandLine("bench:http2-gc", quick) },
  metrics: { variants: rows },
  targets: [],
});
await drawChart(path);
