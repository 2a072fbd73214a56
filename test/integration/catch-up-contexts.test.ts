// Catch-up by contexts between real node processes that prove every peer call with a cluster key:
// a node killed (SIGKILL) and started again with its data is sent almost nothing back, though its
// neighbours plan full state for it (its boot id changed); what was written while it was away
// reaches it, removes included; a wiped node still gets everything.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { sumSamples } from "../../services/chaos/eval/counters.ts";
import { call } from "../../services/client/rpc.ts";
import { generateClusterKey } from "../../services/node/cluster-keys.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-catch-up-contexts-"));
const keyFile = join(dir, "cluster.key");
const HOSTS = [1, 2, 3].map((i) => `127.0.9.${i}`);
const METRICS = HOSTS.map((h) => `${h}:7882`);
const KEYS = 12;
const PER_KEY = 2000;
let c: TestCluster;

const start = (i: number) => c.start(i, ["--metrics-listen", METRICS[i]!]);

before(async () => {
  writeFileSync(keyFile, `${generateClusterKey()}\n`, { mode: 0o600 });
  c = new TestCluster(dir, HOSTS.map((h) => `${h}:7881`), ["--cluster-key-file", keyFile, "--partitions", "16", "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--log-level", "warn"], "cc");
  await Promise.all([0, 1, 2].map(start));
  await c.replica(0, (r) =>
    Promise.all(
      Array.from({ length: KEYS }, async (_, k) => {
        for (let e = 0; e < PER_KEY; e += 1000) {
          await call(r, r.add, { key: `k${k}`, elements: Array.from({ length: 1000 }, (_, j) => Buffer.from(`e-${k}-${e + j}`)), texts: [] }, { timeoutMs: 60_000 });
        }
      }),
    ),
  );
  await everyNodeHolds(() => PER_KEY);
  await stateQuiet();
});

/** Until no node ships full state for 1.5 s (the fill's large deltas and their forwarding go as full state). */
async function stateQuiet(): Promise<void> {
  let last = "";
  let since = Date.now();
  for (const end = Date.now() + 60_000; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
    const now = (await Promise.all([0, 1, 2].map(async (i) => stateBytes(await metrics(i))))).join(",");
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since >= 1500) return;
  }
  throw new Error("full-state shipping did not stop within 60 s");
}
after(async () => {
  await c?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function metrics(i: number): Promise<string> {
  return (await fetch(`http://${METRICS[i]}/metrics`)).text();
}
const event = (text: string, e: string) => sumSamples(text, "deltaset_gossip_transport_events_total", { event: e });
const stateBytes = (text: string) => sumSamples(text, "deltaset_gossip_sent_bytes_total", { kind: "state" });

async function sizes(i: number): Promise<Map<string, number>> {
  const page = await c.replica(i, (r) => call(r, r.keys, { prefix: "", pageSize: 1000, pageToken: Buffer.alloc(0) }));
  return new Map(page.keys.map((k) => [k.key, Number(k.size)]));
}

async function everyNodeHolds(per: (k: number) => number): Promise<void> {
  const all = async () => {
    for (const i of [0, 1, 2]) {
      const s = await sizes(i);
      for (let k = 0; k < KEYS; k++) if (s.get(`k${k}`) !== per(k)) return false;
    }
    return true;
  };
  await eventually("every node holds every set", all, (v) => v, 60_000);
}

describe("catch-up by contexts (real nodes, cluster key)", () => {
  it("a node back with its data gets its missed writes and removes, and no set whole", async () => {
    const before = await Promise.all([0, 1].map(async (i) => stateBytes(await metrics(i))));
    await c.kill(2);
    // Written while node 2 is down: one more element in k0, two removed from k1.
    await c.replica(0, (r) => call(r, r.add, { key: "k0", elements: [Buffer.from("while-away")], texts: [] }));
    await c.replica(0, (r) => call(r, r.remove, { key: "k1", elements: [Buffer.from("e-1-0"), Buffer.from("e-1-1")], texts: [], context: undefined }));
    await start(2);
    await everyNodeHolds((k) => PER_KEY + (k === 0 ? 1 : k === 1 ? -2 : 0));
    // Both neighbours need the returning node's ack of every partition, so each pushes every set
    // to it, by contexts: as a delta, or nothing (the changes may have reached it as deltas
    // pushed before its neighbours saw its new boot id).
    const byContexts = async () => (await Promise.all([0, 1].map(metrics))).reduce((n, t) => n + event(t, "catch_up_delta_keys") + event(t, "catch_up_keys_skipped"), 0);
    await eventually("every set pushed by contexts from both neighbours", byContexts, (n) => n >= 2 * KEYS, 30_000);
    const texts = await Promise.all([0, 1].map(metrics));
    const shipped = texts.reduce((n, t, i) => n + stateBytes(t) - before[i]!, 0);
    // One set (2 000 elements) sent whole would pass this bound.
    assert.ok(shipped < 5_000, `full-state payload bytes sent to the returning node: ${shipped}`);
    assert.equal(event(await metrics(2), "catch_up_stale"), 0);
    // Answered through the peer interceptors (each call proven with the cluster key, each answer signed).
    assert.ok(event(await metrics(2), "contexts_answered") > 0, "the returning node was asked too (its own partitions restarted past their seqs)");
  });

  it("a wiped node gets every set back", async () => {
    await c.kill(2);
    rmSync(c.dataDir(2), { recursive: true, force: true });
    await start(2);
    await everyNodeHolds((k) => PER_KEY + (k === 0 ? 1 : k === 1 ? -2 : 0));
  });
});
