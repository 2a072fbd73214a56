// The evaluation sweep on local node processes: for each cluster size and sync mode, a fresh
// cluster whose peer links all go through per-link proxies of one Toxiproxy-compatible server in
// this process, then every (latency, loss) cell on it (cell.ts). Nodes, proxies and data are
// removed on every path. The kind runner (deploy/kind/eval.sh) drives the same cells against
// real Toxiproxy sidecars through `deltaset chaos eval-cell`.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startToxiproxyServer } from "../proxy/index.js";
import { LinkTable, precreateLinkProxies } from "../links.js";
import { LocalCluster } from "../local-cluster.js";
import { membershipConverged } from "../run.js";
import { type CellResult, runCell } from "./cell.js";
import { type EvalGrid, MODE_FLAGS } from "./grid.js";

export interface SweepOptions {
  grid: EvalGrid;
  /** Last octet of the first node's 127.0.0.x address. */
  firstHost: number;
  port: number;
  seed: number;
  log?: (line: string) => void;
  /** Called after each cell (progress, partial results). */
  onCell?: (cell: CellResult, done: number, total: number) => void;
}

export function nodeArgsFor(grid: EvalGrid, mode: keyof typeof MODE_FLAGS): string[] {
  return [
    "--gossip-interval-ms", String(grid.gossipIntervalMs),
    "--probe-interval-ms", "500",
    "--probe-timeout-ms", "400",
    "--reap-after-ms", "60000",
    "--gossip-rpc-timeout-ms", "3000",
    "--log-level", "warn",
    ...MODE_FLAGS[mode],
  ];
}

export async function runSweep(o: SweepOptions): Promise<CellResult[]> {
  const log = o.log ?? (() => {});
  const { grid } = o;
  const total = grid.sizes.length * grid.modes.length * grid.latencies.length * grid.losses.length;
  const out: CellResult[] = [];
  let seed = o.seed;
  for (const size of grid.sizes) {
    for (const mode of grid.modes) {
      const dir = mkdtempSync(join(tmpdir(), `deltaset-eval-${size}n-`));
      const server = await startToxiproxyServer({ host: "127.0.0.1", port: 0 });
      const cluster = new LocalCluster({
        nodes: size,
        dir,
        firstHost: o.firstHost,
        port: o.port,
        nodeArgs: [...nodeArgsFor(grid, mode), "--peer-proxy", server.url],
        metricsPort: o.port + 1,
      });
      try {
        const nodes = cluster.specs.map((s) => ({ nodeId: s.nodeId, address: s.address }));
        const linkNodes = nodes.map((n) => ({ ...n, toxiproxy: server.url }));
        await precreateLinkProxies(linkNodes);
        await cluster.startAll();
        const ids = nodes.map((n) => n.nodeId);
        const until = Date.now() + 60_000;
        while (!(await membershipConverged(nodes, ids))) {
          if (Date.now() > until) throw new Error(`${size} nodes (${mode}): membership did not converge within 60 s`);
          await new Promise((r) => setTimeout(r, 200));
        }
        const links = new LinkTable(linkNodes);
        const env = { nodes, links, proxyApis: [server.url], metricsAddress: (id: string) => cluster.metricsAddress(id), pid: (id: string) => cluster.pid(id) };
        for (const latency of grid.latencies) {
          for (const loss of grid.losses) {
            log(`${size} nodes, ${mode}, latency ${latency.name}, loss ${loss.name}`);
            const cell = await runCell(env, { mode, latency, loss, grid, seed: seed++ }, log);
            out.push(cell);
            o.onCell?.(cell, out.length, total);
          }
        }
      } finally {
        await cluster.stopAll();
        await server.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  return out;
}
