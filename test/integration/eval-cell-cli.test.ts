// `deltaset chaos eval-cell` against running nodes, as the kind runner uses it: three node
// processes whose peer links go through a proxy server they were not started by, metrics on, one
// short cell with latency and loss windows. The cell's JSON must show a checked, converged history,
// bytes counted at the proxies and gossip exchanges counted at the nodes. The warm-up before it
// (--warm-up-ms) ran its workload and lag probe and left its keys empty on every node, out of the
// cell's counts, and the cell left its own keys empty too. And `eval-env` gives the environment
// of each mode from the settings table.
import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { LinkTable, precreateLinkProxies } from "../../services/chaos/links.ts";
import { LocalCluster } from "../../services/chaos/local-cluster.ts";
import { startToxiproxyServer, type ToxiproxyServer } from "../../services/chaos/proxy/index.ts";
import { membershipConverged } from "../../services/chaos/run.ts";
import { nodeArgsFor } from "../../services/chaos/eval/sweep.ts";
import { evalGrid } from "../../services/chaos/eval/grid.ts";
import { runCli } from "../helpers/node-process.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-eval-cell-"));
let server: ToxiproxyServer;
let cluster: LocalCluster;

before(async () => {
  server = await startToxiproxyServer({ host: "127.0.0.1", port: 0 });
  cluster = new LocalCluster({ nodes: 3, dir, firstHost: 234, port: 7370, nodeArgs: [...nodeArgsFor(evalGrid(true), "alg2+bp+rr"), "--peer-proxy", server.url], metricsPort: 7371 });
  const nodes = cluster.specs.map((s) => ({ nodeId: s.nodeId, address: s.address }));
  await precreateLinkProxies(nodes.map((n) => ({ ...n, toxiproxy: server.url })));
  await cluster.startAll();
  const until = Date.now() + 30_000;
  while (!(await membershipConverged(nodes, nodes.map((n) => n.nodeId)))) {
    assert.ok(Date.now() < until, "membership did not converge");
    await new Promise((r) => setTimeout(r, 200));
  }
  const links = new LinkTable(nodes.map((n) => ({ ...n, toxiproxy: server.url })));
  assert.equal((await links.missing()).length, 0);
});

after(async () => {
  await cluster?.stopAll();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("deltaset chaos eval-cell", () => {
  it("runs one cell against running nodes and reports it", { timeout: 120_000 }, async () => {
    const out = join(dir, "cell.json");
    const addrs = cluster.specs.map((s) => s.address).join(",");
    const metrics = cluster.specs.map((s) => cluster.metricsAddress(s.nodeId)).join(",");
    const r = await runCli([
      "chaos", "eval-cell", "--nodes-addrs", addrs, "--toxiproxy", server.url, "--metrics", metrics,
      "--latency-ms", "20", "--jitter-ms", "5", "--loss-share", "0.05", "--rounds", "1", "--write-ms", "1500", "--prefill", "200", "--warm-up-ms", "1200", "--out", out,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const warm = /warm-up: (\d+) operations, (\d+) lag probes/.exec(r.stderr);
    assert.ok(warm !== null && Number(warm[1]) > 0 && Number(warm[2]) > 0, `the warm-up ran its workload and probes:\n${r.stderr}`);
    // The warm-up's keys and the cell's own (workload and lag probe) exist with their causal
    // context on every node, and hold nothing: the next cell starts from the same state size.
    for (const s of cluster.specs) {
      const c = replicaClient(s.address);
      try {
        for (const prefix of ["eval-warm-up-", "eval-1-", "eval-lag-"]) {
          const page = await call(c, c.keys, { prefix, pageSize: 100, pageToken: Buffer.alloc(0) });
          assert.equal(page.keys.length, prefix === "eval-lag-" ? 1 : prefix === "eval-1-" ? 4 : 5, `${s.nodeId}: keys ${prefix}*`);
          for (const k of page.keys) assert.equal(Number(k.size), 0, `${s.nodeId}: ${k.key} was emptied`);
        }
      } finally {
        c.close();
      }
    }
    const cell = JSON.parse(readFileSync(out, "utf8"));
    assert.ok(typeof cell.keysEmptiedMs === "number" && cell.keysEmptiedMs >= 0, `the cell's keys read empty everywhere: ${cell.keysEmptiedMs}`);
    assert.equal(cell.valid, true);
    assert.equal(cell.nodes, 3);
    assert.equal(cell.rounds.length, 1);
    assert.equal(cell.rounds[0].lost + cell.rounds[0].resurrected, 0);
    assert.ok(cell.convergenceMs.p95 !== null && cell.convergenceMs.p95 >= 0);
    assert.ok(cell.updates > 0, "some writes were acknowledged");
    assert.ok(cell.wireBytes > 0 && cell.wireBytesPerUpdate > 0, "bytes counted at the proxies");
    assert.ok(cell.measuredLoss.attempted > 0, "exchanges counted at the nodes");
    assert.ok(cell.lossWindows > 0, "loss windows were switched on");
    assert.ok(cell.lagMs.samples > 0);
    // Remote nodes: no CPU figures.
    assert.equal(cell.cpuMsPerSecond.mean, null);
    assert.equal(cell.physicalLimitMs, (100 + 20) * 2);
  });

  it("refuses a missing or mismatched argument with usage", async () => {
    const r = await runCli(["chaos", "eval-cell", "--nodes-addrs", "127.0.0.1:1,127.0.0.1:2", "--toxiproxy", server.url, "--metrics", "127.0.0.1:3"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--metrics: give one endpoint per node \(2\)/);
  });
});

describe("deltaset chaos eval-env", () => {
  it("names each mode's settings by their environment variables", async () => {
    const r = await runCli(["chaos", "eval-env", "alg2+bp+rr+push"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split("\n"), ["DELTASET_GOSSIP_ALGORITHM=alg2", "DELTASET_GOSSIP_BP=true", "DELTASET_GOSSIP_RR=true", "DELTASET_GOSSIP_PUSH_LOCAL_MS=5"]);
    // With the largest link latency of the cells: membership probes wait past its round trip.
    const slow = await runCli(["chaos", "eval-env", "alg2", "--latency-ms", "200", "--jitter-ms", "50"]);
    assert.equal(slow.code, 0, slow.stderr);
    assert.deepEqual(slow.stdout.trim().split("\n").slice(-2), ["DELTASET_PROBE_TIMEOUT_MS=1000", "DELTASET_PROBE_INTERVAL_MS=1250"]);
    const full = await runCli(["chaos", "eval-env", "full-state"]);
    assert.deepEqual(full.stdout.trim().split("\n"), ["DELTASET_GOSSIP_ALGORITHM=alg1", "DELTASET_GOSSIP_CHOOSE=state"]);
  });
});
