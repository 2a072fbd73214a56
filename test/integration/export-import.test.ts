// Export and Import between two separate clusters of real node processes: cluster A (one node)
// and cluster B (two nodes), each on its own loopback addresses, LevelDB on disk. A 20k-element
// set moves in small chunks and both nodes of B read it; a second import changes nothing; an
// export since the first one's context carries only the new elements and the removes made since;
// a key of another type, a malformed or out-of-order chunk are refused and change nothing; a
// counter travels whole; Query with_dots gives the dots a Remove can name; the CLI pipe
// `deltaset export | deltaset import` moves a set (and a delta, with since files); a read token
// may Export but not Import.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSetState, ObjectType } from "../../services/gen/deltaset/v1/types.ts";
import type { CausalContext } from "../../services/gen/deltaset/v1/types.ts";
import type { ExportChunk, ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call } from "../../services/client/rpc.ts";
import { bearerMetadata } from "../../services/node/auth.ts";
import { BIN, REPO, type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { expectRefused, statusOf } from "../helpers/grpc-status.ts";
import { exportOf, importTo, withClient } from "../helpers/export-import.ts";

const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--log-level", "warn"];
const dir = mkdtempSync(join(tmpdir(), "deltaset-export-"));
const clusterB = new TestCluster(dir, ["127.0.4.3:17403", "127.0.4.4:17404"], FAST, "b");
let a: NodeProcess;

const N = 20_000;
const name = (i: number) => `e${String(i).padStart(6, "0")}`;

async function read(addr: string, key: string): Promise<string[]> {
  return withClient(addr, async (c) => {
    const out: string[] = [];
    for await (const ch of c.scan({ key, chunkSize: 5000, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<ScanChunk>) out.push(...ch.members.map((m) => m.element.toString()));
    return out;
  });
}

const entriesOf = (c: ExportChunk) => AWSetState.decode(c.slice!.payload).entries.map((e) => Buffer.from(e.element).toString());

async function addMany(addr: string, key: string, elements: string[]): Promise<void> {
  await withClient(addr, async (c) => {
    for (let i = 0; i < elements.length; i += 10_000) {
      await call(c, c.add, { key, elements: elements.slice(i, i + 10_000).map((e) => Buffer.from(e)), texts: [] }, { timeoutMs: 60_000 });
    }
  });
}

before(async () => {
  [a] = await Promise.all([startNodeProcess(["--listen", "127.0.4.1:0", "--node-id", "a0", "--data-dir", join(dir, "a0"), ...FAST]), clusterB.startAll()]);
});

after(async () => {
  await Promise.all([a?.kill(), clusterB.close()]);
  rmSync(dir, { recursive: true, force: true });
});

describe("export and import between clusters", () => {
  let firstExport: ExportChunk[] = [];

  it("moves a 20k-element set in chunks of the asked size; both nodes of B read what A reads", async () => {
    await addMany(a.address, "s", Array.from({ length: N }, (_, i) => name(i)));
    firstExport = await exportOf(a.address, "s", { maxEntries: 500 });
    assert.equal(firstExport.length, N / 500);
    for (const [i, c] of firstExport.entries()) {
      assert.ok(entriesOf(c).length <= 500, `chunk ${i} holds ${entriesOf(c).length} entries`);
      assert.equal(c.last, i === firstExport.length - 1);
      assert.equal(c.context !== undefined, i === 0, "the context travels on the first chunk only");
    }
    assert.equal(firstExport[0]!.delta, false);
    assert.equal(firstExport.flatMap(entriesOf).length, N);
    const r = await importTo(clusterB.addresses[0]!, "s", firstExport);
    assert.deepEqual({ changed: r.changed, chunks: r.chunks, size: r.size }, { changed: true, chunks: BigInt(firstExport.length), size: BigInt(N) });
    const want = await read(a.address, "s");
    assert.equal(want.length, N);
    await clusterB.converged("s", [0, 1], want, 30_000);
  });

  it("importing the same export again changes nothing", async () => {
    const r = await importTo(clusterB.addresses[1]!, "s", firstExport);
    assert.equal(r.changed, false);
    assert.equal(r.size, BigInt(N));
    assert.equal((await read(clusterB.addresses[0]!, "s")).length, N);
  });

  it("an export since the first one's context carries only the new elements, and the removes made on A since travel with it", async () => {
    const fresh = Array.from({ length: 25 }, (_, i) => `new${i}`);
    const removed = Array.from({ length: 40 }, (_, i) => name(i * 100));
    await addMany(a.address, "s", fresh);
    await withClient(a.address, (c) => call(c, c.remove, { key: "s", elements: removed.map((e) => Buffer.from(e)), texts: [] }));
    // B writes to its own copy meanwhile: the delta must not remove it.
    await clusterB.add(1, "s", ["b-only"]);
    const delta = await exportOf(a.address, "s", { maxEntries: 10, since: firstExport[0]!.nextSince });
    assert.equal(delta[0]!.delta, true);
    assert.deepEqual(delta.flatMap(entriesOf).sort(), [...fresh].sort());
    assert.ok(delta.at(-1)!.removed !== undefined, "the last chunk carries the removes");
    const r = await importTo(clusterB.addresses[0]!, "s", delta);
    assert.equal(r.changed, true);
    const want = [...(await read(a.address, "s")), "b-only"].sort();
    assert.equal(want.length, N + 25 - 40 + 1);
    await clusterB.converged("s", [0, 1], want, 30_000);
  });

  it("refuses a key of another type with FAILED_PRECONDITION, changing nothing", async () => {
    await clusterB.replica(0, (c) => call(c, c.increment, { key: "cnt", amount: 7n, requestId: "" }));
    await expectRefused(importTo(clusterB.addresses[0]!, "cnt", firstExport.slice(0, 3)), grpc.status.FAILED_PRECONDITION, /COUNTER/);
    const q = await clusterB.replica(0, (c) => call(c, c.query, { key: "cnt", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));
    assert.equal(q.counterValue, 7n);
  });

  it("refuses a malformed or out-of-order chunk with INVALID_ARGUMENT; nothing of that chunk is applied", async () => {
    await addMany(a.address, "m", Array.from({ length: 300 }, (_, i) => `m${String(i).padStart(3, "0")}`));
    const chunks = await exportOf(a.address, "m", { maxEntries: 100 });
    assert.equal(chunks.length, 3);
    const garbled = { ...chunks[0]!, slice: { type: chunks[0]!.slice!.type, payload: Buffer.from("not a state") } };
    await expectRefused(importTo(clusterB.addresses[0]!, "m", [garbled, ...chunks.slice(1)]), grpc.status.INVALID_ARGUMENT, /chunk 0 is malformed/);
    assert.deepEqual(await read(clusterB.addresses[0]!, "m"), [], "a refused first chunk created the key");
    // Chunk 2 before chunk 1: chunk 0 is applied (each chunk is safe alone), chunk 2 is not.
    await expectRefused(importTo(clusterB.addresses[0]!, "m", [chunks[0]!, chunks[2]!, chunks[1]!]), grpc.status.INVALID_ARGUMENT, /chunk 1 is out of order/);
    assert.deepEqual(await read(clusterB.addresses[0]!, "m"), entriesOf(chunks[0]!));
    await expectRefused(importTo(clusterB.addresses[0]!, "m", chunks.slice(0, 2)), grpc.status.INVALID_ARGUMENT, /ended before its last chunk/);
    await importTo(clusterB.addresses[0]!, "m", chunks);
    assert.deepEqual(await read(clusterB.addresses[0]!, "m"), await read(a.address, "m"));
  });

  it("answers NOT_FOUND for a key A does not hold, and INVALID_ARGUMENT for an empty Import", async () => {
    await expectRefused(exportOf(a.address, "nothing-here"), grpc.status.NOT_FOUND, /does not exist/);
    await expectRefused(importTo(clusterB.addresses[0]!, "x", []), grpc.status.INVALID_ARGUMENT, /no chunk/);
  });

  it("moves a counter whole, in one chunk", async () => {
    await withClient(a.address, (c) => call(c, c.increment, { key: "hits", amount: 41n, requestId: "" }));
    const chunks = await exportOf(a.address, "hits");
    assert.equal(chunks.length, 1);
    await importTo(clusterB.addresses[0]!, "hits", chunks);
    const q = await clusterB.replica(1, async (c) => {
      for (let i = 0; i < 100; i++) {
        const r = await call(c, c.query, { key: "hits", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
        if (r.counterValue === 41n) return r;
        await new Promise((res) => setTimeout(res, 100));
      }
      throw new Error("the imported counter did not reach B's other node");
    });
    assert.equal(q.counterValue, 41n);
  });

  it("moves an AWSET_PROB set whole, in one chunk", async () => {
    await withClient(a.address, (c) => call(c, c.add, { key: "prob", elements: [], texts: ["p1", "p2", "p3"], type: ObjectType.AWSET_PROB }));
    const chunks = await exportOf(a.address, "prob", { since: firstExport[0]!.nextSince });
    assert.equal(chunks.length, 1);
    assert.equal(chunks[0]!.delta, false, "a whole-state type travels whole even with since");
    const r = await importTo(clusterB.addresses[0]!, "prob", chunks);
    assert.equal(r.changed, true);
    assert.deepEqual(await read(clusterB.addresses[0]!, "prob"), ["p1", "p2", "p3"]);
  });

  it("Query with_dots gives each element's dots; a Remove with exactly those dots removes it", async () => {
    const added = await withClient(a.address, (c) => call(c, c.add, { key: "d", elements: [Buffer.from("x"), Buffer.from("y")], texts: [] }));
    const page = await withClient(a.address, (c) => call(c, c.query, { key: "d", elements: [], texts: [], pageSize: 10, pageToken: Buffer.alloc(0), withText: false, withDots: true }));
    assert.deepEqual(page.members.map((m) => m.dots), added.counters.map((counter) => [{ replica: added.replica, counter, ttlMs: 0n }]));
    const plain = await withClient(a.address, (c) => call(c, c.query, { key: "d", elements: [], texts: [], pageSize: 10, pageToken: Buffer.alloc(0), withText: false }));
    assert.deepEqual(plain.members.map((m) => m.dots), [[], []]);
    const one = await withClient(a.address, (c) => call(c, c.query, { key: "d", elements: [Buffer.from("x"), Buffer.from("zz")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false, withDots: true }));
    assert.deepEqual(one.presence.map((p) => [p.present, p.dots.length]), [[true, 1], [false, 0]]);
    const d = one.presence[0]!.dots[0]!;
    const context = { vv: [], cloud: [{ replica: d.replica, ranges: [{ first: d.counter, last: d.counter }] }] };
    const r = await withClient(a.address, (c) => call(c, c.remove, { key: "d", elements: [Buffer.from("x")], texts: [], context }));
    assert.equal(r.removed, 1);
    assert.deepEqual(await read(a.address, "d"), ["y"]);
  });
});

/** Run `deltaset export ARGS | deltaset import ARGS` as two processes joined by a pipe. */
async function pipe(exportArgs: string[], importArgs: string[]): Promise<{ codes: Array<number | null>; stderr: string; stdout: string }> {
  const ex = spawn(process.execPath, [BIN, "export", ...exportArgs], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  const im = spawn(process.execPath, [BIN, "import", ...importArgs], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
  ex.stdout.pipe(im.stdin);
  let stderr = "";
  let stdout = "";
  ex.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  im.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  im.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const [[c1], [c2]] = await Promise.all([once(ex, "exit"), once(im, "exit")]);
  return { codes: [c1 as number | null, c2 as number | null], stderr, stdout };
}

describe("the CLI pipe", () => {
  it("`deltaset export | deltaset import` moves a set, then only what changed with since files", async () => {
    const b = clusterB.addresses[0]!;
    await addMany(a.address, "p", Array.from({ length: 3000 }, (_, i) => `p${i}`));
    const next = join(dir, "p.since.new");
    const since = join(dir, "p.since");
    // No since file yet: the whole state.
    const first = await pipe(["p", "--addr", a.address, "--chunk", "250", "--since-file", since, "--next-since-file", next], ["p2", "--addr", b, "--json"]);
    assert.deepEqual(first.codes, [0, 0], first.stderr);
    assert.match(first.stderr, /does not exist: exporting the whole state/);
    assert.deepEqual(JSON.parse(first.stdout), { key: "p2", changed: true, chunks: "12", size: "3000" });
    assert.deepEqual(await read(b, "p2"), await read(a.address, "p"));
    renameSync(next, since);

    await addMany(a.address, "p", ["late1", "late2"]);
    await withClient(a.address, (c) => call(c, c.remove, { key: "p", elements: [Buffer.from("p7")], texts: [] }));
    const second = await pipe(["p", "--addr", a.address, "--since-file", since], ["p2", "--addr", b, "--json"]);
    assert.deepEqual(second.codes, [0, 0], second.stderr);
    assert.match(second.stderr, /delta since the given context/);
    assert.equal(JSON.parse(second.stdout).size, "3001");
    assert.deepEqual(await read(b, "p2"), await read(a.address, "p"));
  });

  it("`deltaset export` whose reader goes away stops with one line and exit 1", async () => {
    // The 20k-element set of the first test, in 500-element chunks: the reader leaves after the first bytes.
    const ex = spawn(process.execPath, [BIN, "export", "s", "--chunk", "500", "--addr", a.address], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    ex.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    ex.stdout.once("data", () => ex.stdout.destroy());
    const [code] = await once(ex, "exit");
    assert.equal(code, 1, stderr);
    assert.equal(stderr, "deltaset export: stopped: the command reading its output closed it\n");
  });

  it("`deltaset import` refuses a stream that is not an export", async () => {
    const im = spawn(process.execPath, [BIN, "import", "q", "--addr", clusterB.addresses[0]!], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    im.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    im.stdin.end(Buffer.from([0x05, 1, 2]));
    const [code] = await once(im, "exit");
    assert.equal(code, 2);
    assert.match(stderr, /stream ends inside message 0/);
  });
});

describe("scopes", () => {
  const READ = "tkR-7a1c0e9d5b3f42a8b6c0f1e2d3a4b5c6";
  const ADMIN = "tkA-1f0e2d3c4b5a69788796a5b4c3d2e1f0";
  let secured: NodeProcess;
  before(async () => {
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, `read ${READ}\nadmin ${ADMIN}\n`, { mode: 0o600 });
    secured = await startNodeProcess(["--listen", "127.0.4.5:0", "--data-dir", join(dir, "secured"), "--auth-tokens-file", tokens, ...FAST]);
  });
  after(async () => secured?.kill());

  it("a read token may Export but not Import; an admin token may Import", async () => {
    const chunks = await exportOf(a.address, "m");
    await expectRefused(importTo(secured.address, "m", chunks, bearerMetadata(READ)), grpc.status.PERMISSION_DENIED, /admin scope/);
    assert.equal((await statusOf(importTo(secured.address, "m", chunks, bearerMetadata(ADMIN)))).code, 0);
    const back = await exportOf(secured.address, "m", { metadata: bearerMetadata(READ) });
    assert.deepEqual(back.flatMap(entriesOf), chunks.flatMap(entriesOf));
  });
});
