// A Scan or Export whose reader takes no chunk for --stream-stall-ms gives up instead of holding
// its store read (a LevelDB snapshot) for as long as the client stays connected: on a real node
// process, a client reaches the node through a TCP relay that stops reading from the node (what a
// stopped client process or a stuck network looks like to it) and opens both streams over a 25 MB
// set; the node ends them (counted as RESOURCE_EXHAUSTED in its metrics), and the client, once
// the relay reads again, gets the chunks sent before and then the status naming the setting and
// how to resume. A reader that keeps taking chunks, here at 2 MB/s, far slower than the node can
// send, is never cut. The node keeps serving. (A grpc-js client buffers whatever arrives, paused or
// not: the relay stands in for a reader that truly stops or crawls.)
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, type Socket, connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call, replicaClient } from "../../services/client/rpc.ts";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-stream-stall-"));
const STALL_MS = 400;
const KEY = "big";
const N = 250_000;
let node: NodeProcess;
let client: ReplicaClient;
/** A client reaching the node through the relay. */
let relayed: ReplicaClient;
/** The relay's sockets toward the node, and how fast it reads from them: 0 stops it, Infinity lets it run. */
const upstreams = new Set<Socket>();
let bytesPerSecond = Infinity;
const TICK_MS = 50;
/** Bytes each socket may still read in this tick. */
const budget = new Map<Socket, number>();
const relay = createServer((down) => {
  const [host, port] = node.address.split(":");
  const up = connect({ host, port: Number(port) });
  upstreams.add(up);
  budget.set(up, 0);
  down.pipe(up);
  up.on("data", (d) => {
    const left = budget.get(up)! - d.length;
    budget.set(up, left);
    if (!down.write(d) || (bytesPerSecond !== Infinity && left <= 0)) up.pause();
  });
  down.on("drain", () => pace(up));
  const close = () => (down.destroy(), up.destroy(), upstreams.delete(up), budget.delete(up));
  down.on("error", close).on("close", close);
  up.on("error", close).on("close", close);
});
/** Let a socket read on when its pace allows. */
function pace(up: Socket): void {
  if (bytesPerSecond === Infinity || budget.get(up)! > 0) up.resume();
}
const ticker = setInterval(() => {
  for (const up of upstreams) {
    budget.set(up, bytesPerSecond === Infinity ? 0 : (bytesPerSecond * TICK_MS) / 1000);
    if (bytesPerSecond === 0) up.pause();
    else pace(up);
  }
}, TICK_MS);

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.0.189:0", "--node-id", "s1", "--data-dir", join(dir, "s1"), "--metrics-listen", "127.0.0.189:0", "--stream-stall-ms", String(STALL_MS)]);
  client = replicaClient(node.address);
  const pad = "x".repeat(90);
  for (let i = 0; i < N; i += 5000) {
    const elements = Array.from({ length: 5000 }, (_, j) => Buffer.from(`${String(i + j).padStart(7, "0")}${pad}`));
    await call(client, client.add, { key: KEY, elements, texts: [] }, { timeoutMs: 30_000 });
  }
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.190", resolve));
  relayed = replicaClient(`127.0.0.190:${(relay.address() as AddressInfo).port}`);
  // Connected now, so the relay's socket exists before a test stops it.
  await call(relayed, relayed.query, { key: KEY, elements: [], texts: [], pageSize: 1, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 5000 });
});
after(async () => {
  client?.close();
  relayed?.close();
  clearInterval(ticker);
  relay.close();
  for (const u of upstreams) u.destroy();
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function scrape(): Promise<string> {
  const endpoint = /"endpoint":"(http:[^"]+)"/.exec(node.logs())?.[1];
  assert.ok(endpoint, "the node logs no metrics endpoint");
  return (await fetch(endpoint)).text();
}

/** Calls of a method that ended RESOURCE_EXHAUSTED, by the node's metrics. */
async function exhausted(method: string): Promise<number> {
  const line = (await scrape()).split("\n").find((l) => l.startsWith(`deltaset_rpc_calls_total{method="${method}",status="RESOURCE_EXHAUSTED"}`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

/**
 * Read a stream through the relay while it reads nothing from the node until `stalled` holds, then
 * let it read on: the chunks that arrive and the final status.
 */
async function readStalled(stream: grpc.ClientReadableStream<unknown>, stalled: () => Promise<unknown>): Promise<{ chunks: number; status: grpc.StatusObject }> {
  bytesPerSecond = 0;
  for (const u of upstreams) u.pause();
  let chunks = 0;
  stream.on("data", () => chunks++);
  const status = new Promise<grpc.StatusObject>((resolve) => stream.on("status", resolve));
  stream.on("error", () => {});
  try {
    await stalled();
  } finally {
    bytesPerSecond = Infinity;
    for (const u of upstreams) u.resume();
  }
  const st = await status; // grpc-js gives the status after the messages before it
  return { chunks, status: st };
}

describe("a stream whose reader stops", () => {
  it("Scan ends after the stall limit, after the chunks it sent, with a status saying how to resume", async () => {
    const before = await exhausted("Scan");
    const s = relayed.scan({ key: KEY, startAfter: Buffer.alloc(0), chunkSize: 500, withText: false }, new grpc.Metadata(), { deadline: Date.now() + 60_000 });
    const r = await readStalled(s, () => eventually("the node ends the Scan", () => exhausted("Scan"), (n) => n > before));
    assert.equal(r.status.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(r.status.details, /--stream-stall-ms.*start_after/);
    assert.ok(r.chunks > 0 && r.chunks < N / 500, `${r.chunks} chunks arrived: some, not all`);
  });

  it("Export ends likewise", async () => {
    const before = await exhausted("Export");
    const s = relayed.export({ key: KEY, maxEntries: 500, maxBytes: 0 }, new grpc.Metadata(), { deadline: Date.now() + 60_000 });
    const r = await readStalled(s, () => eventually("the node ends the Export", () => exhausted("Export"), (n) => n > before));
    assert.equal(r.status.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(r.status.details, /--stream-stall-ms.*export again/);
    assert.ok(r.chunks > 0 && r.chunks < N / 500, `${r.chunks} chunks arrived: some, not all`);
  });

  it("a slow reader that keeps taking chunks reads the whole set, and the node keeps serving", async () => {
    // 2 MB/s: a 200 kB chunk taken every 0.1 s, while emptying gRPC's buffer of 16 chunks takes
    // 1.6 s, four times the stall limit: only a stall counted from the last chunk taken lets it through.
    bytesPerSecond = 2_000_000;
    let members = 0;
    const started = performance.now();
    try {
      const s = relayed.scan({ key: KEY, startAfter: Buffer.alloc(0), chunkSize: 2000, withText: false }, new grpc.Metadata(), { deadline: Date.now() + 120_000 });
      for await (const chunk of s as AsyncIterable<{ members: unknown[] }>) members += chunk.members.length;
    } finally {
      bytesPerSecond = Infinity;
    }
    assert.equal(members, N);
    const seconds = (performance.now() - started) / 1000;
    assert.ok(seconds > 4, `the relay let ${N} members through in ${seconds.toFixed(1)} s: it did not slow the reader`);
    const q = await call(client, client.query, { key: KEY, elements: [], texts: [], pageSize: 1, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 5000 });
    assert.equal(q.members.length, 1);
  });
});
