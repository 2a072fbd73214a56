// A node whose seeds refuse its cluster key (UNAUTHENTICATED) does not serve clients alone: on
// real node processes, a node started with a key its seed does not hold answers client calls
// UNAVAILABLE naming the refusal and its health says NOT_SERVING, while the seed serves; once its
// key file holds the cluster's key and is reloaded (SIGHUP) it joins, serves, and what it takes
// reaches the seed. Its health name "liveness" says SERVING throughout (liveness probes ask it). A
// node whose seed does not answer at all still serves alone (the first node of a cluster whose
// other seeds are not up yet).
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { generateClusterKey } from "../../services/node/cluster-keys.ts";
import { eventually } from "../helpers/eventually.ts";
import { statusOf } from "../helpers/grpc-status.ts";
import { aliveIds } from "../helpers/members.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-key-refused-"));
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--drain-timeout-ms", "1000", "--leave-timeout-ms", "1000"];
const nodes: NodeProcess[] = [];

after(async () => {
  await Promise.all(nodes.map((n) => n.kill()));
  rmSync(dir, { recursive: true, force: true });
});

function keyFile(name: string, key: string): string {
  const path = join(dir, `${name}.key`);
  writeFileSync(path, `${key}\n`, { mode: 0o600 });
  return path;
}

/** A health status of the node (grpc.health.v1; service "" by default, the node serving clients): 1 SERVING, 2 NOT_SERVING. */
async function healthOf(address: string, service = ""): Promise<number> {
  const c = new grpc.Client(address, grpc.credentials.createInsecure());
  // HealthCheckRequest { service = 1 }.
  const request = service === "" ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a, service.length]), Buffer.from(service)]);
  try {
    const reply = await new Promise<Buffer>((resolve, reject) =>
      c.makeUnaryRequest("/grpc.health.v1.Health/Check", (b: Buffer) => b, (b: Buffer) => b, request, (err, r) => (err ? reject(err) : resolve(r!))),
    );
    // HealthCheckResponse { status = 1 }: an empty message is UNKNOWN (0).
    return reply.length === 2 && reply[0] === 0x08 ? reply[1]! : 0;
  } finally {
    c.close();
  }
}

async function add(address: string, element: string) {
  const r = replicaClient(address);
  try {
    return await statusOf(call(r, r.add, { key: "k", elements: [], texts: [element] }, { timeoutMs: 5000 }));
  } finally {
    r.close();
  }
}

async function members(address: string): Promise<string[]> {
  const r = replicaClient(address);
  try {
    const q = await call(r, r.query, { key: "k", elements: [], texts: [], pageSize: 1000, pageToken: Buffer.alloc(0), withText: true }, { timeoutMs: 5000 });
    return q.members.map((m) => m.text).sort();
  } finally {
    r.close();
  }
}

async function start(args: string[]): Promise<NodeProcess> {
  const n = await startNodeProcess([...args, ...FAST]);
  nodes.push(n);
  return n;
}

describe("a node refused for its cluster key (real processes)", () => {
  it("holds client calls while refused, and serves once its key is fixed and reloaded", { timeout: 90_000 }, async () => {
    const clusterKey = generateClusterKey();
    const a = await start(["--listen", "127.0.26.1:0", "--node-id", "ka", "--data-dir", join(dir, "ka"), "--cluster-key-file", keyFile("a", clusterKey)]);
    const bKey = keyFile("b", generateClusterKey());
    const METRICS = "127.0.26.2:9426";
    const b = await start(["--listen", "127.0.26.2:0", "--node-id", "kb", "--data-dir", join(dir, "kb"), "--seeds", a.address, "--cluster-key-file", bKey, "--metrics-listen", METRICS]);
    const refusedGauge = async () => Number(/^deltaset_membership_refused_as_peer (\d+)/m.exec(await (await fetch(`http://${METRICS}/metrics`)).text())?.[1]);

    await eventually("kb says its seeds refuse its key", async () => b.logs(), (l) => /not in a cluster: its seeds refuse it as a peer: its cluster key or node certificate is not the cluster's \(127\.0\.26\.1:\d+: UNAUTHENTICATED/.test(l), 15_000);
    const refused = await add(b.address, "on-b-while-refused");
    assert.equal(refused.code, grpc.status.UNAVAILABLE, refused.details);
    assert.match(refused.details, /this node is in no cluster: its seeds refuse it as a peer: its cluster key or node certificate is not the cluster's .*UNAUTHENTICATED.*it answers no client call until it joins/);
    assert.equal(await healthOf(b.address), 2, "NOT_SERVING while refused");
    // Alive all the same: a liveness probe must not restart a node a restart would not mend.
    assert.equal(await healthOf(b.address, "liveness"), 1, "liveness SERVING while refused");
    // An alert can watch for it too.
    assert.equal(await refusedGauge(), 1);
    // The seed itself serves: it is not the one refused.
    assert.equal((await add(a.address, "on-a")).code, 0);
    assert.equal(await healthOf(a.address), 1);
    assert.deepEqual(await aliveIds(a.address), ["ka"]);

    // The cluster's key, reloaded without a restart: it joins and serves, and its write spreads.
    writeFileSync(bKey, `${clusterKey}\n`, { mode: 0o600 });
    b.child.kill("SIGHUP");
    await eventually("kb serves clients", async () => (await add(b.address, "on-b")).code, (c) => c === 0, 20_000);
    assert.equal(await healthOf(b.address), 1);
    assert.match(b.logs(), /no longer refused as a peer: serving clients/);
    assert.equal(await refusedGauge(), 0);
    await eventually("ka and kb both alive at ka", async () => aliveIds(a.address), (ids) => ids.join() === "ka,kb", 15_000);
    await eventually("kb's write reached ka", async () => members(a.address), (m) => m.join() === "on-a,on-b", 15_000);
    // ka's write reaches kb by its own gossip, not necessarily by the time kb's reached ka.
    await eventually("ka's write reached kb", async () => members(b.address), (m) => m.includes("on-a"), 15_000);
    // Nothing of the refused call was written anywhere.
    assert.deepEqual(await members(b.address), ["on-a", "on-b"]);
    assert.deepEqual(await members(a.address), ["on-a", "on-b"]);
  });

  it("serves alone when its seed does not answer at all", { timeout: 60_000 }, async () => {
    // 127.0.26.9: nothing listens there.
    const c = await start(["--listen", "127.0.26.3:0", "--node-id", "kc", "--data-dir", join(dir, "kc"), "--seeds", "127.0.26.9:7999", "--cluster-key-file", keyFile("c", generateClusterKey())]);
    assert.equal((await add(c.address, "alone")).code, 0);
    assert.equal(await healthOf(c.address), 1);
    assert.doesNotMatch(c.logs(), /refuse it as a peer/);
  });
});
