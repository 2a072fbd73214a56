// A node stopped gracefully (SIGTERM) ships what it acknowledged before it leaves: on three real
// node processes gossiping only every 3 s, a write acknowledged by one node just before its
// SIGTERM reaches the two others though the node is gone (the node ends its client calls, then
// gossips until a neighbour acknowledged each partition it changed, then leaves). It exits well
// within its drain and leave bounds, its long-lived peer streams holding nothing up. With
// placement at R = 1 it is the only holder of the partitions it owns: it gives them to the nodes
// that own them once it is gone, so nothing it acknowledged is missing from their answers.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-leave-ships-"));
const FLAGS = ["--gossip-interval-ms", "3000", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--gossip-algorithm", "alg2"];
const c = new TestCluster(dir, [71, 72, 73].map((i) => `127.0.5.${i}:7841`), FLAGS, "l");
const single = new TestCluster(dir, [74, 75, 76].map((i) => `127.0.5.${i}:7841`), [...FLAGS, "--replication-factor", "1"], "r1");
// Gossip every 100 ms: the next owners run their hand-off every period, its grace (2 s) long past.
const settled = new TestCluster(dir, [77, 78, 79].map((i) => `127.0.5.${i}:7841`), ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--replication-factor", "1"], "r1s");

before(async () => {
  await c.startAll();
  await c.add(1, "warm", ["w"]);
  await c.converged("warm", [0, 1, 2], ["w"], 30_000);
});
after(async () => {
  await c.close();
  await single.close();
  await settled.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a node that leaves", () => {
  it("ships the writes it acknowledged last to a neighbour before it goes", async () => {
    await c.add(0, "tail", ["acked-just-before-sigterm"]);
    const node = c.nodes.get(0)!;
    const started = Date.now();
    const code = await node.stop();
    const ms = Date.now() - started;
    assert.equal(code, 0);
    assert.ok(ms < 15_000, `the node took ${ms} ms to stop`);
    assert.match(node.logs(), /changes shipped to neighbours before leaving/);
    await eventually("both others hold the write", async () => Promise.all([c.read(1, "tail"), c.read(2, "tail")]), (v) => v.every((els) => els.includes("acked-just-before-sigterm")), 15_000);
  });
});

describe("a node that leaves a cluster with R = 1", () => {
  it("gives the partitions only it holds to their next owners before it goes", async () => {
    await single.startAll();
    // 30 keys written through node 0: it owns about a third of them, alone; the rest it forwards.
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
    for (const key of keys) await single.add(0, key, [`${key}-a`, `${key}-b`]);
    const node = single.nodes.get(0)!;
    assert.equal(await node.stop(), 0);
    assert.match(node.logs(), /changes shipped to neighbours before leaving/);
    for (const i of [1, 2]) {
      await eventually(`node ${i} answers every acknowledged element`, async () => Promise.all(keys.map((key) => single.read(i, key))), (v) => v.every((els, k) => els.includes(`${keys[k]}-a`) && els.includes(`${keys[k]}-b`)), 15_000);
    }
  });

  it("keeps what it gave them: a next owner does not hand a partition back to the owner that is leaving", async () => {
    // In a next owner's view the leaving node still owns the partition and has acknowledged all of
    // it, so its hand-off used to drop the copy it had just taken, a few ms before the node left
    // with the only other one: whole keys then read empty on every live node.
    await settled.startAll();
    await new Promise((r) => setTimeout(r, 3000)); // placement stable past the hand-off grace
    const keys = Array.from({ length: 60 }, (_, i) => `s${i}`);
    for (const key of keys) await settled.add(1, key, [`${key}-a`, `${key}-b`]);
    await new Promise((r) => setTimeout(r, 1000));
    const node = settled.nodes.get(0)!;
    assert.equal(await node.stop(), 0);
    const missing = async () => {
      const out: string[] = [];
      for (const i of [1, 2]) for (const key of keys) if ((await settled.read(i, key)).length !== 2) out.push(`${i}:${key}`);
      return out;
    };
    await eventually("every key complete on both live nodes", missing, (m) => m.length === 0, 15_000);
    // And it stays so: nothing is dropped later.
    await new Promise((r) => setTimeout(r, 3000));
    assert.deepEqual(await missing(), []);
  });
});
