// No acknowledged write is left behind on one node, with real processes and SIGKILL:
//  - an add (single or batch) acknowledged, then its node killed within milliseconds, before any
//    gossip tick could persist a sequence number, and restarted: the other nodes receive it
//    (loops over fresh keys, so over partitions whose persisted seq was still 0);
//  - a node SIGKILLed, its data directory wiped, restarted at once under the same id and address
//    before the others noticed: it receives everything written before;
//  - a chunked full-state transfer cut by killing the sender, or the receiver, mid-stream;
//  - a large catch-up (more than --gossip-max-forward-elements) received from a node that dies
//    right after: the receiver forwards it to the third node.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { eventually } from "../helpers/eventually.ts";
import { runCli } from "../helpers/node-process.ts";
import { runCrashLoops } from "../helpers/crash-loop.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-crashrep-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const LOOPS = Number(process.env.CRASH_REPLICATION_LOOPS ?? 20);
const TIMING = ["--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--partitions", "16"];

describe("acknowledged writes survive their node's crash (real processes, SIGKILL)", () => {
  it(`ack then SIGKILL within milliseconds, restart: the others receive it (${LOOPS} loops)`, async () => {
    // A 1 s gossip period: the kill lands long before the tick that would persist a seq.
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.0.${100 + i}:7601`), [...TIMING, "--gossip-interval-ms", "1000"], "k");
    try {
      await c.startAll();
      const r = await runCrashLoops(c, { loops: LOOPS, nodes: 3, stopOnFailure: true });
      assert.equal(r.replicated, LOOPS);
    } finally {
      await c.close();
    }
  });

  it("a node back with a wiped data directory under the same id and address receives everything again", async () => {
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.0.${110 + i}:7602`), [...TIMING, "--gossip-interval-ms", "100"], "w");
    try {
      await c.startAll();
      const keys = Array.from({ length: 6 }, (_, k) => `kept-${k}`);
      for (const [k, key] of keys.entries()) await c.add(k % 3, key, [`x${k}`, `y${k}`]);
      for (const key of keys) await c.converged(key, [0, 1, 2]);
      // Let every ack come back: the peers then look caught up with node 3.
      await new Promise((r) => setTimeout(r, 500));
      await c.wipeAndRestart(2);
      for (const [k, key] of keys.entries()) await c.converged(key, [0, 1, 2], [`x${k}`, `y${k}`]);
    } finally {
      await c.close();
    }
  });

  for (const victim of ["sender", "receiver"] as const) {
    it(`a chunked full-state transfer cut by killing the ${victim} mid-stream completes after its restart`, async () => {
      const N = 40_000;
      const flags = [...TIMING, "--gossip-interval-ms", "100", "--state-chunk-entries", "100"];
      const c = new TestCluster(dir, [1, 2].map((i) => `127.0.0.${victim === "sender" ? 120 + i : 130 + i}:7603`), flags, `cut-${victim}-`);
      try {
        // The sender fills a set alone; the receiver then joins empty and gets it by full state.
        await c.start(0);
        for (let i = 0; i < N; i += 10_000) await c.add(0, "big", Array.from({ length: 10_000 }, (_, j) => `e${i + j}`));
        await c.start(1);
        const partial = await eventually("a partial transfer", () => c.size(1, "big"), (n) => n > 0, 30_000);
        const cutAt = partial;
        await c.kill(victim === "sender" ? 0 : 1);
        await c.start(victim === "sender" ? 0 : 1);
        const got = await c.converged("big", [0, 1], undefined, 60_000);
        assert.equal(got.length, N);
        assert.ok(cutAt < N, `the ${victim} was killed after the transfer had finished (${cutAt}); nothing was cut`);
        // The receiver's directory is consistent once stopped (element records, dot index, header).
        await c.close();
        const v = await runCli(["verify", "--data-dir", c.dataDir(1)]);
        assert.equal(v.code, 0, v.stdout + v.stderr);
      } finally {
        await c.close();
      }
    });
  }

  it("a large catch-up from a node that dies right after reaches the third node", async () => {
    const addrs = [1, 2, 3].map((i) => `127.0.0.${140 + i}:7604`);
    const base = [...TIMING, "--gossip-max-forward-elements", "50"];
    const c = new TestCluster(dir, addrs, [...base, "--gossip-interval-ms", "100"], "f");
    try {
      // The source fills a set alone, then joins the two others with a slow gossip period, so
      // that its first full state reaches one of them well before the other.
      const sourceInterval = 3000;
      await c.start(0, ["--gossip-interval-ms", String(sourceInterval)]);
      await c.add(0, "catch-up", Array.from({ length: 300 }, (_, j) => `c${j}`));
      await Promise.all([c.start(1), c.start(2)]);
      // The source sends to one random neighbour per period: once a node holds its state, the
      // source is killed before its next period, so the other node can only get it forwarded
      // (it may already have it: the receiver forwards within its own 100 ms period).
      await eventually(
        "the source's state on one node",
        async () => [await c.size(1, "catch-up"), await c.size(2, "catch-up")],
        ([a, b]) => a === 300 || b === 300,
        30_000,
      );
      const seen = Date.now();
      await c.kill(0);
      assert.ok(Date.now() - seen < sourceInterval - 500, "the source was killed too late to rule out its second send");
      await c.converged("catch-up", [1, 2], Array.from({ length: 300 }, (_, j) => `c${j}`), 20_000);
    } finally {
      await c.close();
    }
  });
});
