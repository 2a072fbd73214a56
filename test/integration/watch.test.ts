// Watch on real nodes: a client's copy of a set, built from the catch-up and the change events,
// follows local writes, writes on the other node (joined by gossip) and removes; a watch resumed
// from the last event's context catches up on exactly what it missed; a prefix watch sees only
// its keys; a watcher that stops reading is ended with RESOURCE_EXHAUSTED while writes go on; the
// watcher limit holds; the CLI prints events and keeps a since file; a node that stops ends its
// watches at once with UNAVAILABLE instead of holding its drain open.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { contextToProto } from "../../services/crdt/index.ts";
import { CausalContext as CausalContextJson } from "../../services/gen/deltaset/v1/types.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { WatchedSet } from "../../services/client/watch.ts";
import { BIN, REPO } from "../helpers/node-process.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { watchStream } from "../helpers/watch-streams.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-watch-"));
const c = new TestCluster(dir, ["127.0.2.41:7941", "127.0.2.42:7942"], ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "200"], "w");
const tight = new TestCluster(dir, ["127.0.2.43:7943"], ["--watch-buffer", "3", "--max-watchers", "1"], "wt");
const stopping = new TestCluster(dir, ["127.0.2.44:7944"], [], "ws");

before(async () => {
  await Promise.all([c.startAll(), tight.startAll()]);
});
after(async () => {
  await Promise.all([c.close(), tight.close(), stopping.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** A server stream of any method, its messages counted as bytes, and how it ended. */
function rawWatch(address: string, path: string, request = Buffer.alloc(0)) {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const pass = (b: Buffer) => b;
  const stream = client.makeServerStreamRequest(path, pass, pass, request);
  const w = { messages: 0, ended: undefined as unknown as Promise<grpc.ServiceError | undefined>, close: () => (stream.cancel(), client.close()) };
  w.ended = new Promise((resolve) => {
    stream.on("data", () => w.messages++);
    stream.on("error", (e: grpc.ServiceError) => resolve(e));
    stream.on("end", () => resolve(undefined));
  });
  return w;
}


describe("Watch", () => {
  it("keeps a copy in step with local writes, replicated writes and removes, and resumes from a context", { timeout: 60_000 }, async () => {
    await c.add(0, "w", ["a", "b"]);
    const w1 = watchStream(c.addresses[0]!, { key: "w" });
    const copy = new WatchedSet();
    let applied = 0;
    const follow = async (want: string[]) =>
      eventually(`copy reads ${want}`, async () => {
        while (applied < w1.events.length) copy.apply(w1.events[applied++]!);
        return copy.elements();
      }, (e) => JSON.stringify(e) === JSON.stringify(want), 15_000);
    await follow(["a", "b"]);
    await c.add(0, "w", ["c"]);
    await c.add(1, "w", ["d"]);
    await c.converged("w", [0, 1], ["a", "b", "c", "d"]);
    const ctx = await c.context(1, "w");
    await c.remove(1, "w", ["a"], ctx);
    await follow(["b", "c", "d"]);
    assert.ok(w1.events.some((e) => e.delta !== undefined && e.context !== undefined), "change events carry the context after them");
    w1.close();

    // Missed while no watch ran: an add on node 1 and a remove on node 0.
    await c.add(1, "w", ["e"]);
    await c.converged("w", [0, 1], ["b", "c", "d", "e"]);
    await c.remove(0, "w", ["b"], await c.context(0, "w"));
    const w2 = watchStream(c.addresses[0]!, { key: "w", since: contextToProto(copy.resumeFrom!) });
    await eventually("the catch-up since the context", async () => w2.events.some((e) => e.catchUp?.last === true), (done) => done, 15_000);
    const catchUp = w2.events.filter((e) => e.catchUp !== undefined);
    assert.ok(catchUp[0]!.catchUp!.delta, "a delta since the context, not the whole state");
    for (const e of w2.events) copy.apply(e);
    assert.deepEqual(copy.elements(), ["c", "d", "e"]);
    assert.deepEqual(await c.read(0, "w"), ["c", "d", "e"]);
    w2.close();
  });

  it("a catch-up of several chunks carries its context on the last chunk only, so a watch cut during it resumes without a gap; the CLI's since file is written after it", { timeout: 60_000 }, async () => {
    const all = Array.from({ length: 2500 }, (_, i) => `big-${i}`);
    for (let i = 0; i < all.length; i += 500) await c.add(0, "big", all.slice(i, i + 500));
    const keyCtx = await c.context(0, "big");
    const w = watchStream(c.addresses[0]!, { key: "big" });
    await eventually("the whole catch-up", async () => w.events.some((e) => e.catchUp?.last === true), (done) => done, 15_000);
    w.close();
    const catchUp = w.events.filter((e) => e.catchUp !== undefined);
    assert.ok(catchUp.length >= 3, `${catchUp.length} catch-up chunks`);
    // A client that resumes from the last context it saw, cut after any chunk but the last, has
    // none from this catch-up and so resumes from where it started: nothing is skipped.
    assert.deepEqual(catchUp.slice(0, -1).map((e) => e.context), catchUp.slice(0, -1).map(() => undefined));
    assert.deepEqual(catchUp.at(-1)!.context, catchUp[0]!.catchUp!.nextSince);
    assert.deepEqual(catchUp.at(-1)!.context, keyCtx);
    // Resumed from the last chunk's context: nothing left to send.
    const resumed = watchStream(c.addresses[0]!, { key: "big", since: catchUp.at(-1)!.context });
    await eventually("the resumed catch-up", async () => resumed.events.some((e) => e.catchUp?.last === true), (done) => done, 15_000);
    resumed.close();
    const copy = new WatchedSet();
    for (const e of resumed.events) copy.apply(e);
    assert.deepEqual(copy.elements(), []);

    // The CLI writes its since file once the catch-up is in, though no change followed it.
    const sinceFile = join(dir, "big.since");
    const child = spawn(process.execPath, [BIN, "watch", "big", "--since-file", sinceFile, "--addr", c.addresses[0]!, "--json"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    try {
      await eventually("the catch-up printed", async () => out.split("\n").filter((l) => l.includes('"kind":"catch-up"')).length, (n) => n === catchUp.length, 15_000);
      const since = await eventually("the since file", async () => { try { return JSON.parse(readFileSync(sinceFile, "utf8")); } catch { return undefined; } }, (x) => x !== undefined, 5000);
      assert.deepEqual(since, JSON.parse(JSON.stringify(CausalContextJson.toJSON(keyCtx!))));
    } finally {
      child.kill("SIGINT");
      await once(child, "exit");
    }
  });

  it("a copy cut during a catch-up and watched again drops what the cut catch-up left pending (an element removed meanwhile stays removed)", { timeout: 60_000 }, async () => {
    const all = Array.from({ length: 2500 }, (_, i) => `cut-${String(i).padStart(4, "0")}`);
    for (let i = 0; i < all.length; i += 500) await c.add(0, "cut", all.slice(i, i + 500));
    const copy = new WatchedSet();
    const first = watchStream(c.addresses[0]!, { key: "cut" });
    await eventually("the first catch-up chunk", async () => first.events.find((e) => e.catchUp !== undefined), (e) => e !== undefined, 15_000);
    first.close();
    copy.apply(first.events.find((e) => e.catchUp !== undefined)!);
    // Removed while the copy is cut off, and held in the chunk it has pending.
    await c.remove(0, "cut", ["cut-0000"], await c.context(0, "cut"));
    const again = watchStream(c.addresses[0]!, { key: "cut", since: copy.resumeFrom === undefined ? undefined : contextToProto(copy.resumeFrom) });
    await eventually("the whole catch-up", async () => again.events.some((e) => e.catchUp?.last === true), (done) => done, 15_000);
    again.close();
    for (const e of again.events) copy.apply(e);
    const elements = copy.elements();
    assert.equal(elements.length, 2499);
    assert.ok(!elements.includes("cut-0000"), "the removed element is not brought back by the cut catch-up's chunk");
  });

  it("a prefix watch sees changes of its keys only", { timeout: 30_000 }, async () => {
    const w = watchStream(c.addresses[1]!, { prefix: "pre/" });
    await new Promise((r) => setTimeout(r, 300));
    await c.add(1, "pre/x", ["1"]);
    await c.add(1, "other", ["2"]);
    await c.add(0, "pre/y", ["3"]);
    await eventually("both prefixed keys seen", async () => new Set(w.events.map((e) => e.key)), (s) => s.has("pre/x") && s.has("pre/y"), 15_000);
    assert.ok(w.events.every((e) => e.key.startsWith("pre/") && e.catchUp === undefined));
    w.close();
  });

  it("refuses a request naming both a key and a prefix, or neither, with INVALID_ARGUMENT", { timeout: 30_000 }, async () => {
    for (const req of [{ key: "pre/x", prefix: "pre/" }, {}]) {
      const w = watchStream(c.addresses[0]!, req);
      const end = await w.ended;
      assert.equal(end?.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(req));
      w.close();
    }
  });

  it("ends a watcher that does not read with RESOURCE_EXHAUSTED, never holding writes back; one watcher at most", { timeout: 60_000 }, async () => {
    const w = watchStream(tight.addresses[0]!, { key: "flood" });
    w.stream.pause(); // read nothing
    const second = watchStream(tight.addresses[0]!, { key: "flood" });
    const refused = await second.ended;
    assert.equal(refused?.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(refused!.details, /--max-watchers/);
    const client = replicaClient(tight.addresses[0]!);
    try {
      const big = (i: number) => Array.from({ length: 300 }, (_, j) => Buffer.from(`flood-${i}-${j}-${"x".repeat(40)}`));
      for (let i = 0; i < 60; i++) await call(client, client.add, { key: "flood", elements: big(i), texts: [] }, { timeoutMs: 5000 });
    } finally {
      client.close();
    }
    w.stream.resume();
    const err = await w.ended;
    assert.equal(err?.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(err!.details, /resume from the last event's context/);
    assert.equal(await tight.size(0, "flood"), 60 * 300);
  });

  it("ends every watch with UNAVAILABLE as the node stops, which then stops without waiting out its drain", { timeout: 60_000 }, async () => {
    await stopping.startAll();
    await stopping.add(0, "s", ["a"]);
    const byKey = watchStream(stopping.addresses[0]!, { key: "s" });
    const byPrefix = watchStream(stopping.addresses[0]!, { prefix: "s" });
    await eventually("both watches are open", async () => byKey.events.length, (n) => n > 0, 10_000);
    await stopping.add(0, "s", ["b"]);
    await eventually("the prefix watch sees a change", async () => byPrefix.events.length, (n) => n > 0, 10_000);
    // Health and membership watches are open too: each held the drain on its own.
    const health = rawWatch(stopping.addresses[0]!, "/grpc.health.v1.Health/Watch");
    const members = rawWatch(stopping.addresses[0]!, "/deltaset.v1.Membership/Watch", Buffer.from([8, 1])); // include_current
    await eventually("the health and membership watches answer", async () => health.messages + members.messages, () => health.messages > 0 && members.messages > 0, 10_000);
    const node = stopping.nodes.get(0)!;
    const started = Date.now();
    assert.equal(await node.stop(), 0);
    const ms = Date.now() - started;
    // The drain waits up to --drain-timeout-ms (20 s) for running calls; open watches held it all.
    assert.ok(ms < 10_000, `the node took ${ms} ms to stop`);
    assert.match(node.logs(), /"drain":"drained"/);
    for (const w of [byKey, byPrefix, health, members]) {
      const err = await w.ended;
      assert.equal(err?.code, grpc.status.UNAVAILABLE, `${err?.code} ${err?.details}`);
      assert.match(err!.details, /node is stopping/);
      w.close();
    }
  });

  it("is followed from the CLI, which keeps a since file", { timeout: 30_000 }, async () => {
    await c.add(0, "cli-w", ["p"]);
    const sinceFile = join(dir, "cli-w.since");
    const child = spawn(process.execPath, [BIN, "watch", "cli-w", "--since-file", sinceFile, "--addr", c.addresses[0]!, "--json"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    try {
      await eventually("the catch-up printed", async () => out, (o) => o.includes('"kind":"catch-up"'), 15_000);
      assert.match(err, /--since-file .*cli-w\.since does not exist: watching from the whole state/);
      await c.add(0, "cli-w", ["q"]);
      await eventually("the change printed", async () => out, (o) => /"kind":"change","added":\["q"\]/.test(o), 15_000);
      const since = JSON.parse(readFileSync(sinceFile, "utf8"));
      assert.ok(Array.isArray(since.vv) && since.vv.length > 0, "the since file holds a context");
    } finally {
      child.kill("SIGINT");
      await once(child, "exit");
    }
    // Away: one add it saw is removed, one is made. Resumed from the since file, the catch-up
    // names both: the new element, and the seen add that was removed.
    assert.equal((await c.remove(0, "cli-w", ["p"])).removed, 1);
    await c.add(0, "cli-w", ["r"]);
    const again = spawn(process.execPath, [BIN, "watch", "cli-w", "--since-file", sinceFile, "--addr", c.addresses[0]!, "--json"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let out2 = "";
    again.stdout.on("data", (d: Buffer) => (out2 += d.toString()));
    try {
      await eventually("the resumed catch-up printed", async () => out2, (o) => o.includes('"kind":"catch-up"'), 15_000);
      const catchUp = out2.split("\n").filter((l) => l.includes('"kind":"catch-up"')).map((l) => JSON.parse(l) as { added: string[]; removedDots: number });
      assert.deepEqual(catchUp.flatMap((e) => e.added), ["r"]);
      assert.equal(catchUp.reduce((n, e) => n + e.removedDots, 0), 1, out2);
    } finally {
      again.kill("SIGINT");
      await once(again, "exit");
    }
  });
});
