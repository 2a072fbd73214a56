// The eval's replication-lag probe (services/chaos/eval/lag-probe.ts) against real nodes: it
// follows every node by Watch, so its samples must be acknowledgement → present everywhere, its
// elements must really be on every node afterwards, a node that restarts must be followed again,
// and a node that never gets the probe key must stop it before any probe runs.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { LagProbe } from "../../services/chaos/eval/lag-probe.ts";
import { call } from "../../services/client/rpc.ts";
import { seededRandom } from "../../services/common/prng.ts";
import { eventually } from "../helpers/eventually.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-lag-probe-"));
const addresses = ["127.0.0.231:7741", "127.0.0.232:7742", "127.0.0.233:7743"];
const cluster = new TestCluster(dir, addresses, ["--gossip-interval-ms", "100", "--log-level", "warn"], "lp");
const nodes = addresses.map((address, i) => ({ nodeId: `lp${i}`, address }));

before(async () => {
  await cluster.startAll();
  // Every node holds a key written at another: gossip runs between all of them.
  await cluster.add(0, "lp-ready", ["x"]);
  for (const i of [1, 2]) await eventually(`node ${i} has the first key`, () => present(i, "lp-ready", ["x"]), (p) => p[0] === true, 20_000);
});

after(async () => {
  await cluster.close();
  rmSync(dir, { recursive: true, force: true });
});

async function present(i: number, key: string, elements: string[]): Promise<boolean[]> {
  return cluster.replica(i, async (c) => {
    const r = await call(c, c.query, { key, elements: elements.map((e) => Buffer.from(e)), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
    return r.presence.map((p) => p.present);
  });
}

describe("eval lag probe", () => {
  it("measures acknowledgement to present on every node, and its elements are everywhere", { timeout: 60_000 }, async () => {
    const probe = new LagProbe({ nodes, key: "lp-a", random: seededRandom(1), probeEveryMs: 60, tag: "a", boundMs: 10_000 });
    try {
      await probe.start();
      probe.begin();
      await new Promise((r) => setTimeout(r, 700));
      const first = await probe.stop();
      // Probing again on the same watches: the second report counts only its own probes.
      probe.begin();
      await new Promise((r) => setTimeout(r, 800));
      const second = await probe.stop();
      for (const report of [first, second]) {
        assert.equal(report.failed, 0);
        assert.equal(report.unseen, 0);
        assert.ok(report.samples.length >= 5, `${report.samples.length} samples`);
        for (const s of report.samples) assert.ok(s >= 0 && s < 10_000, `sample ${s}`);
      }
      const probes = first.samples.length + second.samples.length;
      const elements = ["a-ready", ...Array.from({ length: probes }, (_, i) => `a-${i + 1}`)];
      for (const i of [0, 1, 2]) assert.deepEqual(await present(i, "lp-a", elements), elements.map(() => true), `node ${i}`);
    } finally {
      probe.close();
    }
  });

  it("follows a node again after it restarts, and sees what reached it meanwhile", { timeout: 90_000 }, async () => {
    const probe = new LagProbe({ nodes, key: "lp-b", random: seededRandom(2), probeEveryMs: 80, tag: "b", boundMs: 20_000 });
    try {
      await probe.start();
      probe.begin();
      await new Promise((r) => setTimeout(r, 400));
      await cluster.kill(2);
      await new Promise((r) => setTimeout(r, 500));
      await cluster.start(2);
      await new Promise((r) => setTimeout(r, 1500));
      const report = await probe.stop();
      assert.ok(probe.reopened >= 1, "the watch of the restarted node was opened again");
      // Probes that went to the dead node failed; every acknowledged one reached all three.
      assert.equal(report.unseen, 0);
      assert.ok(report.samples.length >= 10, `${report.samples.length} samples`);
    } finally {
      probe.close();
    }
  });

  it("refuses to start when a node never reports the probe key", { timeout: 60_000 }, async () => {
    // A node of no cluster: nothing written elsewhere ever reaches it.
    const lone = await startNodeProcess(["--listen", "127.0.0.234:7744", "--node-id", "lp-lone", "--data-dir", join(dir, "lone"), "--log-level", "warn"]);
    const probe = new LagProbe({ nodes: [nodes[0]!, { nodeId: "lp-lone", address: "127.0.0.234:7744" }], key: "lp-c", random: seededRandom(3), probeEveryMs: 50, tag: "c", readyBoundMs: 1500 });
    try {
      await assert.rejects(probe.start(), /not every node's watch of "lp-c" reported the marker/);
    } finally {
      probe.close();
      await lone.kill();
    }
  });
});
