// Every synchronization mode runs in real node processes: Algorithm 1 (transitive and not, with a
// periodic full state), Algorithm 1 shipping only full states, Algorithm 2 without BP and RR, and
// Algorithm 2 with both. Three nodes per mode, 30% of gossip sends dropped (seeded), adds on every
// node and a Remove with a context read on another node; all nodes must end up reading the same.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { strict as assert } from "node:assert";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { membershipConverged } from "../../services/chaos/run.ts";
import { call } from "../../services/client/rpc.ts";
import { MemberState, MembershipClient } from "../../services/gen/deltaset/v1/membership.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-modes-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--gossip-loss-rate", "0.3", "--partitions", "8"];
const MODES: Array<{ name: string; flags: string[] }> = [
  { name: "alg1-transitive", flags: ["--gossip-algorithm", "alg1", "--gossip-transitive", "true", "--gossip-choose", "delta+periodic-state"] },
  { name: "alg1-direct", flags: ["--gossip-algorithm", "alg1", "--gossip-transitive", "false", "--gossip-choose", "delta+periodic-state"] },
  { name: "full-state", flags: ["--gossip-algorithm", "alg1", "--gossip-choose", "state"] },
  { name: "alg2-plain", flags: ["--gossip-algorithm", "alg2", "--gossip-bp", "false", "--gossip-rr", "false"] },
  { name: "alg2-bp-rr", flags: ["--gossip-algorithm", "alg2", "--gossip-bp", "true", "--gossip-rr", "true"] },
];

describe("sync modes in real 3-node clusters under 30% gossip loss", () => {
  MODES.forEach((mode, m) => {
    it(`${mode.name} converges`, async () => {
      const addrs = [1, 2, 3].map((i) => `127.0.0.${90 + m}:${7500 + i}`);
      const c = new TestCluster(dir, addrs, [...FAST, ...mode.flags, "--gossip-loss-seed", String(m + 1)], mode.name);
      try {
        await c.startAll();
        const keys = ["fruit", "veg", "nuts", "grain"];
        for (const [k, key] of keys.entries()) {
          for (let i = 0; i < 3; i++) await c.add(i, key, [`${key}-${i}-a`, `${key}-${i}-b`]);
          await c.add((k + 1) % 3, key, [`${key}-shared`]);
        }
        // A Remove with a context read on the first node, sent at once to the third, which has
        // probably not received "late" yet (then the remove waits there for it).
        await c.add(0, "fruit", ["late"]);
        const ctx = await c.context(0, "fruit");
        await c.remove(2, "fruit", ["late", "fruit-0-a"], ctx);
        for (const key of keys) {
          const want = [0, 1, 2].flatMap((i) => [`${key}-${i}-a`, `${key}-${i}-b`]).concat(`${key}-shared`);
          await c.converged(key, [0, 1, 2], key === "fruit" ? want.filter((e) => e !== "fruit-0-a") : want);
        }
      } finally {
        await c.close();
      }
    });
  });
});

/** Wait until every node lists all three as ALIVE (gossip neighbours follow membership). */
async function membersAlive(c: TestCluster, addrs: string[]): Promise<void> {
  const nodes = addrs.map((address, i) => ({ nodeId: `${c.name}${i}`, address }));
  const until = Date.now() + 20_000;
  while (!(await membershipConverged(nodes, nodes.map((n) => n.nodeId)))) {
    assert.ok(Date.now() < until, "membership did not converge within 20 s");
    await new Promise((r) => setTimeout(r, 100));
  }
}

// A period of 10 minutes: within these tests' bounds only pushes can carry the adds.
const PERIOD_10_MIN = ["--gossip-interval-ms", "600000", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--partitions", "8"];
const PUSH = [...PERIOD_10_MIN, "--gossip-push-local-ms", "5"];

/** Three nodes on 127.0.0.89 from port base+1, every member alive, then body; closed after. */
async function withCluster(name: string, base: number, flags: string[], body: (c: TestCluster) => Promise<void>): Promise<void> {
  const addrs = [1, 2, 3].map((i) => `127.0.0.89:${base + i}`);
  const c = new TestCluster(dir, addrs, flags, name);
  try {
    await c.startAll();
    await membersAlive(c, addrs);
    await body(c);
  } finally {
    await c.close();
  }
}

describe("Algorithm 2 with --gossip-push-local-ms", () => {
  it("a local change reaches every neighbour without waiting for the period", () =>
    withCluster("push", 7560, PUSH, async (c) => {
      await c.add(0, "pushed", ["a", "b"]);
      await c.add(2, "pushed", ["c"]);
      await c.converged("pushed", [0, 1, 2], ["a", "b", "c"], 15_000);
    }));

  it("a neighbour that was down when a change was made gets it once it is back, not a period later", () =>
    withCluster("away", 7580, PUSH, async (c) => {
      await c.kill(1);
      // Node 0 declares it dead, so it is no neighbour when the change is made and pushed.
      const until = Date.now() + 20_000;
      while (await liveIn(c.addresses[0]!, "away1")) {
        assert.ok(Date.now() < until, "node 0 did not declare the killed node dead within 20 s");
        await new Promise((r) => setTimeout(r, 100));
      }
      await c.add(0, "away", ["x", "y"]);
      await c.converged("away", [0, 2], ["x", "y"], 15_000);
      await c.start(1);
      await c.converged("away", [0, 1, 2], ["x", "y"], 15_000);
    }));

  it("a push whose call failed goes again once the neighbour answers, not a period later", () =>
    // Suspicion outlasts the test: the killed node stays a neighbour, and the push to it fails.
    withCluster("fail", 7590, [...PUSH, "--suspicion-mult", "200"], async (c) => {
      await c.kill(1);
      await c.add(0, "failed", ["x", "y"]);
      await c.converged("failed", [0, 2], ["x", "y"], 15_000);
      assert.ok(await liveIn(c.addresses[0]!, "fail1"), "the killed node is still a neighbour of node 0");
      await c.start(1);
      await c.converged("failed", [0, 1, 2], ["x", "y"], 15_000);
    }));

  it("without it, the same cluster does not spread them before the period", () =>
    withCluster("no-push", 7570, PERIOD_10_MIN, async (c) => {
      await c.add(0, "pushed", ["a", "b"]);
      await new Promise((r) => setTimeout(r, 3000));
      assert.deepEqual(await c.read(1, "pushed"), []);
      assert.deepEqual(await c.read(2, "pushed"), []);
    }));
});

/** Whether the node at address lists nodeId as ALIVE or SUSPECT. */
async function liveIn(address: string, nodeId: string): Promise<boolean> {
  const c = new MembershipClient(address, grpc.credentials.createInsecure());
  try {
    const reply = await call(c, c.members, { includeDeparted: false }, { timeoutMs: 2000 });
    return reply.members.some((m) => m.nodeId === nodeId && (m.state === MemberState.ALIVE || m.state === MemberState.SUSPECT));
  } finally {
    c.close();
  }
}
