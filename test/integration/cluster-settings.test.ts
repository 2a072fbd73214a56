// Nodes whose --partitions or --replication-factor differ from the cluster's are refused, on real
// node processes (3 nodes, --partitions 16, --replication-factor 2):
//  - a node started with --partitions 8, and one with --replication-factor 3, have their Join
//    refused: no member ever lists them ALIVE, they own nothing in the members' Owners, and they
//    exit with status 2 naming the setting and both values;
//  - a node that found no seed at first serves alone, and exits 2 once a member refuses it;
//  - two nodes alone that refuse each other speak for no cluster: both keep running and log why;
//  - a node with the same settings still joins.
import { strict as assert } from "node:assert";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { eventually } from "../helpers/eventually.ts";
import { BIN, type NodeProcess, REPO, startNodeProcess, startNodesTogether } from "../helpers/node-process.ts";
import { ownersAt } from "../helpers/placement.ts";
import { aliveIds } from "../helpers/members.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-cluster-settings-"));
const TIMING = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--drain-timeout-ms", "1000", "--leave-timeout-ms", "1000"];
const FLAGS = ["--partitions", "16", "--replication-factor", "2", ...TIMING];
const PORT = 7831;
const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.20.${i}:${PORT}`), FLAGS, "s");
const MEMBERS = [0, 1, 2];
const KEYS = Array.from({ length: 40 }, (_, k) => `key${k}`);
const started: ChildProcess[] = [];

/** The ids node i lists as ALIVE. */
const aliveAt = (i: number) => aliveIds(c.addresses[i]!);

/**
 * While `running` is pending, poll the members' views and Owners: every node id other than the
 * members' own that shows up ALIVE or as an owner.
 */
async function strangersWhile(running: Promise<unknown>): Promise<Set<string>> {
  const own = new Set(MEMBERS.map((i) => `s${i}`));
  const seen = new Set<string>();
  let done = false;
  void running.finally(() => (done = true));
  for (let round = 0; !done && round < 200; round++) {
    for (const i of MEMBERS) {
      for (const id of await aliveAt(i)) if (!own.has(id)) seen.add(`${id} ALIVE at s${i}`);
      for (const key of KEYS.slice((round * 8) % KEYS.length, (round * 8) % KEYS.length + 8)) {
        for (const id of await ownersAt(c, i, key)) if (!own.has(id)) seen.add(`${id} owner of ${key} at s${i}`);
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return seen;
}

/** Run a node expected to exit by itself; killed (code "timeout") after timeoutMs. */
function runNode(args: string[], timeoutMs: number): { child: ChildProcess; exited: Promise<{ code: number | string; stderr: string }> } {
  const child = spawn(process.execPath, [BIN, "node", ...args], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  started.push(child);
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout!.resume();
  const exited = (async () => {
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    const [code, signal] = await once(child, "exit");
    clearTimeout(timer);
    return { code: signal === "SIGKILL" ? "timeout" : (code as number), stderr };
  })();
  return { child, exited };
}

function nodeArgs(name: string, host: number, flags: string[], seeds = c.addresses): string[] {
  return ["--listen", `127.0.20.${host}:${PORT}`, "--node-id", name, "--data-dir", join(dir, name), "--seeds", seeds.join(","), ...flags];
}

before(async () => {
  await c.startAll();
  await eventually("3 members see each other", async () => Promise.all(MEMBERS.map(aliveAt)), (v) => v.every((ids) => ids.join() === "s0,s1,s2"));
});

after(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("cluster-wide settings are checked when a node joins (real processes)", () => {
  for (const { what, flags, flag, theirs, ours } of [
    { what: "--partitions 8", flags: ["--partitions", "8", "--replication-factor", "2"], flag: "--partitions", theirs: "8", ours: "16" },
    { what: "--replication-factor 3", flags: ["--partitions", "16", "--replication-factor", "3"], flag: "--replication-factor", theirs: "3", ours: "2" },
  ]) {
    it(`a node started with ${what} is refused: never ALIVE, owns nothing, exits 2 saying why`, async () => {
      const name = `odd${theirs}${flag.length}`;
      const run = runNode(nodeArgs(name, flag === "--partitions" ? 10 : 11, [...flags, ...TIMING]), 20_000);
      const seen = await strangersWhile(run.exited);
      const { code, stderr } = await run.exited;
      assert.deepEqual([...seen], [], "the refused node entered a member's view or placement");
      assert.equal(code, 2, `exit status; log:\n${stderr.slice(-3000)}`);
      assert.match(stderr, new RegExp(`${flag} differs: joining node "${name}" \\([^)]*\\) runs with ${flag} ${theirs} but member "s\\d" with ${flag} ${ours}`));
      assert.match(stderr, /the cluster refused this node's settings/);
      // The members say so too.
      await eventually("a member logged the refusal", async () => c.nodes.get(0)!.logs() + c.nodes.get(1)!.logs() + c.nodes.get(2)!.logs(), (l) => l.includes(`refused a node whose ${flag}`), 5000);
      // Nothing of it left in any view.
      for (const i of MEMBERS) assert.deepEqual(await aliveAt(i), ["s0", "s1", "s2"]);
    });
  }

  it("a node that served alone (no seed answered) exits 2 once a member refuses it", async () => {
    // Its only seed is not up yet: the node serves alone meanwhile.
    const lateSeed = `127.0.20.13:${PORT}`;
    const odd = await startNodeProcess(nodeArgs("alone", 12, ["--partitions", "8", "--replication-factor", "2", ...TIMING], [lateSeed]));
    started.push(odd.child);
    const exited = once(odd.child, "exit");
    // The seed comes up as a member of the cluster (it joins through the others, not through the odd node).
    const seed = await startNodeProcess(nodeArgs("late", 13, FLAGS));
    started.push(seed.child);
    try {
      const timer = setTimeout(() => odd.child.kill("SIGKILL"), 20_000);
      const [code] = await exited;
      clearTimeout(timer);
      assert.equal(code, 2, `exit status; log:\n${odd.logs().slice(-3000)}`);
      assert.match(odd.logs(), /--partitions differs: joining node "alone" \([^)]*\) runs with --partitions 8 but member "late" with --partitions 16/);
      for (const i of MEMBERS) assert.ok(!(await aliveAt(i)).includes("alone"));
    } finally {
      await seed.stop();
    }
  });

  it("two nodes alone, each refusing the other, speak for no cluster: both keep running and say why", async () => {
    const x = `127.0.20.15:${PORT}`;
    const y = `127.0.20.16:${PORT}`;
    const [a, b] = (await startNodesTogether([nodeArgs("x", 15, ["--partitions", "16", ...TIMING], [y]), nodeArgs("y", 16, ["--partitions", "8", ...TIMING], [x])])) as [NodeProcess, NodeProcess];
    try {
      for (const n of [a, b]) {
        await eventually(`${n.nodeId} logs the refusal`, async () => n.logs(), (l) => /in no cluster either, refused this node's join: its --partitions differs/.test(l), 15_000);
      }
      assert.equal(a.child.exitCode, null, a.logs().slice(-2000));
      assert.equal(b.child.exitCode, null, b.logs().slice(-2000));
    } finally {
      await Promise.all([a.kill(), b.kill()]);
    }
  });

  it("a node with the same settings joins", async () => {
    const same = await startNodeProcess(nodeArgs("same", 14, FLAGS));
    started.push(same.child);
    try {
      await eventually("every member lists the new node ALIVE", async () => Promise.all(MEMBERS.map(aliveAt)), (v) => v.every((ids) => ids.includes("same")));
      await eventually("it owns some keys in the members' placement", async () => (await Promise.all(KEYS.map((k) => ownersAt(c, 0, k)))).flat(), (o) => o.includes("same"));
      // Log messages only: the configuration line names settings such as refusedJoinsBytes.
      const messages = same.logs().split("\n").filter((l) => l !== "").map((l) => (JSON.parse(l) as { msg: string }).msg);
      assert.deepEqual(messages.filter((m) => /refus/.test(m)), []);
    } finally {
      assert.equal(await same.stop(), 0);
    }
  });
});
