// Nodes started with --peer-proxy dial every peer through a per-link proxy, for gossip and for
// membership alike: cutting one node's links makes the others detect it as failed and stops
// replication to it; healing brings both back. Client traffic stays direct throughout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { Toxiproxy } from "toxiproxy-node-client";
import { MemberState, MembershipClient } from "../../services/gen/deltaset/v1/membership.js";
import { ReplicaClient } from "../../services/gen/deltaset/v1/replica.js";
import { call } from "../../services/client/rpc.js";
import { startToxiproxyServer } from "../../services/chaos/proxy/index.js";
import { LinkTable, precreateLinkProxies } from "../../services/chaos/links.js";
import { between } from "../../services/chaos/plan.js";
import { LocalCluster } from "../../services/chaos/local-cluster.js";
import { CHAOS_NODE_ARGS } from "../../services/chaos/run.js";

async function waitFor(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > until) assert.fail(`${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stateOf(address: string, nodeId: string): Promise<MemberState | undefined> {
  const c = new MembershipClient(address, grpc.credentials.createInsecure());
  try {
    const reply = await call(c, c.members, { includeDeparted: true }, { timeoutMs: 2000 });
    return reply.members.find((m) => m.nodeId === nodeId)?.state;
  } finally {
    c.close();
  }
}

async function has(address: string, element: string): Promise<boolean> {
  const c = new ReplicaClient(address, grpc.credentials.createInsecure());
  try {
    const res = await call(c, c.query, { key: "k", elements: [], texts: [element], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 2000 });
    return res.presence[0]?.present === true;
  } finally {
    c.close();
  }
}

async function add(address: string, element: string): Promise<void> {
  const c = new ReplicaClient(address, grpc.credentials.createInsecure());
  try {
    await call(c, c.add, { key: "k", elements: [], texts: [element] }, { timeoutMs: 2000 });
  } finally {
    c.close();
  }
}

test("peer links go through per-link proxies: cutting them is seen by membership and gossip", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-peer-proxy-"));
  const server = await startToxiproxyServer({ port: 0 });
  const cluster = new LocalCluster({ nodes: 3, dir, firstHost: 126, port: 7070, nodeArgs: [...CHAOS_NODE_ARGS, "--peer-proxy", server.url] });
  try {
    const nodes = cluster.specs.map((s) => ({ nodeId: s.nodeId, address: s.address, toxiproxy: server.url }));
    await precreateLinkProxies(nodes);
    await cluster.startAll();
    const [a1, a2, a3] = nodes.map((n) => n.address) as [string, string, string];
    await waitFor("n1 sees n3 alive", 15_000, async () => (await stateOf(a1, "n3")) === MemberState.ALIVE);
    await add(a1, "before");
    await waitFor("n3 gets an add made at n1", 5000, () => has(a3, "before"));

    // Exactly one proxy per directed link, named by node ids, each upstream the peer's address.
    const all = await new Toxiproxy(server.url).getAll();
    assert.deepEqual(Object.keys(all).sort(), ["n1-to-n2", "n1-to-n3", "n2-to-n1", "n2-to-n3", "n3-to-n1", "n3-to-n2"]);
    assert.equal(all["n1-to-n3"]!.upstream, a3);

    const links = new LinkTable(nodes);
    assert.equal(await links.cut(between(["n3"], ["n1", "n2"])), 4);
    await waitFor("n1 stops seeing n3 alive", 10_000, async () => (await stateOf(a1, "n3")) !== MemberState.ALIVE);
    await waitFor("n2 stops seeing n3 alive", 10_000, async () => (await stateOf(a2, "n3")) !== MemberState.ALIVE);
    await add(a1, "during");
    await waitFor("n2 still replicates with n1", 5000, () => has(a2, "during"));
    // Ten gossip rounds later the cut-off node still has not got it.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await has(a3, "during"), false, "nothing reaches the cut-off node");
    assert.equal(await has(a3, "before"), true, "clients still reach it directly");

    await links.heal();
    await waitFor("n3 gets what it missed", 15_000, () => has(a3, "during"));
    await waitFor("n1 sees n3 alive again", 15_000, async () => (await stateOf(a1, "n3")) === MemberState.ALIVE);
  } finally {
    await cluster.stopAll();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
