// A large full-state catch-up between real node processes: it goes in streams of about
// --gossip-state-stream-bytes, each acknowledged before the next starts, and no deadline bounds
// it as a whole, only a stall (--gossip-state-stream-stall-ms). Before, one stream carried every
// partition under one gossip deadline (24 x --gossip-rpc-timeout-ms): a catch-up that needed
// longer was cancelled, acknowledged nothing, started again from its first partition, and its
// last partitions never reached the new node.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { sumSamples } from "../../services/chaos/eval/counters.ts";
import { call } from "../../services/client/rpc.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-catchup-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const TIMING = ["--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--partitions", "64", "--gossip-interval-ms", "100", "--log-level", "warn"];

/** Fill `keys` sets of `per` elements each on node i, 1000 elements per call. */
async function fill(c: TestCluster, i: number, keys: number, per: number): Promise<void> {
  await c.replica(i, (r) =>
    Promise.all(
      Array.from({ length: keys }, async (_, k) => {
        for (let e = 0; e < per; e += 1000) {
          const elements = Array.from({ length: Math.min(1000, per - e) }, (_, j) => Buffer.from(`element-${k}-${e + j}`));
          await call(r, r.add, { key: `k${k}`, elements, texts: [] }, { timeoutMs: 60_000 });
        }
      }),
    ),
  );
}

/** Live elements per key on node i (Keys, one page). */
async function sizes(c: TestCluster, i: number): Promise<Map<string, number>> {
  const page = await c.replica(i, (r) => call(r, r.keys, { prefix: "", pageSize: 1000, pageToken: Buffer.alloc(0) }));
  return new Map(page.keys.map((k) => [k.key, Number(k.size)]));
}

/** A transport event counter from a node's /metrics. */
async function transportEvent(metrics: string, event: string): Promise<number> {
  return sumSamples(await (await fetch(`http://${metrics}/metrics`)).text(), "deltaset_gossip_transport_events_total", { event });
}

describe("full-state catch-up of a new node (real processes)", () => {
  it("a catch-up longer than 24 gossip RPC deadlines completes, in many acknowledged streams", async () => {
    const KEYS = 48;
    const PER = 5000;
    const metrics = "127.0.0.236:7661";
    // Small chunks and a 100 ms RPC deadline: the catch-up takes several times the 2.4 s that
    // once bounded a whole state stream.
    const flags = [...TIMING, "--state-chunk-entries", "20", "--gossip-rpc-timeout-ms", "100", "--gossip-state-stream-bytes", "65536"];
    const c = new TestCluster(dir, ["127.0.0.236:7660", "127.0.0.237:7660"], flags, "catchup");
    try {
      await c.start(0, ["--metrics-listen", metrics]);
      await fill(c, 0, KEYS, PER);
      const started = Date.now();
      await c.start(1);
      await eventually(
        "every key whole on the new node",
        () => sizes(c, 1),
        (s) => s.size === KEYS && [...s.values()].every((n) => n === PER),
        120_000,
      );
      const took = Date.now() - started;
      const streams = await transportEvent(metrics, "state_streams_sent");
      // 48 keys of 5000 elements are megabytes: dozens of 64 KiB streams.
      assert.ok(streams >= 20, `state streams sent: ${streams}`);
      // Every stream was acknowledged: new writes go as deltas, with no further full state.
      await new Promise((r) => setTimeout(r, 1000));
      const before = await transportEvent(metrics, "state_streams_sent");
      await c.add(0, "k0", ["late-one"]);
      await eventually("the late add on the new node", () => sizes(c, 1), (s) => s.get("k0") === PER + 1, 20_000);
      assert.equal(await transportEvent(metrics, "state_streams_sent"), before, "a full state went after the catch-up");
      console.log(`catch-up of ${KEYS * PER} elements: ${took} ms, ${streams} streams`);
    } finally {
      await c.close();
    }
  });

  it("a stream to a node that stops answering is cancelled after the stall time, and the catch-up resumes when it is back", async () => {
    const KEYS = 24;
    const PER = 5000;
    const metrics = "127.0.0.238:7661";
    const flags = [...TIMING, "--state-chunk-entries", "20", "--gossip-state-stream-bytes", "65536", "--gossip-state-stream-stall-ms", "1000"];
    const c = new TestCluster(dir, ["127.0.0.238:7660", "127.0.0.239:7660"], flags, "stall");
    try {
      await c.start(0, ["--metrics-listen", metrics]);
      await fill(c, 0, KEYS, PER);
      const receiver = await c.start(1);
      const partial = await eventually("part of the catch-up on the new node", () => sizes(c, 1), (s) => s.size > 0, 30_000);
      const total = (s: Map<string, number>) => [...s.values()].reduce((a, b) => a + b, 0);
      assert.ok(total(partial) < KEYS * PER, "the catch-up ended before the node was stopped");
      // Stopped, not killed: its connections stay open and its window fills, so the stream stands still.
      receiver.child.kill("SIGSTOP");
      try {
        await eventually("a stalled stream cancelled", () => transportEvent(metrics, "state_streams_stalled"), (n) => n >= 1, 15_000);
      } finally {
        receiver.child.kill("SIGCONT");
      }
      await eventually(
        "every key whole on the new node",
        () => sizes(c, 1),
        (s) => s.size === KEYS && [...s.values()].every((n) => n === PER),
        60_000,
      );
    } finally {
      await c.close();
    }
  });
});
