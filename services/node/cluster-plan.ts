// The layout of a local cluster (`deltaset cluster`, chaos runs): one loopback address per node,
// like separate hosts, a data directory each, and every other node as a seed.
import { join } from "node:path";

export interface ClusterNodeSpec {
  nodeId: string;
  address: string;
  dataDir: string;
  logFile: string;
  args: string[];
}

/** The nodes of a local cluster: addresses, data directories and node arguments. */
export function planCluster(opts: { nodes: number; port: number; dir: string; firstHost: number; extra: string[]; /** The first three octets (default 127.0.0). */ network?: string }): ClusterNodeSpec[] {
  if (!Number.isInteger(opts.nodes) || opts.nodes < 1 || opts.nodes > 200) throw new RangeError("--nodes must be 1..200");
  if (opts.firstHost + opts.nodes - 1 > 254) throw new RangeError("--first-host leaves no room for that many nodes");
  const specs = Array.from({ length: opts.nodes }, (_, i) => {
    const nodeId = `n${i + 1}`;
    return { nodeId, address: `${opts.network ?? "127.0.0"}.${opts.firstHost + i}:${opts.port}`, dataDir: join(opts.dir, nodeId), logFile: join(opts.dir, `${nodeId}.log`) };
  });
  return specs.map((s) => ({
    ...s,
    args: [
      "--listen", s.address,
      "--node-id", s.nodeId,
      "--data-dir", s.dataDir,
      // Every other node is a seed: any one of them alive is enough to (re)join.
      "--seeds", specs.filter((o) => o !== s).map((o) => o.address).join(",") || s.address,
      ...opts.extra,
    ],
  }));
}
