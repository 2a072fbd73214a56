// The evaluation sweep on local node processes: for each cluster size, sync mode and latency, a
// fresh cluster whose peer links all go through per-link proxies of one Toxiproxy-compatible
// server in this process, then every loss level's cell on it (cell.ts). Nodes, proxies and data are
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
import { type EvalGrid, type LatencyLevel, MODE_FLAGS, membershipFlags } from "./grid.js";
import { warmUp } from "./warm-up.js";

export interface SweepOptions {
  grid: EvalGrid;
  /** Last octet of the first node's 127.0.0.x address. */
  firstHost: number;
  port: number;
  seed: number;
  log?: (line: string) => void;
  /** Called after each cell (progress, partial results). */
  onCell?: (cell: CellResult | FailedCell, done: number, total: number) => void;
}

export function nodeArgsFor(grid: EvalGrid, mode: keyof typeof MODE_FLAGS, latency?: Pick<LatencyLevel, "latencyMs" | "jitterMs">): string[] {
  return [
    "--gossip-interval-ms", String(grid.gossipIntervalMs),
    ...membershipFlags(latency),
    "--reap-after-ms", "60000",
    "--gossip-rpc-timeout-ms", "3000",
    "--log-level", "warn",
    ...MODE_FLAGS[mode],
  ];
}

/**
 * A cluster of one cell group: nodes started, links proxied, membership converged. `latency` is
 * the largest link latency its cells will set (membership timing is chosen for it).
 */
export async function startEvalGroup(o: Pick<SweepOptions, "grid" | "firstHost" | "port">, size: number, mode: keyof typeof MODE_FLAGS, latency?: Pick<LatencyLevel, "latencyMs" | "jitterMs">) {
  const dir = mkdtempSync(join(tmpdir(), `deltaset-eval-${size}n-`));
  const server = await startToxiproxyServer({ host: "127.0.0.1", port: 0 });
  const cluster = new LocalCluster({ nodes: size, dir, firstHost: o.firstHost, port: o.port, nodeArgs: [...nodeArgsFor(o.grid, mode, latency), "--peer-proxy", server.url], metricsPort: o.port + 1 });
  const stop = async () => {
    await cluster.stopAll();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  };
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
    const env = { nodes, links: new LinkTable(linkNodes), proxyApis: [server.url], metricsAddress: (id: string) => cluster.metricsAddress(id), pid: (id: string) => cluster.pid(id) };
    if (o.grid.warmUpMs > 0) await warmUp(nodes, o.grid, `${size}n-${o.port}`);
    return { env, stop, dir, cluster };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Every cell of the grid. A fresh cluster per (size, mode, latency): the loss levels of one
 * latency share it, so data left by earlier cells stays small (a full-state mode ships all of it
 * every period). A cell that fails (a cluster that will not start, a prefill that never settles)
 * is reported with its error and the sweep goes on.
 */
export async function runSweep(o: SweepOptions): Promise<Array<CellResult | FailedCell>> {
  const log = o.log ?? (() => {});
  const { grid } = o;
  const total = grid.sizes.length * grid.modes.length * grid.latencies.length * grid.losses.length;
  const out: Array<CellResult | FailedCell> = [];
  let seed = o.seed;
  for (const size of grid.sizes) {
    for (const mode of grid.modes) {
      for (const latency of grid.latencies) {
        let group: Awaited<ReturnType<typeof startEvalGroup>> | undefined;
        let groupError: string | undefined;
        try {
          group = await startEvalGroup(o, size, mode, latency);
        } catch (err) {
          groupError = (err as Error).message;
        }
        try {
          for (const loss of grid.losses) {
            log(`${size} nodes, ${mode}, latency ${latency.name}, loss ${loss.name}`);
            let cell: CellResult | FailedCell;
            try {
              if (group === undefined) throw new Error(groupError);
              cell = await runCell(group.env, { mode, latency, loss, grid, seed: seed++ }, log);
            } catch (err) {
              cell = { mode, nodes: size, latency: latency.name, latencyMs: latency.latencyMs, loss: loss.name, lossWindowShare: loss.windowShare, failed: (err as Error).message };
              log(`  cell failed: ${cell.failed}`);
            }
            out.push(cell);
            o.onCell?.(cell, out.length, total);
          }
        } finally {
          await group?.stop();
        }
      }
    }
  }
  return out;
}

/** A cell that could not be measured, and why. */
export interface FailedCell {
  mode: string;
  nodes: number;
  latency: string;
  latencyMs: number;
  loss: string;
  lossWindowShare: number;
  failed: string;
}

export function isMeasured(c: CellResult | FailedCell): c is CellResult {
  return !("failed" in c);
}
