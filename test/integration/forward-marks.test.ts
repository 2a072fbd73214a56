// A client cannot mark its own call as forwarded (node/forward-marks.ts). Two real nodes with a
// cluster key at R = 1: a retry-safe Increment applied by the key's owner is retried through the
// other node with `x-deltaset-forwarded-by` set by the client. The mark is dropped, the call goes
// to the owner, and the retry is answered as a duplicate: the counter stays at 5. Before, the
// non-owner served the call from its own copy, which had none of the ids, applied it again and
// handed it to the owner: 10 for good (outside check audit-24 S1). A read so marked is answered by
// the owner too, not from the non-owner's empty copy.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { generateClusterKey } from "../../services/node/cluster-keys.ts";
import { FORWARDED_BY } from "../../services/node/routing.ts";
import { Ownership } from "../../services/gossip/ownership.ts";
import { eventually } from "../helpers/eventually.ts";
import { keyWhere, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-forward-marks-"));
const keyFile = join(dir, "cluster.key");
const PARTITIONS = 16;
let c: TestCluster;

before(async () => {
  writeFileSync(keyFile, `${generateClusterKey()}\n`, { mode: 0o600 });
  c = new TestCluster(dir, ["127.0.15.1:7151", "127.0.15.2:7152"], ["--cluster-key-file", keyFile, "--replication-factor", "1", "--partitions", String(PARTITIONS), "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "200", "--log-level", "warn"], "fm");
  await c.startAll();
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const marked = () => {
  const md = new grpc.Metadata();
  md.set(FORWARDED_BY, "fm0");
  return md;
};

describe("a forwarding mark set by a client", () => {
  it("is dropped: a retried Increment through a non-owner is a duplicate, and a read goes to the owner", { timeout: 60_000 }, async () => {
    const two = new Ownership("fm0", "a", PARTITIONS, 1);
    two.setLive(new Map([["fm1", "b"]]));
    const key = keyWhere((p) => two.ownersOf(p)[0] === "fm0", "fm-count-", PARTITIONS);
    await eventually("both nodes place the key on fm0", async () => Promise.all([0, 1].map((i) => ownersAt(c, i, key))), (v) => v.every((o) => o.join() === "fm0"), 20_000);
    const inc = { key, amount: 5n, requestId: "order-1", retryFilter: undefined };
    const first = await c.replica(0, (r) => call(r, r.increment, inc));
    assert.equal(first.value, 5n);
    const retry = await c.replica(1, (r) => call(r, r.increment, inc, { metadata: marked() }));
    assert.equal(retry.duplicate, true, "the retry is answered as a duplicate");
    const read = await c.replica(1, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { metadata: marked() }));
    assert.equal(read.counterValue, 5n, "the marked read was answered by the owner");
    // Nothing applied twice reaches the owner later by hand-off.
    await new Promise((r) => setTimeout(r, 1500));
    const owner = await c.replica(0, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));
    assert.equal(owner.counterValue, 5n);
  });
});
