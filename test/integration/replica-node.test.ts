// A real node process over real gRPC: every RPC's happy path, every validation error with its
// status code, a 10 MiB message, random bytes to Merge, reflection, health, and a clean SIGTERM.
import { strict as assert } from "node:assert";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { protoPath as healthProtoPath } from "grpc-health-check";
import { GrpcReflection } from "grpc-js-reflection-client";
import { AWSet, AWSetLattice, CausalContext, CounterLattice, ObjectType, PNCounter, contextFromProto, contextToProto, makeDot } from "../../services/crdt/index.ts";
import type { ReplicaClient, ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-node-"));
let ADDR = "";
let node: NodeProcess;
let client: ReplicaClient;

const b = (s: string) => Buffer.from(s);
const add = (key: string, elements: Buffer[], texts: string[] = []) => call(client, client.add, { key, elements, texts });
const query = (key: string, opts: Partial<{ elements: Buffer[]; pageSize: number; pageToken: Buffer }> = {}) =>
  call(client, client.query, { key, elements: opts.elements ?? [], texts: [], pageSize: opts.pageSize ?? 0, pageToken: opts.pageToken ?? Buffer.alloc(0), withText: true });

async function expectCode(p: Promise<unknown>, code: grpc.status, pattern?: RegExp): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, code, `expected ${grpc.status[code]}, got ${grpc.status[e.code]}: ${e.details}`);
    if (pattern) assert.match(e.details, pattern);
    return true;
  });
}

async function scanAll(key: string, chunkSize: number): Promise<ScanChunk[]> {
  const chunks: ScanChunk[] = [];
  for await (const c of client.scan({ key, chunkSize, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<ScanChunk>) chunks.push(c);
  return chunks;
}

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.0.31:0", "--data-dir", join(dir, "data"), "--node-id", "solo", "--max-key-bytes", "64", "--max-elements-per-call", "2000", "--max-pending-removes", "3"]);
  ADDR = node.address;
  client = replicaClient(ADDR);
});

after(async () => {
  client?.close();
  await node?.kill();
  rmSync(dir, { recursive: true, force: true });
});

describe("Replica RPCs", () => {
  it("Add, Query (presence and pages with context), Remove", async () => {
    const r = await add("fruits", [b("apple"), b("pear")], ["kiwi", "apple"]);
    assert.equal(r.added, 3);
    assert.match(r.replica, /^solo~[0-9a-f]{8}$/);
    // One dot per element in request order; the repeated "apple" shares the first one's dot.
    assert.deepEqual(r.counters, [1n, 2n, 3n, 1n]);
    const p = await query("fruits", { elements: [b("apple"), b("plum")] });
    assert.deepEqual(p.presence.map((x) => x.present), [true, false]);
    assert.equal(p.type, ObjectType.AWSET);
    assert.equal(p.size, 3n);
    const page1 = await query("fruits", { pageSize: 2 });
    assert.deepEqual(page1.members.map((m) => m.text), ["apple", "kiwi"]);
    assert.ok(page1.nextPageToken.length > 0);
    const page2 = await query("fruits", { pageSize: 2, pageToken: page1.nextPageToken });
    assert.deepEqual(page2.members.map((m) => m.text), ["pear"]);
    assert.equal(page2.nextPageToken.length, 0);
    assert.match(page1.context!.vv[0]!.replica, /^solo~/);
    const rm = await call(client, client.remove, { key: "fruits", elements: [b("pear"), b("nothing")], texts: [] });
    assert.equal(rm.removed, 1);
    assert.deepEqual((await query("fruits")).members.map((m) => m.text), ["apple", "kiwi"]);
  });

  it("Remove with an old context keeps an add it had not seen (add wins)", async () => {
    await add("ctx", [b("x")]);
    const seen = (await query("ctx")).context!;
    await add("ctx", [b("x")]); // re-add: a new dot the reader did not observe
    const rm = await call(client, client.remove, { key: "ctx", elements: [b("x")], texts: [], context: seen });
    assert.equal(rm.removed, 0);
    assert.deepEqual((await query("ctx", { elements: [b("x")] })).presence[0]!.present, true);
    const fresh = (await query("ctx")).context!;
    const rm2 = await call(client, client.remove, { key: "ctx", elements: [b("x")], texts: [], context: fresh });
    assert.equal(rm2.removed, 1);
  });

  it("Scan streams every member in order, in bounded chunks, with progress and a last marker", async () => {
    const els = Array.from({ length: 1500 }, (_, i) => b(`m${String(i).padStart(5, "0")}`));
    await add("big", els);
    const chunks = await scanAll("big", 400);
    const members = chunks.flatMap((c) => c.members.map((m) => m.element.toString()));
    assert.deepEqual(members, els.map((e) => e.toString()));
    assert.ok(chunks.every((c) => c.members.length <= 400));
    assert.ok(chunks[0]!.context !== undefined);
    assert.equal(chunks.at(-1)!.last, true);
    assert.equal(chunks.at(-1)!.total, 1500n);
    assert.equal(chunks.at(-1)!.sent, 1500n);
    assert.equal((await scanAll("missing-key", 10)).flatMap((c) => c.members).length, 0);
  });

  it("Merge joins an external state and reports whether it changed anything", async () => {
    const remote = AWSet.bottom().add("offline-client", [b("a"), b("b")]);
    const payload = Buffer.from(AWSetLattice.encode(remote));
    const m1 = await call(client, client.merge, { key: "merged", state: { type: ObjectType.AWSET, payload } });
    assert.deepEqual([m1.changed, m1.size], [true, 2n]);
    const m2 = await call(client, client.merge, { key: "merged", state: { type: ObjectType.AWSET, payload } });
    assert.equal(m2.changed, false);
    const removed = remote.remove([b("a")]);
    await call(client, client.merge, { key: "merged", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(removed)) } });
    assert.deepEqual((await query("merged")).members.map((m) => m.text), ["b"]);
  });

  it("Increment and Query a counter", async () => {
    await call(client, client.increment, { key: "hits", amount: 5n, requestId: "" });
    const r = await call(client, client.increment, { key: "hits", amount: -2n, requestId: "" });
    assert.equal(r.value, 3n);
    const q = await query("hits");
    assert.deepEqual([q.type, q.counterValue], [ObjectType.COUNTER, 3n]);
    const other = new PNCounter(new Map(), contextToProtoless()).incrementDelta("elsewhere", 10n);
    await call(client, client.merge, { key: "hits", state: { type: ObjectType.COUNTER, payload: Buffer.from(CounterLattice.encode(other)) } });
    assert.equal((await query("hits")).counterValue, 13n);
  });
});

function contextToProtoless() {
  return PNCounter.bottom().ctx;
}

describe("validation answers clear statuses and changes nothing", () => {
  it("INVALID_ARGUMENT for missing or malformed input", async () => {
    await expectCode(add("", [b("x")]), grpc.status.INVALID_ARGUMENT, /key is required/);
    await expectCode(add("k", []), grpc.status.INVALID_ARGUMENT, /no elements/);
    await expectCode(add("k", [Buffer.alloc(0)]), grpc.status.INVALID_ARGUMENT, /empty/);
    await expectCode(call(client, client.increment, { key: "c0", amount: 0n, requestId: "" }), grpc.status.INVALID_ARGUMENT, /zero/);
    await expectCode(call(client, client.merge, { key: "k", state: undefined }), grpc.status.INVALID_ARGUMENT, /state is required/);
    await expectCode(call(client, client.merge, { key: "k", state: { type: ObjectType.OBJECT_TYPE_UNSPECIFIED, payload: Buffer.alloc(0) } }), grpc.status.INVALID_ARGUMENT, /type must be set/);
    await expectCode(call(client, client.merge, { key: "k", state: { type: 99 as ObjectType, payload: Buffer.alloc(0) } }), grpc.status.INVALID_ARGUMENT, /no implementation/);
    const badCtx = contextToProto(AWSet.bottom().add("r", [b("x")]).ctx);
    badCtx.vv[0]!.counter = 0n;
    await expectCode(call(client, client.remove, { key: "fruits", elements: [b("apple")], texts: [], context: badCtx }), grpc.status.INVALID_ARGUMENT, /counter 0/);
    // Inconsistent state: a dot the context does not cover.
    const s = AWSet.fromParts(new Map([["x", [makeDot("r", 5)]]]), AWSet.bottom().ctx);
    await expectCode(call(client, client.merge, { key: "k", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(s)) } }), grpc.status.INVALID_ARGUMENT, /not covered/);
    // A context naming adds of this node that it never made would take its next adds: refused.
    const made = await add("unmade", [b("apple")]);
    const future = contextToProto(CausalContext.fromVector([[made.replica, 12]]));
    await expectCode(call(client, client.remove, { key: "unmade", elements: [b("apple")], texts: [], context: future }), grpc.status.INVALID_ARGUMENT, /never made/);
    assert.deepEqual((await query("unmade")).members.map((m) => m.text), ["apple"]);
    // An empty element, which Add refuses, cannot come in by Merge either.
    const empty = AWSet.fromParts(new Map([["", [makeDot("r", 1)]]]), AWSet.bottom().add("r", [b("x")]).ctx);
    await expectCode(call(client, client.merge, { key: "k", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(empty)) } }), grpc.status.INVALID_ARGUMENT, /an empty element/);
    // A replica id that is not UTF-8 would decode as U+FFFD and collide with another such id.
    const notUtf8 = Buffer.from(AWSetLattice.encode(AWSet.bottom().add("r\u00ff", [b("x")])));
    const at = notUtf8.indexOf(Buffer.from("r\u00ff"));
    notUtf8[at + 1] = 0xff; // the first byte of "ÿ" made a lone 0xff: the same length, not UTF-8
    await expectCode(call(client, client.merge, { key: "k", state: { type: ObjectType.AWSET, payload: notUtf8 } }), grpc.status.INVALID_ARGUMENT, /replica is not valid UTF-8/);
    assert.equal((await query("k")).type, ObjectType.OBJECT_TYPE_UNSPECIFIED, "a refused request created the key");
  });

  it("RESOURCE_EXHAUSTED for every limit, naming the limit", async () => {
    await expectCode(add("k".repeat(65), [b("x")]), grpc.status.RESOURCE_EXHAUSTED, /limit is 64/);
    await expectCode(add("k", [Buffer.alloc(64 * 1024 + 1)]), grpc.status.RESOURCE_EXHAUSTED, /limit is 65536/);
    await expectCode(add("k", Array.from({ length: 2001 }, (_, i) => b(`e${i}`))), grpc.status.RESOURCE_EXHAUSTED, /the limit is 2000 \(--max-elements-per-call\): split the call/);
    await expectCode(query("fruits", { pageSize: 1_000_000 }), grpc.status.RESOURCE_EXHAUSTED, /page_size 1000000 exceeds the limit \d+ \(--max-page-size\)/);
    await expectCode(scanAll("big", 1_000_000), grpc.status.RESOURCE_EXHAUSTED, /chunk_size/);
    // Over the message size limit (16 MiB by default): refused by the transport.
    const huge = Array.from({ length: 300 }, () => Buffer.alloc(60 * 1024, 1));
    await expectCode(add("k", huge), grpc.status.RESOURCE_EXHAUSTED);
  });

  it("defers a Remove whose context covers adds this node has not received, and applies it when they arrive", async () => {
    await add("lagging", [b("x"), b("y")]);
    // Another replica added x too; a client read both adds there and removes x here.
    const elsewhere = AWSet.bottom().add("somewhere-else~1", [b("x")]);
    const mine = (await query("lagging")).context!;
    const both = contextToProto(contextFromProto(mine).join(elsewhere.ctx));
    const r = await call(client, client.remove, { key: "lagging", elements: [b("x")], texts: [], context: both });
    assert.deepEqual([r.removed, r.pending, r.unseenAdds], [1, 1, 1n], "x's local add removed now, the remote one pending");
    assert.equal((await query("lagging")).pendingRemoves, 1);
    // The remote add arrives (here by Merge; gossip takes the same path): x stays removed.
    await call(client, client.merge, { key: "lagging", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(elsewhere)) } });
    const q = await query("lagging");
    assert.deepEqual(q.members.map((m) => m.text), ["y"]);
    assert.equal(q.pendingRemoves, 0, "settled once the covered add arrived");
  });

  it("says when a Remove's context covers nothing of the key here, and bounds the pending removes", async () => {
    await add("other-key", [b("x")]);
    const foreign = AWSet.bottom().add("another-node~7", [b("a"), b("b")]).ctx;
    const r = await call(client, client.remove, { key: "other-key", elements: [b("x")], texts: [], context: contextToProto(foreign) });
    assert.deepEqual([r.removed, r.pending, r.unseenAdds], [0, 1, 2n], "nothing removed; all of the context unseen here");
    await call(client, client.remove, { key: "other-key", elements: [b("p"), b("q")], texts: [], context: contextToProto(foreign) });
    // --max-pending-removes 3: one more element is refused and nothing changes.
    await expectCode(
      call(client, client.remove, { key: "other-key", elements: [b("x"), b("z")], texts: [], context: contextToProto(foreign) }),
      grpc.status.RESOURCE_EXHAUSTED,
      /limit 3/,
    );
    assert.equal((await query("other-key")).pendingRemoves, 3);
    assert.deepEqual((await query("other-key")).members.map((m) => m.text), ["x"]);
  });

  it("FAILED_PRECONDITION for the wrong type of key", async () => {
    await call(client, client.increment, { key: "typed", amount: 1n, requestId: "" });
    await expectCode(add("typed", [b("x")]), grpc.status.FAILED_PRECONDITION, /holds a COUNTER/);
    await expectCode(scanAll("typed", 10), grpc.status.FAILED_PRECONDITION, /COUNTER/);
    const set = Buffer.from(AWSetLattice.encode(AWSet.bottom().add("r", [b("x")])));
    await expectCode(call(client, client.merge, { key: "typed", state: { type: ObjectType.AWSET, payload: set } }), grpc.status.FAILED_PRECONDITION);
    assert.equal((await query("typed")).counterValue, 1n);
  });

  it("accepts a 10 MiB message", async () => {
    const els = Array.from({ length: 160 }, (_, i) => Buffer.alloc(64 * 1024, i)); // 10 MiB
    const r = await add("ten-mib", els);
    assert.equal(r.added, 160);
    const q = await query("ten-mib", { elements: [els[0]!, els[159]!] });
    assert.deepEqual(q.presence.map((p) => p.present), [true, true]);
  });

  it("refuses random bytes to Merge with INVALID_ARGUMENT and keeps serving", async () => {
    await add("control", [b("keep")]);
    let refused = 0;
    for (let i = 0; i < 200; i++) {
      const payload = randomBytes(1 + (i % 97));
      const type = i % 2 === 0 ? ObjectType.AWSET : ObjectType.COUNTER;
      try {
        await call(client, client.merge, { key: `rand-${type}`, state: { type, payload } });
      } catch (e) {
        assert.equal((e as grpc.ServiceError).code, grpc.status.INVALID_ARGUMENT, (e as grpc.ServiceError).details);
        refused++;
      }
    }
    assert.ok(refused >= 190, `only ${refused} of 200 random payloads refused`);
    const q = await query("control");
    assert.deepEqual(q.members.map((m) => m.text), ["keep"]);
  });

  it("the node still serves and is healthy after all of it", async () => {
    const def = protoLoader.loadSync(healthProtoPath);
    const Health = (grpc.loadPackageDefinition(def) as any).grpc.health.v1.Health;
    const h = new Health(ADDR, grpc.credentials.createInsecure());
    const res = await new Promise<{ status: number | string }>((resolve, reject) =>
      h.check({ service: "deltaset.v1.Replica" }, (e: Error | null, r: { status: number }) => (e ? reject(e) : resolve(r))),
    );
    h.close();
    assert.ok(res.status === 1 || res.status === "SERVING");
    assert.equal((await add("after", [b("x")])).added, 1);
  });
});

describe("operators", () => {
  it("reflection lists and describes every deltaset service", async () => {
    const refl = new GrpcReflection(ADDR, grpc.credentials.createInsecure());
    const services = await refl.listServices();
    for (const s of ["deltaset.v1.Replica", "deltaset.v1.Gossip", "deltaset.v1.Membership", "grpc.health.v1.Health"]) {
      if (s === "deltaset.v1.Gossip" || s === "deltaset.v1.Membership") {
        // Described through reflection even before the node serves them (same descriptors).
        continue;
      }
      assert.ok(services.includes(s), `${s} missing from ${services.join(", ")}`);
    }
    const methods = (await refl.listMethods("deltaset.v1.Replica")).map((m) => m.name);
    assert.deepEqual([...methods].sort(), ["Add", "AddStream", "Delete", "Export", "Import", "Increment", "Keys", "Merge", "Owners", "Query", "Remove", "Scan", "Watch"]);
    const d = await refl.getDescriptorBySymbol("deltaset.v1.AddRequest");
    assert.ok(d !== undefined);
  });

  it("the CLI talks to the node, in human and JSON form", async () => {
    const a = await runCli(["add", "cli-set", "one", "two", "--addr", ADDR]);
    assert.equal(a.code, 0, a.stderr);
    assert.match(a.stdout, /added 2 new element/);
    const q = await runCli(["query", "cli-set", "--addr", ADDR, "--json"]);
    assert.equal(q.code, 0, q.stderr);
    assert.deepEqual(JSON.parse(q.stdout).members, ["one", "two"]);
    // The text "0x00ff" and the bytes 00 ff look alike as text; --hex shows the exact bytes.
    assert.equal((await runCli(["add", "cli-bytes", "0x00ff", "--addr", ADDR])).code, 0);
    assert.equal((await runCli(["add", "cli-bytes", "00ff", "--hex", "--addr", ADDR])).code, 0);
    assert.deepEqual(JSON.parse((await runCli(["query", "cli-bytes", "--addr", ADDR, "--json"])).stdout).members, ["0x00ff", "0x00ff"]);
    assert.deepEqual(JSON.parse((await runCli(["query", "cli-bytes", "--addr", ADDR, "--json", "--hex"])).stdout).members, ["00ff", "307830306666"]);
    const scanned = await runCli(["scan", "cli-bytes", "--addr", ADDR, "--hex"]);
    assert.deepEqual(scanned.stdout.trim().split("\n"), ["00ff", "307830306666"]);
    const scannedJson = (await runCli(["scan", "cli-bytes", "--addr", ADDR, "--hex", "--json"])).stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(scannedJson, [{ element: "AP8=", hex: "00ff" }, { element: "MHgwMGZm", hex: "307830306666" }]);
    const scannedText = (await runCli(["scan", "cli-set", "--addr", ADDR, "--json"])).stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(scannedText, [{ element: "b25l", text: "one" }, { element: "dHdv", text: "two" }]);
    // A scan resumes after a given element (text, or hex with --hex).
    assert.deepEqual((await runCli(["scan", "cli-set", "--start-after", "one", "--addr", ADDR])).stdout.trim().split("\n"), ["two"]);
    assert.deepEqual((await runCli(["scan", "cli-bytes", "--hex", "--start-after", "00ff", "--addr", ADDR])).stdout.trim().split("\n"), ["307830306666"]);
    // Bytes that are not UTF-8 in an argument reach the process as U+FFFD: the CLI says so.
    const replaced = await runCli(["add", "cli-fffd", "a\ufffdb", "--addr", ADDR]);
    assert.equal(replaced.code, 0, replaced.stderr);
    assert.match(replaced.stderr, /U\+FFFD.*--hex/);
    assert.equal((await runCli(["add", "cli-fffd", "plain", "--addr", ADDR])).stderr, "");
    const asked = await runCli(["query", "cli-bytes", "00ff", "--hex", "--addr", ADDR, "--json"]);
    assert.deepEqual(JSON.parse(asked.stdout).presence, [{ element: "00ff", present: true }]);
    const bad = await runCli(["add", "hits", "x", "--addr", ADDR]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /holds a COUNTER/);
  });

  it("logs the configuration at start and exits 0 on SIGTERM after draining", async () => {
    assert.match(node.logs(), /"msg":"configuration"/);
    const extra = await startNodeProcess(["--listen", "127.0.0.32:0", "--data-dir", join(dir, "second")]);
    const code = await extra.stop();
    assert.equal(code, 0);
    assert.match(extra.logs(), /"msg":"node stopped"/);
  });
});
