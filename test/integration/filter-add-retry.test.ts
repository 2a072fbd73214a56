// An Add to a filter key with a request id is applied once, however often and through whichever
// node it is retried (AddRequest.request_id): a cuckoo filter stores one more copy per Add, so
// without the id a retried Add takes two Removes to go. Two real nodes at R = 1 (so one of them
// forwards to the key's owner) and a three-node cluster at full replication (a retry reaching a
// node that took the first try's delta by gossip). The node's checks of ids and their filter's
// parameters, and the CLI's --request-id, on the same nodes.
import { strict as assert } from "node:assert";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { ObjectType } from "../../services/crdt/index.ts";
import { Ownership } from "../../services/gossip/ownership.ts";
import { eventually } from "../helpers/eventually.ts";
import { keyWhere, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { filterCalls } from "../helpers/filter-calls.ts";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "deltaset-filter-retry-"));
const PARTITIONS = 16;
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "200", "--partitions", String(PARTITIONS), "--log-level", "warn"];
let placed: TestCluster;
let full: TestCluster;

before(async () => {
  placed = new TestCluster(dir, ["127.0.17.1:7171", "127.0.17.2:7172"], [...FAST, "--replication-factor", "1"], "fr");
  full = new TestCluster(dir, ["127.0.17.3:7173", "127.0.17.4:7174", "127.0.17.5:7175"], FAST, "ff");
  await Promise.all([placed.startAll(), full.startAll()]);
});
after(async () => {
  await Promise.all([placed.close(), full.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const x = Buffer.from("x");
const addWithId = (c: TestCluster, i: number, key: string, requestId: string, type = ObjectType.ORCF) =>
  c.replica(i, (r) => call(r, r.add, { key, elements: [x], texts: [], type, requestId }));
const present = async (c: TestCluster, i: number, key: string) => (await filterCalls(c).query(i, key, ["x"])).presence[0]?.present === true;

describe("an Add to a filter key with a request id", () => {
  it("retried through the non-owner and the owner is applied once: one Remove takes the element", { timeout: 60_000 }, async () => {
    const two = new Ownership("fr0", "a", PARTITIONS, 1);
    two.setLive(new Map([["fr1", "b"]]));
    const key = keyWhere((p) => two.ownersOf(p)[0] === "fr0", "fr-orcf-", PARTITIONS);
    await eventually("both nodes place the key on fr0", async () => Promise.all([0, 1].map((i) => ownersAt(placed, i, key))), (v) => v.every((o) => o.join() === "fr0"), 20_000);
    const first = await addWithId(placed, 1, key, "client-7:1");
    assert.deepEqual([first.added, first.duplicate], [1, false]);
    for (const i of [1, 0]) {
      const retry = await addWithId(placed, i, key, "client-7:1");
      assert.deepEqual([retry.added, retry.duplicate], [0, true], `the retry through node ${i} is a duplicate`);
    }
    const q = await filterCalls(placed).query(1, key, ["x"]);
    assert.equal(q.retryFilter?.periodMs, 60_000n, "Query reports the key's retry filter");
    assert.ok(q.retryFilter!.retentionMs > 0n);
    const removed = await filterCalls(placed).remove(1, key, ["x"]);
    assert.equal(removed.removed, 1);
    assert.equal(await present(placed, 0, key), false, "one Remove took the only copy");
  });

  it("is a duplicate at a node that took the first try by gossip; without ids the same Adds leave a copy after one Remove", { timeout: 60_000 }, async () => {
    const f = filterCalls(full);
    assert.equal((await addWithId(full, 0, "ff-orcf", "c:1")).duplicate, false);
    await eventually("the add at node 2", () => present(full, 2, "ff-orcf"), (p) => p, 15_000);
    assert.equal((await addWithId(full, 2, "ff-orcf", "c:1")).duplicate, true);
    await f.remove(2, "ff-orcf", ["x"]);
    await eventually("the remove everywhere", async () => Promise.all([0, 1, 2].map((i) => present(full, i, "ff-orcf"))), (p) => p.every((v) => !v), 15_000);

    // The control: the same two Adds without an id store two copies.
    await f.add(0, "ff-plain", ["x"], ObjectType.ORCF);
    await eventually("the add at node 2", () => present(full, 2, "ff-plain"), (p) => p, 15_000);
    await f.add(2, "ff-plain", ["x"], ObjectType.ORCF);
    await f.remove(2, "ff-plain", ["x"]);
    assert.equal(await present(full, 2, "ff-plain"), true, "a copy is left");
  });

  it("is checked: too long an id, or retry_filter without an id, is refused; a set takes an id and records nothing", { timeout: 30_000 }, async () => {
    const refused = async (req: object) =>
      full.replica(0, (r) => call(r, r.add, { key: "ff-check", elements: [x], texts: [], type: ObjectType.GCF, ...req })).then(
        () => assert.fail("accepted"),
        (e: grpc.ServiceError) => e.code,
      );
    assert.equal(await refused({ requestId: "r".repeat(129) }), grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(await refused({ retryFilter: { idsPerPeriod: 10n, falsePositiveRate: 0, periodMs: 0n, pastEpochs: 0 } }), grpc.status.INVALID_ARGUMENT);
    assert.equal(await refused({ requestId: "p:1", retryFilter: { idsPerPeriod: 10n, falsePositiveRate: 0, periodMs: 1n, pastEpochs: 0 } }), grpc.status.INVALID_ARGUMENT);
    for (let n = 0; n < 2; n++) {
      const set = await addWithId(full, 0, "ff-set", "s:1", ObjectType.AWSET);
      assert.equal(set.duplicate, false, "an AWSET key records no ids");
    }
  });

  it("from the CLI: --request-id, and the second call says it was applied before", { timeout: 30_000 }, async () => {
    const cli = (...args: string[]) => run(process.execPath, ["bin/deltaset.mjs", "add", "ff-cli", "y", "--type", "gcf", "--request-id", "cli:1", "--addr", full.addresses[1]!, ...args]);
    assert.match((await cli()).stdout, /added 1 new element/);
    assert.match((await cli()).stdout, /request cli:1 was applied to "ff-cli" before: not added again/);
    assert.equal(JSON.parse((await cli("--json")).stdout).duplicate, true);
  });
});
