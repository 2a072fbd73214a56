// The full-state mode (Algorithm 1, every partition pushed every period) between real node
// processes that prove every peer call with a cluster key: its pushes go whole, without asking the
// neighbour what it holds (Gossip/Contexts). Asking is for Algorithm 2's catch-ups; before every
// routine push it cost a round trip and the answering work, and the sweep's state-based cells
// converged several times slower.
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

const dir = mkdtempSync(join(tmpdir(), "deltaset-full-state-pushes-"));
const keyFile = join(dir, "cluster.key");
const HOSTS = [1, 2, 3].map((i) => `127.0.7.${i}`);
const METRICS = HOSTS.map((h) => `${h}:7892`);
const PARTITIONS = 16;
const KEYS = ["a", "b", "c", "d"];
let c: TestCluster;

before(async () => {
  writeFileSync(keyFile, `${generateClusterKey()}\n`, { mode: 0o600 });
  c = new TestCluster(
    dir,
    HOSTS.map((h) => `${h}:7891`),
    ["--cluster-key-file", keyFile, "--partitions", String(PARTITIONS), "--gossip-algorithm", "alg1", "--gossip-choose", "state", "--gossip-interval-ms", "300", "--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--log-level", "warn"],
    "fs",
  );
  await Promise.all([0, 1, 2].map((i) => c.start(i, ["--metrics-listen", METRICS[i]!])));
});
after(async () => {
  await c?.close();
  rmSync(dir, { recursive: true, force: true });
});

const event = async (i: number, e: string) => sumSamples(await (await fetch(`http://${METRICS[i]}/metrics`)).text(), "deltaset_gossip_transport_events_total", { event: e });
const total = async (e: string) => (await Promise.all([0, 1, 2].map((i) => event(i, e)))).reduce((a, b) => a + b, 0);

describe("full-state pushes (real nodes, cluster key)", () => {
  it("go whole every period, asking no Contexts, and bring every set to every node", async () => {
    for (const key of KEYS) await c.replica(0, (r) => call(r, r.add, { key, elements: [Buffer.from(`${key}-1`), Buffer.from(`${key}-2`)], texts: [] }));
    await eventually(
      "every node holds every set",
      async () => (await Promise.all([1, 2].map((i) => c.replica(i, (r) => Promise.all(KEYS.map((key) => call(r, r.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }))))))).flat(),
      (rs) => rs.every((q) => Number(q.size) === 2),
      30_000,
    );
    const before = { streams: await total("state_streams_received"), bytes: await total("state_bytes_applied") };
    await new Promise((r) => setTimeout(r, 2000));
    const streams = (await total("state_streams_received")) - before.streams;
    assert.ok(streams >= 10, `streams received: ${streams}`);
    assert.equal(await total("contexts_answered"), 0, "Contexts asked in the full-state mode");
    assert.ok((await total("state_bytes_applied")) > before.bytes, "states pushed whole each period");
  });
});
