// A probe timeout set too close to the link round trip is reported by the node. Two real node
// processes whose peer links go through the project's fault proxy; each direction of every link
// gets 100 ms of latency, so a probe's round trip (about 200 ms) passes half of the 300 ms probe
// timeout while staying under it (probes still succeed). Each node must log the warning and export
// the round trips as deltaset_membership_probe_rtt_ms.
import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { LocalCluster } from "../../services/chaos/local-cluster.ts";
import { LinkTable, precreateLinkProxies } from "../../services/chaos/links.ts";
import { startToxiproxyServer } from "../../services/chaos/proxy/index.ts";
import { membershipConverged } from "../../services/chaos/run.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-probe-timing-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const WARNING = "probe round trips are close to the probe timeout";

function sample(text: string, stat: string): number | undefined {
  const m = new RegExp(`^deltaset_membership_probe_rtt_ms\\{stat="${stat}"\\} (\\S+)$`, "m").exec(text);
  return m === null ? undefined : Number(m[1]);
}

describe("probe round trips near the probe timeout (2 real nodes, 100 ms each way)", () => {
  it("each node warns once and exports the round trips", { timeout: 90_000 }, async () => {
    const proxy = await startToxiproxyServer({ host: "127.0.0.1", port: 0 });
    const cluster = new LocalCluster({
      nodes: 2,
      dir,
      firstHost: 181,
      port: 7761,
      nodeArgs: ["--probe-timeout-ms", "300", "--probe-interval-ms", "400", "--gossip-interval-ms", "200", "--peer-proxy", proxy.url],
      metricsPort: 7762,
    });
    try {
      const nodes = cluster.specs.map((s) => ({ nodeId: s.nodeId, address: s.address }));
      const linkNodes = nodes.map((n) => ({ ...n, toxiproxy: proxy.url }));
      await precreateLinkProxies(linkNodes);
      await cluster.startAll();
      const ids = nodes.map((n) => n.nodeId);
      await eventually("membership converged", () => membershipConverged(nodes, ids), (ok) => ok, 30_000);
      const links = new LinkTable(linkNodes);
      const all = nodes.flatMap((a) => nodes.filter((b) => b !== a).map((b) => [a.nodeId, b.nodeId] as [string, string]));
      await links.toxic(all, { type: "latency", streams: ["upstream", "downstream"], attributes: { latency: 100, jitter: 0 } });
      // 20 round trips are needed before a warning: about 8 s at one probe each 400 ms.
      const logOf = (i: number) => readFileSync(cluster.specs[i]!.logFile, "utf8");
      await eventually("both nodes warned", async () => [0, 1].map((i) => logOf(i).split("\n").filter((l) => l.includes(WARNING))), (w) => w.every((lines) => lines.length >= 1), 40_000);
      for (const i of [0, 1]) {
        const lines = logOf(i).split("\n").filter((l) => l.includes(WARNING));
        assert.equal(lines.length, 1, "one warning per interval (5 minutes), not one per probe");
        const line = JSON.parse(lines[0]!) as { level: string; p95RoundTripMs: number; probeTimeoutMs: number };
        assert.equal(line.level, "warn");
        assert.equal(line.probeTimeoutMs, 300);
        assert.ok(line.p95RoundTripMs >= 150 && line.p95RoundTripMs < 300, `p95 ${line.p95RoundTripMs} ms`);
        const text = await (await fetch(`http://${cluster.metricsAddress(ids[i]!)}/metrics`)).text();
        assert.equal(sample(text, "timeout"), 300);
        assert.ok(sample(text, "p95")! >= 150, `exported p95 ${sample(text, "p95")}`);
      }
    } finally {
      await cluster.stopAll();
      await proxy.close();
    }
  });
});
