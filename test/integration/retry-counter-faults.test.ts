// Retry-safe counters under client-side faults, through the fault proxy: three real nodes, each
// reached by the client only through its own proxy; node 0's answers are delayed past the client's
// deadline (the increment is applied, the client times out) and node 1's connections are reset
// when its answers come back (applied, answer lost). A client that retries every failed Increment
// with the same request id, after a pause, to a node chosen at random (the same or another), counts
// each increment exactly once on every node; the same client without request ids double-counts.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Toxiproxy, type Proxy } from "toxiproxy-node-client";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { seededRandom } from "../../services/common/prng.ts";
import { startToxiproxyServer, type ToxiproxyServer } from "../../services/chaos/proxy/index.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-retry-faults-"));
const addrs = ["127.0.2.21:7921", "127.0.2.22:7922", "127.0.2.23:7923"];
const c = new TestCluster(dir, addrs, ["--gossip-interval-ms", "50", "--probe-interval-ms", "300", "--probe-timeout-ms", "200"], "rf");
let server: ToxiproxyServer;
const proxies: Proxy[] = [];
let clients: Array<ReturnType<typeof replicaClient>> = [];

const DEADLINE_MS = 250;
// Many gossip periods: the first attempt's delta has reached the others before the retry. Request
// ids drop a retry only once the first application has spread; on a loaded machine a stall of some
// 700 ms once made even the clean node time out, and two nodes applied one id within 400 ms.
const PAUSE_MS = 1000;
const INCREMENTS = 50;
// Node 0 always fails an attempt and node 1 often does (a reset, then the channel's reconnect
// backoff), so an attempt fails with probability up to 2/3: 40 attempts leave an increment
// unacknowledged with probability (2/3)^40, about 1e-7 (12 did about once in 30 runs).
const ATTEMPTS = 40;

before(async () => {
  await c.startAll();
  server = await startToxiproxyServer({ host: "127.0.0.1", port: 0 });
  const tp = new Toxiproxy(server.url);
  for (const [i, a] of addrs.entries()) proxies.push(await tp.createProxy({ name: `client-to-${i}`, listen: "127.0.0.1:0", upstream: a }));
  // Node 0: every answer 700 ms late, past the deadline. Node 1: half its connections reset when
  // the answer comes back. Node 2: clean.
  await proxies[0]!.addToxic({ name: "slow-answers", type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 700, jitter: 0 } as never });
  await proxies[1]!.addToxic({ name: "reset-answers", type: "reset_peer", stream: "downstream", toxicity: 0.5, attributes: { timeout: 0 } as never });
  clients = proxies.map((p) => replicaClient(p.listen));
});

after(async () => {
  for (const cl of clients) cl.close();
  await server?.close();
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Every attempt's node and outcome, for the failure messages. */
const attemptLog: string[] = [];

/** Increment key by 1, retrying failures after a pause on a random node; returns attempts and whether it was acknowledged. */
async function incrementWithRetries(key: string, requestId: string, random: () => number): Promise<{ attempts: number; acked: boolean; duplicates: number }> {
  let duplicates = 0;
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const n = Math.floor(random() * clients.length);
    const cl = clients[n]!;
    try {
      const r = await call(cl, cl.increment, { key, amount: 1n, requestId }, { timeoutMs: DEADLINE_MS });
      attemptLog.push(`${key} ${requestId} attempt ${attempt} node ${n}: ${r.duplicate ? "duplicate" : "applied"}, value ${r.value}`);
      if (r.duplicate) duplicates++;
      return { attempts: attempt, acked: true, duplicates };
    } catch (err) {
      attemptLog.push(`${key} ${requestId} attempt ${attempt} node ${n}: ${(err as Error).message.split("\n")[0]}`);
      await new Promise((r) => setTimeout(r, PAUSE_MS));
    }
  }
  return { attempts: ATTEMPTS, acked: false, duplicates };
}

async function valueOn(i: number, key: string): Promise<bigint> {
  return c.replica(i, async (r) => (await call(r, r.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false })).counterValue);
}

async function settledValue(key: string): Promise<bigint> {
  const read = async () => Promise.all([0, 1, 2].map((i) => valueOn(i, key)));
  const values = await eventually(`every node reads the same ${key}`, read, (v) => v.every((x) => x === v[0]), 30_000);
  return values[0]!;
}

describe("retry-safe counters behind a faulty network", () => {
  it("count each increment once with request ids, whichever node the retries reach", { timeout: 180_000 }, async () => {
    const random = seededRandom(17);
    let retried = 0;
    let duplicates = 0;
    for (let k = 0; k < INCREMENTS; k++) {
      const r = await incrementWithRetries("safe", `client-1:${k}`, random);
      assert.ok(r.acked, `increment ${k} never acknowledged in ${ATTEMPTS} attempts:\n${attemptLog.slice(-ATTEMPTS).join("\n")}`);
      if (r.attempts > 1) retried++;
      duplicates += r.duplicates;
    }
    // The faults were real: many increments needed retries, and retries of applied increments
    // were recognised as such.
    assert.ok(retried >= 10, `only ${retried} increments were retried`);
    assert.ok(duplicates >= 5, `only ${duplicates} retries were answered as duplicates`);
    const value = await settledValue("safe");
    assert.equal(value, BigInt(INCREMENTS), `0 double counts, 0 lost; the attempts:\n${attemptLog.join("\n")}`);
  });

  it("double-count without request ids under the same faults", { timeout: 180_000 }, async () => {
    const random = seededRandom(17);
    for (let k = 0; k < 20; k++) assert.ok((await incrementWithRetries("unsafe", "", random)).acked);
    const value = await settledValue("unsafe");
    assert.ok(value > 20n, `without ids the retries were counted too: ${value} for 20 increments`);
  });
});
