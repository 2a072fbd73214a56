// A node started with another --cluster name than the cluster it is pointed at is refused as one
// whose --partitions differs is (cluster-settings.test.ts), on real node processes (2 members of
// cluster "blue"):
//  - a node of cluster "green" seeded with the members has its Join refused naming --cluster and
//    both names, is never listed ALIVE, and exits with status 2 saying why (not "serves alone");
//  - two nodes alone of different clusters, each refusing the other, both keep running and say why.
import { strict as assert } from "node:assert";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { eventually } from "../helpers/eventually.ts";
import { BIN, type NodeProcess, REPO, startNodesTogether } from "../helpers/node-process.ts";
import { aliveIds } from "../helpers/members.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-cluster-name-"));
const TIMING = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--drain-timeout-ms", "1000", "--leave-timeout-ms", "1000"];
const PORT = 7841;
const c = new TestCluster(dir, [1, 2].map((i) => `127.0.24.${i}:${PORT}`), ["--cluster", "blue", ...TIMING], "b");
const started: ChildProcess[] = [];

/** The ids node i lists as ALIVE. */
const aliveAt = (i: number) => aliveIds(c.addresses[i]!);

function nodeArgs(name: string, host: number, flags: string[], seeds = c.addresses): string[] {
  return ["--listen", `127.0.24.${host}:${PORT}`, "--node-id", name, "--data-dir", join(dir, name), "--seeds", seeds.join(","), ...flags, ...TIMING];
}

before(async () => {
  await c.startAll();
  await eventually("2 members see each other", async () => Promise.all([0, 1].map(aliveAt)), (v) => v.every((ids) => ids.join() === "b0,b1"));
});

after(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the cluster name is checked when a node joins (real processes)", () => {
  it("a node of another cluster is refused naming both names, never ALIVE, and exits 2 saying why", async () => {
    const child = spawn(process.execPath, [BIN, "node", ...nodeArgs("g", 10, ["--cluster", "green"])], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    started.push(child);
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout!.resume();
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const [code, signal] = await once(child, "exit");
    clearTimeout(timer);
    assert.equal(signal === "SIGKILL" ? "timeout" : code, 2, `exit status; log:\n${stderr.slice(-3000)}`);
    assert.match(stderr, /--cluster differs: joining node "g" \([^)]*\) runs with --cluster "green" but member "b\d" with --cluster "blue"; every node of a cluster needs the same --cluster/);
    assert.match(stderr, /the cluster refused this node's settings/);
    assert.doesNotMatch(stderr, /no seed answered a join/);
    await eventually("a member logged the refusal", async () => c.nodes.get(0)!.logs() + c.nodes.get(1)!.logs(), (l) => l.includes("refused a node whose --cluster differs"), 5000);
    for (const i of [0, 1]) assert.deepEqual(await aliveAt(i), ["b0", "b1"]);
  });

  it("two nodes alone of different clusters, each refusing the other, both keep running and say why", async () => {
    const x = `127.0.24.15:${PORT}`;
    const y = `127.0.24.16:${PORT}`;
    const [a, b] = (await startNodesTogether([nodeArgs("x", 15, ["--cluster", "red"], [y]), nodeArgs("y", 16, ["--cluster", "teal"], [x])])) as [NodeProcess, NodeProcess];
    try {
      for (const n of [a, b]) {
        await eventually(`${n.nodeId} logs the refusal`, async () => n.logs(), (l) => /in no cluster either, refused this node's join: its --cluster differs/.test(l), 15_000);
      }
      // Its warning while alone says the seed refused, quoting why, not that no seed answered.
      for (const n of [a, b]) {
        await eventually(`${n.nodeId} warns that seeds refused it`, async () => n.logs(), (l) => /seeds refused this node's join.*FAILED_PRECONDITION --cluster differs/.test(l), 20_000);
        assert.doesNotMatch(n.logs(), /no seed answered a join/);
      }
      assert.equal(a.child.exitCode, null, a.logs().slice(-2000));
      assert.equal(b.child.exitCode, null, b.logs().slice(-2000));
    } finally {
      await Promise.all([a.kill(), b.kill()]);
    }
  });
});
