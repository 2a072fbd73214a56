// A filter key's request ids on real node processes, as a counter's: an Add retried with its
// request_id is counted in deltaset_filter_retries_absorbed_total (an Increment's retry in
// deltaset_counter_retries_absorbed_total, each metric only its own), and a filter key gossiped by a
// peer whose clock runs ahead is reported in deltaset_clock_skew_reports_total and logged. Node 1's
// clock is shifted by a preloaded module (test/fixtures/clock-ahead.mjs).
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { sumSamples } from "../../services/chaos/eval/counters.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { ObjectType } from "../../services/crdt/index.ts";
import { eventually } from "../helpers/eventually.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-filter-retry-node-"));
const HOSTS = ["127.0.25.1", "127.0.25.2"];
const ADDRS = HOSTS.map((h) => `${h}:7251`);
const METRICS = HOSTS.map((h) => `${h}:7252`);
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--log-level", "warn"];
const CLOCK_AHEAD_MS = 30_000;
const CLOCK_AHEAD = fileURLToPath(new URL("../fixtures/clock-ahead.mjs", import.meta.url));
const nodes: NodeProcess[] = [];
const clients = ADDRS.map((a) => replicaClient(a));

before(async () => {
  const args = (i: number) => ["--listen", ADDRS[i]!, "--node-id", `fk${i}`, "--data-dir", join(dir, `fk${i}`), "--metrics-listen", METRICS[i]!, ...FAST];
  nodes.push(await startNodeProcess(args(0)));
  const ahead = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${CLOCK_AHEAD}`, DELTASET_TEST_CLOCK_AHEAD_MS: String(CLOCK_AHEAD_MS) };
  nodes.push(await startNodeProcess([...args(1), "--seeds", ADDRS[0]!], ahead));
});
after(async () => {
  for (const c of clients) c.close();
  await Promise.all(nodes.map((n) => n.kill()));
  rmSync(dir, { recursive: true, force: true });
});

const metric = async (i: number, name: string, labels: Record<string, string> = {}) =>
  sumSamples(await (await fetch(`http://${METRICS[i]}/metrics`)).text(), name, labels);
const add = (i: number, key: string, type: ObjectType, requestId: string, periodMs?: bigint) => {
  const c = clients[i]!;
  const retryFilter = periodMs === undefined ? undefined : { idsPerPeriod: 100n, falsePositiveRate: 0.001, periodMs, pastEpochs: 4 };
  return call(c, c.add, { key, elements: [Buffer.from("x")], texts: [], type, requestId, retryFilter });
};
const present = async (i: number, key: string) => {
  const c = clients[i]!;
  const q = await call(c, c.query, { key, elements: [Buffer.from("x")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
  return q.presence[0]?.present === true;
};

describe("a filter key's request ids on real nodes", () => {
  it("counts an Add retried on a filter key in deltaset_filter_retries_absorbed_total, and an Increment's retry only in the counters' metric", { timeout: 30_000 }, async () => {
    assert.equal((await add(0, "fk-orcf", ObjectType.ORCF, "client-3:1")).duplicate, false);
    for (let n = 0; n < 2; n++) assert.equal((await add(0, "fk-orcf", ObjectType.ORCF, "client-3:1")).duplicate, true);
    assert.equal(await metric(0, "deltaset_filter_retries_absorbed_total"), 2);
    assert.equal(await metric(0, "deltaset_counter_retries_absorbed_total"), 0);

    const c = clients[0]!;
    for (let n = 0; n < 2; n++) await call(c, c.increment, { key: "fk-counter", amount: 1n, requestId: "client-3:2" });
    assert.equal(await metric(0, "deltaset_counter_retries_absorbed_total"), 1);
    assert.equal(await metric(0, "deltaset_filter_retries_absorbed_total"), 2);
  });

  it("reports a filter key whose retry filter a peer with a clock ahead gossiped, and takes its elements", { timeout: 30_000 }, async () => {
    // Epochs of 5 s: the peer's present epoch begins at least 25 s after this node's clock.
    assert.equal((await add(1, "fk-skewed", ObjectType.GBF, "client-4:1", 5_000n)).duplicate, false);
    await eventually("node 0 has the element", () => present(0, "fk-skewed"), (p) => p, 15_000);
    await eventually("node 0 counts the skew", () => metric(0, "deltaset_clock_skew_reports_total", { direction: "ahead" }), (v) => v >= 1, 10_000);
    assert.match(nodes[0]!.logs(), /retry filter \(of a counter or a filter key\) shows its clock ahead[^\n]*"key":"fk-skewed"/);
  });
});
