// Import and AddStream sent to a node that does not own the key, on real node processes
// (--replication-factor 3 over 5 nodes): what they write lands on the key's owners and not on the
// node called, acks still mean durable, an owner SIGKILLed before or during a stream is failed
// over or reported (never a silent loss of an acknowledged element), and every call to an owner is
// counted in deltaset_forwarded_calls on the node's /metrics.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import type { AddStreamAck, ExportChunk, ImportResponse, ReplicaClient, ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call } from "../../services/client/rpc.ts";
import { FORWARDED_BY } from "../../services/node/routing.ts";
import { READ_PULL } from "../../services/node/read-pull.ts";
import { eventually } from "../helpers/eventually.ts";
import { localKeys, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-route-streams-"));
const FLAGS = [
  "--replication-factor", "3", "--partitions", "16", "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150",
  "--stream-window", "4", "--metrics-listen", "127.0.0.1:0",
];
const c = new TestCluster(dir, [61, 62, 63, 64, 65].map((i) => `127.0.5.${i}:7831`), FLAGS, "r");
const ALL = [0, 1, 2, 3, 4];
/** The node every stream is sent to. */
const N = 0;

before(async () => {
  await c.startAll();
  await eventually("5 members agree on owners", async () => Promise.all(ALL.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.length === 3 && o.join() === v[0]!.join()), 30_000);
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A key's owners as node i places them, in placement order (the order forwarding tries them). */
async function ownerOrder(i: number, key: string): Promise<string[]> {
  return c.replica(i, async (r) => (await call(r, r.owners, { key }, { timeoutMs: 5000 })).owners.map((o) => o.nodeId));
}

const index = (nodeId: string) => Number(nodeId.slice(c.name.length));

/** The first keys with this prefix that node N does not own and whose first owner passes want. */
async function keysOwnedElsewhere(prefix: string, count: number, want: (owners: string[]) => boolean = () => true): Promise<Array<{ key: string; owners: string[] }>> {
  const out: Array<{ key: string; owners: string[] }> = [];
  for (let k = 0; out.length < count; k++) {
    assert.ok(k < 500, `no ${count} keys with prefix ${prefix} fit`);
    const owners = await ownerOrder(N, `${prefix}${k}`);
    if (!owners.includes(`${c.name}${N}`) && want(owners)) out.push({ key: `${prefix}${k}`, owners });
  }
  return out;
}

/** The members of key in node i's own store (the read is marked forwarded: never sent on; and a last-hop fetch: nothing fetched first). */
async function localRead(i: number, key: string): Promise<string[]> {
  return c.replica(i, async (r) => {
    const md = new grpc.Metadata();
    md.set(FORWARDED_BY, "test");
    md.set(READ_PULL, "2");
    const out: string[] = [];
    for await (const ch of r.scan({ key, chunkSize: 5000, startAfter: Buffer.alloc(0), withText: false }, md) as AsyncIterable<ScanChunk>) {
      out.push(...ch.members.map((m) => m.element.toString()));
    }
    return out.sort();
  });
}

/** deltaset_forwarded_calls of node i for method and outcome (0 when absent). */
async function forwarded(i: number, method: string, outcome: string): Promise<number> {
  const address = /"endpoint":"http:\/\/([^/"]+)\/metrics"/.exec(c.nodes.get(i)!.logs())![1]!;
  const text = await (await fetch(`http://${address}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("deltaset_forwarded_calls") && l.includes(`method="${method}"`) && l.includes(`outcome="${outcome}"`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

/** An Export of a key made of `size` elements, its chunks renamed to key `as`. */
async function exportAs(source: string, size: number, as: string): Promise<ExportChunk[]> {
  const elements = Array.from({ length: size }, (_, i) => `${source}-${i}`);
  for (let i = 0; i < size; i += 500) await c.add(N, source, elements.slice(i, i + 500));
  return c.replica(N, async (r) => {
    const out: ExportChunk[] = [];
    for await (const ch of r.export({ key: source, maxEntries: 200, maxBytes: 0 }) as AsyncIterable<ExportChunk>) out.push({ ...ch, key: as });
    return out;
  });
}

/** Import chunks through node i; before the chunk at index `pauseAt`, awaits pause(). */
function importVia(i: number, chunks: ExportChunk[], pauseAt = -1, pause: () => Promise<void> = async () => {}): Promise<ImportResponse> {
  return c.replica(i, (r) =>
    new Promise<ImportResponse>((resolve, reject) => {
      const s = r.import((err, res) => (err ? reject(err) : resolve(res!)));
      void (async () => {
        for (const [j, ch] of chunks.entries()) {
          if (j === pauseAt) await pause();
          if (!s.write(ch)) await new Promise((w) => s.once("drain", w));
        }
        s.end();
      })();
    }),
  );
}

interface StreamOutcome {
  /** The seq of the last batch acknowledged (batches are numbered from 1). */
  acked: number;
  /** Acks, each with the seq it covers, in the order received. */
  acks: AddStreamAck[];
  err?: grpc.ServiceError;
}

/** Send batches on one AddStream, at most `window` unacknowledged; before batch j awaits beforeSend(j). */
async function streamBatches(r: ReplicaClient, batches: Array<{ key: string; elements: string[] }>, window: number, beforeSend: (j: number) => Promise<void> = async () => {}): Promise<StreamOutcome> {
  const s = r.addStream();
  const out: StreamOutcome = { acked: 0, acks: [] };
  let wake: (() => void) | undefined;
  const ended = new Promise<void>((resolve) => {
    s.on("data", (a: AddStreamAck) => {
      out.acks.push(a);
      out.acked = Number(a.seq);
      wake?.();
    });
    s.on("error", (err: grpc.ServiceError) => {
      out.err = err;
      wake?.();
      resolve();
    });
    s.on("end", () => resolve());
  });
  for (const [j, b] of batches.entries()) {
    await beforeSend(j);
    while (j - out.acked >= window && out.err === undefined) await new Promise<void>((w) => (wake = w));
    if (out.err !== undefined) break;
    if (!s.write({ key: b.key, elements: b.elements.map((e) => Buffer.from(e)), texts: [], seq: BigInt(j + 1) })) await new Promise((w) => s.once("drain", w));
  }
  s.end();
  await ended;
  return out;
}

/** Runs of 3 consecutive batches per key (grouped into one add), `per` elements each, cycling over keys. */
function batchesOver(keys: string[], count: number, per: number, tag: string) {
  return Array.from({ length: count }, (_, b) => ({ key: keys[Math.floor(b / 3) % keys.length]!, elements: Array.from({ length: per }, (_, i) => `${tag}${b}-${i}`) }));
}

/** Per key, the elements of the batches up to seq `upTo`. */
function expected(batches: Array<{ key: string; elements: string[] }>, upTo: number): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const b of batches.slice(0, upTo)) m.set(b.key, [...(m.get(b.key) ?? []), ...b.elements]);
  for (const v of m.values()) v.sort();
  return m;
}

describe("Import and AddStream through a node that does not own the key (R = 3, real processes)", { timeout: 240_000 }, () => {
  it("Import goes to an owner: the owners hold the key, the node called does not", async () => {
    const [{ key, owners }] = await keysOwnedElsewhere("imp", 1);
    const chunks = await exportAs("imp-src", 1000, key!);
    assert.ok(chunks.length >= 5, `the export has ${chunks.length} chunks`);
    const before = await forwarded(N, "Import", "ok");
    const res = await importVia(N, chunks);
    assert.equal(res.key, key);
    assert.equal(Number(res.size), 1000);
    assert.equal(Number(res.chunks), chunks.length);
    // Right after the answer: the first owner has all of it, the node called nothing.
    assert.equal((await localRead(index(owners![0]!), key!)).length, 1000, "the first owner took the import");
    assert.deepEqual(await localRead(N, key!), [], "the node called holds nothing of the key");
    assert.ok(!(await localKeys(c, N)).has(key!));
    assert.equal(await forwarded(N, "Import", "ok"), before + 1);
    for (const o of owners!) await eventually(`${o} has the imported key`, () => localRead(index(o), key!), (v) => v.length === 1000);
  });

  it("a forwarded unary Add is counted once, as ok", async () => {
    const [{ key }] = await keysOwnedElsewhere("unary", 1);
    const before = await forwarded(N, "Add", "ok");
    await c.add(N, key!, ["x"]);
    assert.equal(await forwarded(N, "Add", "ok"), before + 1);
    assert.equal(await forwarded(N, "Add", "error"), 0);
  });

  it("an Import of a key this node owns stays here; a bad stream gets a clear error", async () => {
    let key = "";
    for (let k = 0; key === ""; k++) if ((await ownerOrder(N, `own${k}`)).includes(`${c.name}${N}`)) key = `own${k}`;
    const chunks = await exportAs("own-src", 300, key);
    const before = await forwarded(N, "Import", "ok");
    assert.equal(Number((await importVia(N, chunks)).size), 300);
    assert.equal(await forwarded(N, "Import", "ok"), before, "not forwarded");
    assert.equal((await localRead(N, key)).length, 300);
    // An empty stream, and a first chunk without a key, are refused as before.
    const empty = await importVia(N, []).then(() => undefined, (e: grpc.ServiceError) => e);
    assert.equal(empty?.code, grpc.status.INVALID_ARGUMENT);
    assert.match(empty!.details, /no chunk/);
    const unnamed = await importVia(N, [{ ...chunks[0]!, key: "" }]).then(() => undefined, (e: grpc.ServiceError) => e);
    assert.equal(unnamed?.code, grpc.status.INVALID_ARGUMENT);
    assert.match(unnamed!.details, /must name the key/);
  });

  it("AddStream: batches of keys owned elsewhere land on their owners, acks in order once durable", async () => {
    const elsewhere = (await keysOwnedElsewhere("as", 4)).map((k) => k.key);
    let mine = "";
    for (let k = 0; mine === ""; k++) if ((await ownerOrder(N, `asmine${k}`)).includes(`${c.name}${N}`)) mine = `asmine${k}`;
    const keys = [...elsewhere, mine];
    const batches = batchesOver(keys, 150, 40, "b");
    const before = await forwarded(N, "AddStream", "ok");
    const out = await c.replica(N, (r) => streamBatches(r, batches, 16));
    assert.equal(out.err, undefined, out.err?.details);
    assert.equal(out.acked, 150);
    assert.equal(out.acks.reduce((n, a) => n + a.batches, 0), 150);
    assert.equal(out.acks.reduce((n, a) => n + Number(a.elements), 0), 150 * 40);
    assert.equal(out.acks.reduce((n, a) => n + Number(a.added), 0), 150 * 40);
    assert.ok(out.acks.every((a, i) => i === 0 || a.seq > out.acks[i - 1]!.seq), "acks in order");
    // Right after the last ack: the node called holds only the key it owns.
    const held = await localKeys(c, N);
    for (const k of elsewhere) assert.ok(!held.has(k), `${k} is not on the node called`);
    assert.ok(held.has(mine));
    assert.ok((await forwarded(N, "AddStream", "ok")) > before);
    const want = expected(batches, 150);
    for (const k of keys) {
      for (const o of await ownerOrder(N, k)) await eventually(`${o} holds every element of ${k}`, () => localRead(index(o), k), (v) => JSON.stringify(v) === JSON.stringify(want.get(k)));
    }
  });

  it("AddStream: a batch the owner refuses ends the stream with the owner's error naming its seq", async () => {
    const [{ key: counter }, { key: set }] = await keysOwnedElsewhere("refuse", 2);
    await c.replica(N, (r) => call(r, r.increment, { key: counter!, amount: 1n, requestId: "" }));
    const out = await c.replica(N, (r) => streamBatches(r, [{ key: set!, elements: ["a"] }, { key: counter!, elements: ["b"] }, { key: set!, elements: ["c"] }], 1));
    assert.equal(out.err?.code, grpc.status.FAILED_PRECONDITION, out.err?.details);
    assert.match(out.err!.details, /batch seq 2: at owner r\d/);
    assert.equal(out.acked, 1);
    assert.deepEqual(await c.read(N, set!), ["a"]);
  });

  it("AddStream: an owner SIGKILLed mid-stream is failed over; no acknowledged element is lost", async () => {
    const victim = 2;
    const keys = (await keysOwnedElsewhere("kv", 3, (o) => o[0] === `${c.name}${victim}`)).map((k) => k.key);
    const batches = batchesOver(keys, 240, 20, "v");
    const failoversBefore = await forwarded(N, "AddStream", "failover");
    const out = await c.replica(N, (r) =>
      streamBatches(r, batches, 8, async (j) => {
        if (j === 60) await c.kill(victim);
      }),
    );
    // Failover: the next owner takes the adds the dead one no longer answers.
    assert.equal(out.err, undefined, `the stream failed: ${out.err?.code} ${out.err?.details}`);
    assert.equal(out.acked, 240);
    assert.ok((await forwarded(N, "AddStream", "failover")) > failoversBefore, "a failover was counted");
    // What the victim acknowledged before it died is on its disk: it comes back and gossips it.
    await c.start(victim);
    const want = expected(batches, out.acked);
    for (const k of keys) {
      await eventually(`every owner of ${k} holds every acknowledged element`, async () => {
        const owners = await ownerOrder(N, k);
        return Promise.all(owners.map(async (o) => (await localRead(index(o), k)).length));
      }, (sizes) => sizes.length === 3 && sizes.every((n) => n === want.get(k)!.length), 45_000);
    }
  });

  it("Import: an owner dying mid-stream is reported; the retry fails over to the next owner", async () => {
    const victim = 3;
    await eventually("5 members agree again", async () => Promise.all(ALL.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.length === 3 && o.join() === v[0]!.join()), 30_000);
    const [{ key, owners }] = await keysOwnedElsewhere("impk", 1, (o) => o[0] === `${c.name}${victim}`);
    const chunks = await exportAs("impk-src", 1000, key!);
    const err = await importVia(N, chunks, 2, async () => {
      // The proxy to the first owner is open and has taken chunks: kill that owner.
      await new Promise((w) => setTimeout(w, 300));
      await c.kill(victim);
    }).then(() => undefined, (e: grpc.ServiceError) => e);
    assert.ok(err !== undefined, "the import failed with its owner");
    assert.equal(err.code, grpc.status.UNAVAILABLE, err.details);
    const failoversBefore = await forwarded(N, "Import", "failover");
    // Retried at once, before membership notices the death: the next owner takes it.
    const res = await importVia(N, chunks);
    assert.equal(Number(res.size), 1000);
    assert.ok((await forwarded(N, "Import", "failover")) > failoversBefore, "a failover was counted");
    assert.ok((await forwarded(N, "Import", "error")) >= 1, "the failed import was counted");
    // The owner that took it is the next one in the forwarding node's view; if membership noticed
    // the death first, placement may have named another: either way the live owners all get it
    // (gossip among owners), and the forwarding node keeps nothing.
    const live = owners!.filter((o) => o !== `${c.name}${victim}`);
    for (const o of live) await eventually(`${o} holds the import`, () => localRead(index(o), key!), (v) => v.length === 1000, 30_000);
    // Once the victim is declared dead the forwarding node may own the key itself (R = 3 of the 4
    // left), and then gets it by gossip: only while it does not own it must it hold nothing.
    if (!(await ownerOrder(N, key!)).includes(`${c.name}${N}`)) assert.deepEqual(await localRead(N, key!), []);
  });
});
