// A deferred remove survives a change of owner on a cluster that authenticates everything: client
// bearer tokens (--auth-tokens-file) and peer proofs (--cluster-key-file). Real node processes,
// --replication-factor 1: a Remove taken by the key's owner waits there for an add it has not seen;
// then a node joins and becomes the key's owner. The old owner hands the remove over (Gossip
// HandOver, signed with the cluster key: the client's token is long gone), the new owner keeps it
// pending, the old owner forgets it and drops the key, and when the add finally reaches the new
// owner it is removed on arrival. The test reads every node only through its own API, with tokens.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, AWSetLattice, ObjectType, contextToProto } from "../../services/crdt/index.ts";
import type { QueryResponse } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { ownersOf } from "../../services/gossip/placement.ts";
import { type ClusterKeyring, generateClusterKey, loadClusterKeys } from "../../services/node/cluster-keys.ts";
import { proveMarks } from "../../services/node/forward-marks.ts";
import { FORWARDED_BY } from "../../services/node/routing.ts";
import { READ_PULL } from "../../services/node/read-pull.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-hand-over-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const TOKEN = "hand-over-admin-token";
const P = 16;
const IDS = ["h0", "h1", "h2"];

/** A key owned by h0 while h0 and h1 are the members, and by h2 once h2 joins. */
function movingKey(): string {
  for (let i = 0; ; i++) {
    const key = `moving-${i}`;
    const p = partitionOf(key, P);
    if (ownersOf(p, IDS.slice(0, 2), 1)[0] === "h0" && ownersOf(p, IDS, 1)[0] === "h2") return key;
  }
}

/** The cluster key the nodes hold: the marks below count only when proven with it. */
let clusterKeys: ClusterKeyring | undefined;

function metadata(local: boolean): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${TOKEN}`);
  // Marked forwarded, as a node marks its calls (forward-marks.ts): the node answers from its own
  // store, whatever it owns.
  if (local) {
    md.set(FORWARDED_BY, "test");
    md.set(READ_PULL, "2");
    proveMarks(md, "/deltaset.v1.Replica/Query", "test", clusterKeys!, Date.now());
  }
  return md;
}

/** Query of key at node i, served from that node's own store. */
async function localQuery(c: TestCluster, i: number, key: string, elements: string[] = []): Promise<QueryResponse> {
  const r = replicaClient(c.addresses[i]!);
  try {
    return await call(r, r.query, { key, elements: elements.map((e) => Buffer.from(e)), texts: [], pageSize: 100, pageToken: Buffer.alloc(0), withText: false }, { metadata: metadata(true), timeoutMs: 5000 });
  } finally {
    r.close();
  }
}

async function ownerAt(c: TestCluster, i: number, key: string): Promise<string[]> {
  const r = replicaClient(c.addresses[i]!);
  try {
    return (await call(r, r.owners, { key }, { metadata: metadata(false), timeoutMs: 5000 })).owners.map((o) => o.nodeId);
  } finally {
    r.close();
  }
}

describe("a deferred remove handed over to a new owner (tokens and cluster key on)", () => {
  it("the new owner takes it by the peer-authenticated HandOver and removes the add when it arrives", async () => {
    const tokens = join(dir, "tokens");
    const keyFile = join(dir, "cluster.key");
    writeFileSync(tokens, `admin ${TOKEN}\n`, { mode: 0o600 });
    writeFileSync(keyFile, `${generateClusterKey()}\n`, { mode: 0o600 });
    clusterKeys = loadClusterKeys(keyFile);
    const flags = [
      "--replication-factor", "1", "--partitions", String(P), "--auth-tokens-file", tokens, "--cluster-key-file", keyFile,
      "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150",
    ];
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.6.${i}:7811`), flags, "h");
    const key = movingKey();
    // The add the remove waits for: minted elsewhere (another replica id), not delivered yet.
    const late = AWSet.bottom().add("elsewhere", [Buffer.from("x"), Buffer.from("y")]);
    const xOnly = AWSet.bottom().add("elsewhere", [Buffer.from("x")]);
    try {
      await Promise.all([c.start(0), c.start(1)]);
      await eventually("h0 and h1 both place the key on h0", async () => Promise.all([0, 1].map((i) => ownerAt(c, i, key))), (v) => v.every((o) => o.join() === "h0"));
      // Remove x with a context naming its dot (elsewhere:1), which h0 has not seen: it waits on h0.
      const r = replicaClient(c.addresses[0]!);
      try {
        const res = await call(r, r.remove, { key, elements: [Buffer.from("x")], texts: [], context: contextToProto(xOnly.ctx) }, { metadata: metadata(false), timeoutMs: 5000 });
        assert.equal(res.pending, 1, "the remove waits on h0 for the add it covers");
      } finally {
        r.close();
      }
      assert.equal((await localQuery(c, 0, key)).pendingRemoves, 1);

      // h2 joins and becomes the key's owner: h0 hands the remove over, then drops the key.
      await c.start(2);
      await eventually("every node places the key on h2", async () => Promise.all([0, 1, 2].map((i) => ownerAt(c, i, key))), (v) => v.every((o) => o.join() === "h2"));
      await eventually(
        "the remove waits on h2 and no longer on h0",
        async () => ({ h2: (await localQuery(c, 2, key)).pendingRemoves, h0: (await localQuery(c, 0, key)).pendingRemoves }),
        (s) => s.h2 === 1 && s.h0 === 0,
        20_000,
        () => c.dumpLogs(),
      );
      assert.ok(!c.nodes.get(2)!.logs().includes("UNAUTHENTICATED") && !c.nodes.get(0)!.logs().includes("peer call refused"), "no call of the hand-over was refused");

      // The add reaches the new owner at last (an operator's Merge, with the admin token): x is
      // removed on arrival, y (which the remove did not cover) stays.
      const m = replicaClient(c.addresses[2]!);
      try {
        await call(m, m.merge, { key, state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(late)) } }, { metadata: metadata(false), timeoutMs: 5000 });
      } finally {
        m.close();
      }
      const after = await localQuery(c, 2, key, ["x", "y"]);
      assert.deepEqual(after.presence.map((p) => p.present), [false, true], "x removed on arrival, y kept");
      assert.equal(after.pendingRemoves, 0);
    } finally {
      await c.close();
    }
  });
});
