// Retry-safe counters on real node processes (issue 17): an Increment with a request_id applied on
// node 0 and retried on node 1 after gossip is applied once everywhere; retried on node 0 after a
// SIGKILL and restart of node 0 it is still applied once; a different id is applied; calls without
// ids count every time. Bad request ids and parameters are refused clearly.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { TestCluster } from "../helpers/test-cluster.ts";
import { expectRefused } from "../helpers/grpc-status.ts";
import { eventually } from "../helpers/eventually.ts";
import { call } from "../../services/client/rpc.ts";
import type { IncrementRequest } from "../../services/gen/deltaset/v1/replica.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-retry-counter-"));
const c = new TestCluster(dir, ["127.0.0.227:7727", "127.0.0.228:7728"], ["--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--gossip-interval-ms", "100"], "rc");
before(() => c.startAll());
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const incr = (i: number, key: string, amount: bigint, requestId = "", extra: Partial<IncrementRequest> = {}) =>
  c.replica(i, (r) => call(r, r.increment, { key, amount, requestId, ...extra }, { timeoutMs: 10_000 }));
const query = (i: number, key: string) =>
  c.replica(i, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));
const valueOn = async (i: number, key: string) => (await query(i, key)).counterValue;


describe("retry-safe counters on a 2-node cluster", () => {
  it("a retry on the other node after gossip, and on the same node after a SIGKILL restart, is applied once", async () => {
    const first = await incr(0, "visits", 5n, "client-7:1");
    assert.deepEqual([first.duplicate, first.value], [false, 5n]);
    assert.ok(first.dot !== undefined);
    await eventually("node 1 has the increment", () => valueOn(1, "visits"), (v) => v === 5n, 15_000);
    const retry1 = await incr(1, "visits", 5n, "client-7:1");
    assert.deepEqual([retry1.duplicate, retry1.value, retry1.dot], [true, 5n, undefined]);

    await c.kill(0);
    await c.start(0);
    const retry0 = await incr(0, "visits", 5n, "client-7:1");
    assert.deepEqual([retry0.duplicate, retry0.value], [true, 5n]);

    const other = await incr(0, "visits", 2n, "client-7:2");
    assert.deepEqual([other.duplicate, other.value], [false, 7n]);
    for (const i of [0, 1]) await eventually(`node ${i} reads 7`, () => valueOn(i, "visits"), (v) => v === 7n, 15_000);

    const q = await query(1, "visits");
    assert.ok(q.retryFilter !== undefined);
    assert.equal(q.retryFilter.retentionMs, BigInt(5 * 60_000 - 2000), "(N+1)·P - B with the defaults");
    assert.equal(q.retryFilter.clockSkewBoundMs, 2000n);
    assert.ok(q.retryFilter.estimatedFalsePositiveRate >= 0 && q.retryFilter.estimatedFalsePositiveRate < 0.001);
  });

  it("without request ids every call counts, as before", async () => {
    await incr(0, "plain", 1n);
    await incr(0, "plain", 1n);
    const r = await incr(1, "plain", 1n);
    assert.equal(r.duplicate, false);
    for (const i of [0, 1]) await eventually(`node ${i} reads 3`, () => valueOn(i, "plain"), (v) => v === 3n, 15_000);
    assert.equal((await query(0, "plain")).retryFilter, undefined);
  });

  it("refuses a too long request id, bad filter parameters and parameters other than the key's", async () => {
    await expectRefused(incr(0, "bad", 1n, "x".repeat(129)), grpc.status.RESOURCE_EXHAUSTED, /request_id has 129 bytes; the limit is 128/);
    const p = { idsPerPeriod: 0n, falsePositiveRate: 0, periodMs: 0n, pastEpochs: 0 };
    await expectRefused(incr(0, "bad", 1n, "a", { retryFilter: { ...p, falsePositiveRate: 0.7 } }), grpc.status.INVALID_ARGUMENT, /false_positive_rate/);
    await expectRefused(incr(0, "bad", 1n, "a", { retryFilter: { ...p, periodMs: 1000n } }), grpc.status.INVALID_ARGUMENT, /clock-skew bound/);
    await expectRefused(incr(0, "bad", 1n, "", { retryFilter: p }), grpc.status.INVALID_ARGUMENT, /only with a request_id/);
    await expectRefused(incr(0, "bad", 1n, "a", { retryFilter: { ...p, idsPerPeriod: 100_000_000n } }), grpc.status.RESOURCE_EXHAUSTED, /need epoch filters of \d+ bits \(\d+ bytes\), above the 16777216 bits \(2097152 bytes\) an epoch filter may have: ask for fewer ids_per_period/);
    await expectRefused(incr(0, "bad", 1n, "a", { retryFilter: { ...p, falsePositiveRate: 1e-30 } }), grpc.status.INVALID_ARGUMENT, /needs \d+ hash functions; a retry filter has at most 64/);
    await incr(0, "sized", 1n, "a", { retryFilter: { ...p, periodMs: 30_000n } });
    await expectRefused(incr(0, "sized", 1n, "b", { retryFilter: { ...p, periodMs: 45_000n } }), grpc.status.FAILED_PRECONDITION, /other parameters/);
    assert.equal((await incr(0, "sized", 1n, "b")).value, 2n, "without parameters the key's filter is used");
    assert.equal((await query(0, "sized")).retryFilter!.periodMs, 30_000n);
  });

  it("refuses a request id that is not UTF-8, naming the field", async () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).bytes(Buffer.from("k"));
    w.tag(2, WireType.Varint).uint64(2n); // sint64 1
    w.tag(3, WireType.LengthDelimited).bytes(Buffer.from([0x62, 0x80, 0xc0, 0xaf]));
    const raw = new grpc.Client(c.addresses[0]!, grpc.credentials.createInsecure());
    try {
      await assert.rejects(
        new Promise((resolve, reject) =>
          raw.makeUnaryRequest("/deltaset.v1.Replica/Increment", (b: Buffer) => b, (b: Buffer) => b, Buffer.from(w.finish()), (err, res) => (err ? reject(err) : resolve(res))),
        ),
        (e: grpc.ServiceError) => {
          assert.equal(e.code, grpc.status.INVALID_ARGUMENT, e.details);
          assert.match(e.details, /request_id is not valid UTF-8/);
          return true;
        },
      );
    } finally {
      raw.close();
    }
  });
});
