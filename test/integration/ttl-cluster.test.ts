// Adds with a time to live on a 3-node cluster of real processes: copies reach every node by
// gossip, by full-state transfer to a node that lost its data, and by Export/Import, each with the
// time it has left; every node then hides and removes them, and none brings them back.
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import type { ExportChunk, QueryResponse } from "../../services/gen/deltaset/v1/replica.ts";
import { eventually } from "../helpers/eventually.ts";
import { expectRefused } from "../helpers/grpc-status.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { runCli } from "../helpers/node-process.ts";
import { addStream } from "../../services/client/add-stream.ts";
import { ObjectType } from "../../services/crdt/index.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-ttl-"));
const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.2.6${i}:776${i}`), ["--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--gossip-interval-ms", "100", "--ttl-sweep-ms", "200"], "ttl");
before(() => c.startAll());
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const b = (s: string) => Buffer.from(s);
const addTtl = (i: number, key: string, elements: string[], ttlMs: number) =>
  c.replica(i, (r) => call(r, r.add, { key, elements: elements.map(b), texts: [], ttlMs: BigInt(ttlMs) }));
const query = (i: number, key: string, elements: string[]): Promise<QueryResponse> =>
  c.replica(i, (r) => call(r, r.query, { key, elements: elements.map(b), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false, withDots: true }));

describe("adds with a time to live on a cluster", () => {
  it("reach every node with their remaining time, expire everywhere, and are removed from storage", async () => {
    const started = Date.now();
    await addTtl(0, "sessions", ["s1", "s2"], 2_500);
    await c.add(0, "sessions", ["keep"]);
    await c.converged("sessions", [0, 1, 2], ["keep", "s1", "s2"], 10_000);
    const q = await query(2, "sessions", ["s1"]);
    const ttl = Number(q.presence[0]!.dots[0]!.ttlMs);
    // A copy expires at or after the original (time stops in transit), never before, and never
    // has more than the whole TTL left.
    const elapsed = Date.now() - started;
    assert.ok(ttl >= 2_500 - elapsed - 5 && ttl <= 2_500, `node 2's copy has ${ttl} ms left, ${elapsed} ms after the add`);
    await c.converged("sessions", [0, 1, 2], ["keep"], 10_000);
    // The sweep removes the records: Query's size (the stored live count) drops on every node.
    for (const i of [0, 1, 2]) await eventually(`node ${i} swept`, () => c.size(i, "sessions"), (n) => n === 1, 5_000);
    // Adding again without a TTL makes an element permanent.
    await addTtl(1, "sessions", ["s3"], 60_000);
    await c.add(1, "sessions", ["s3"]);
    await c.converged("sessions", [0, 1, 2], ["keep", "s3"], 10_000);
    const again = await query(0, "sessions", ["s3"]);
    assert.equal(again.presence[0]!.dots.length, 1);
    assert.equal(again.presence[0]!.dots[0]!.ttlMs, 0n);
  });

  it("a node that lost its data gets the copies back by state transfer with the time they have left", async () => {
    await addTtl(0, "tokens", ["t1"], 4_000);
    await c.converged("tokens", [0, 1, 2], ["t1"], 10_000);
    await c.wipeAndRestart(2);
    await c.converged("tokens", [0, 1, 2], ["t1"], 15_000);
    await c.converged("tokens", [0, 1, 2], [], 10_000);
    for (const i of [0, 1, 2]) await eventually(`node ${i} swept tokens`, () => c.size(i, "tokens"), (n) => n === 0, 5_000);
  });

  it("Export carries remaining times, so an imported copy expires with the original", async () => {
    await addTtl(1, "cache", ["c1"], 4_000);
    const chunks = await c.replica(1, async (r) => {
      const out: ExportChunk[] = [];
      for await (const ch of r.export({ key: "cache", maxEntries: 0, maxBytes: 0 }, new grpc.Metadata(), { deadline: Date.now() + 10_000 }) as AsyncIterable<ExportChunk>) out.push(ch);
      return out;
    });
    await c.replica(2, (r) =>
      new Promise<void>((resolve, reject) => {
        const s = r.import(new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (err) => (err ? reject(err) : resolve()));
        void (async () => {
          for (const [i, ch] of chunks.entries()) if (!s.write({ ...ch, key: i === 0 ? "cache-copy" : "" })) await once(s, "drain");
          s.end();
        })();
      }),
    );
    assert.deepEqual(await c.read(2, "cache-copy"), ["c1"]);
    await c.converged("cache-copy", [0, 1, 2], [], 10_000);
  });

  it("an Import counts how long its export waited (less the clock skew bound): a kept export's adds do not outlive the originals", async () => {
    const exportOf = (key: string) =>
      c.replica(1, async (r) => {
        const out: ExportChunk[] = [];
        for await (const ch of r.export({ key, maxEntries: 0, maxBytes: 0 }, new grpc.Metadata(), { deadline: Date.now() + 10_000 }) as AsyncIterable<ExportChunk>) out.push(ch);
        return out;
      });
    const importAs = (key: string, chunks: ExportChunk[]) =>
      c.replica(2, (r) =>
        new Promise<void>((resolve, reject) => {
          const s = r.import(new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (err) => (err ? reject(err) : resolve()));
          void (async () => {
            for (const [i, ch] of chunks.entries()) if (!s.write({ ...ch, key: i === 0 ? key : "" })) await once(s, "drain");
            s.end();
          })();
        }),
      );
    await addTtl(1, "kept", ["k1"], 6_000);
    await addTtl(1, "kept-long", ["k2"], 1_000);
    const [kept, keptLong] = [await exportOf("kept"), await exportOf("kept-long")];
    assert.ok(kept[0]!.exportedAtMs > 0n, "each chunk says when its times were read");
    await new Promise((r) => setTimeout(r, 3_500));
    await importAs("kept-copy", kept);
    // 3.5 s waited, 2 s of it (the skew bound) not counted: about 4.5 s left, not 6.
    const ttl = Number((await query(2, "kept-copy", ["k1"])).presence[0]!.dots[0]!.ttlMs);
    assert.ok(ttl > 3_000 && ttl <= 4_600, `${ttl} ms left`);
    // Kept past its time to live and the bound: imported as expired, never read.
    await importAs("kept-long-copy", keptLong);
    assert.equal((await query(2, "kept-long-copy", ["k2"])).presence[0]!.present, false);
    assert.deepEqual(await c.read(2, "kept-long-copy"), []);
  });

  it("refuses a TTL on other types and beyond 100 years, and changes nothing", async () => {
    await expectRefused(
      c.replica(0, (r) => call(r, r.add, { key: "prob-ttl", elements: [b("x")], texts: [], type: ObjectType.AWSET_PROB, ttlMs: 1000n })),
      grpc.status.FAILED_PRECONDITION,
      /ttl_ms applies to AWSET keys only/,
    );
    await expectRefused(addTtl(0, "too-long", ["x"], 4e12), grpc.status.INVALID_ARGUMENT, /above the largest/);
    assert.deepEqual(await c.read(0, "too-long"), []);
  });

  it("the CLI's --ttl gives the elements a time to live", async () => {
    const r = await runCli(["add", "cli-ttl", "a", "--ttl", "1.5s", "--addr", c.addresses[0]!]);
    assert.equal(r.code, 0, r.stderr);
    const q = await query(1, "cli-ttl", ["a"]).catch(() => undefined);
    if (q?.presence[0]!.present) assert.ok(Number(q.presence[0]!.dots[0]!.ttlMs) <= 1_500);
    await c.converged("cli-ttl", [0, 1, 2], [], 10_000);
    const bad = await runCli(["add", "cli-ttl", "a", "--ttl", "5 weeks", "--addr", c.addresses[0]!]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /--ttl 5 weeks: a duration such as/);
    // 0 is no time to live, as ttl_ms 0 is in the API.
    const none = await runCli(["add", "cli-ttl-none", "a", "--ttl", "0", "--addr", c.addresses[0]!]);
    assert.equal(none.code, 0, none.stderr);
    const kept = await query(0, "cli-ttl-none", ["a"]);
    assert.equal(kept.presence[0]!.present, true);
    assert.equal(Number(kept.presence[0]!.dots[0]!.ttlMs ?? 0), 0, "no time to live");
  });

  it("AddStream batches carry a time to live; batches with another one are added apart", async () => {
    await c.replica(0, async (r) => {
      await addStream(r, "streamed", (function* () {
        yield [b("s1"), b("s2")];
        yield [b("s3")];
      })(), { ttlMs: 1_500 });
      await addStream(r, "streamed", (function* () {
        yield [b("kept")];
      })());
    });
    await c.converged("streamed", [0, 1, 2], ["kept", "s1", "s2", "s3"], 10_000);
    await c.converged("streamed", [0, 1, 2], ["kept"], 10_000);
    const bad = await c.replica(0, (r) => addStream(r, "streamed", (function* () {
      yield [b("x")];
    })(), { ttlMs: 4e12 }).then(() => "accepted", (e: Error) => e.message));
    assert.match(bad, /above the largest/);
  });
});
