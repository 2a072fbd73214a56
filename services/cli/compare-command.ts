// `deltaset compare HOST:PORT HOST:PORT...`: which sets differ between nodes. Each node's Keys
// pages list every set with its state digest (KeyInfo.state_digest); a set differs when the nodes
// show different digests, or some node does not hold it. Exit status 0 when every set agrees
// (the nodes converged, as far as sets go), 1 otherwise, so a script can wait for convergence:
//   until deltaset compare A B C --quiet; do sleep 1; done
import { ObjectType } from "../crdt/index.js";
import { call, replicaClient } from "../client/rpc.js";
import { UsageError, connection, parse } from "./client-commands.js";
import { createOutput } from "./output.js";

const USAGE = "deltaset compare HOST:PORT HOST:PORT... [--prefix P] [--quiet]";

/** One set as a node lists it: its state digest in hex. */
type Listing = Map<string, string>;

/** Every set of a node with a prefix, page after page. */
async function setsOf(addr: string, prefix: string, conn: ReturnType<typeof connection>, timeoutMs: number): Promise<Listing> {
  const client = replicaClient(addr, conn.creds);
  const out: Listing = new Map();
  try {
    let token: Buffer = Buffer.alloc(0);
    do {
      const res = await call(client, client.keys, { prefix, pageSize: 0, pageToken: token }, { timeoutMs, metadata: conn.metadata() });
      for (const k of res.keys) if (k.type === ObjectType.AWSET) out.set(k.key, Buffer.from(k.stateDigest).toString("hex"));
      token = res.nextPageToken;
    } while (token.length > 0);
  } finally {
    client.close();
  }
  return out;
}

/** The sets whose listings differ: per set, each node's digest ("" where the node lacks it). */
export function differingSets(listings: readonly Listing[]): Array<{ key: string; digests: string[] }> {
  const keys = new Set<string>();
  for (const l of listings) for (const k of l.keys()) keys.add(k);
  const out: Array<{ key: string; digests: string[] }> = [];
  for (const key of [...keys].sort()) {
    const digests = listings.map((l) => l.get(key) ?? "");
    // An empty digest (a set whose digest the node does not know yet) never counts as agreeing.
    if (digests.some((d) => d === "" || d !== digests[0])) out.push({ key, digests });
  }
  return out;
}

export async function compareCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { prefix: { type: "string", default: "" }, quiet: { type: "boolean", default: false } });
  if (positionals.length < 2) throw new UsageError(`name two nodes or more: ${USAGE}`);
  const conn = connection(values);
  const listings = await Promise.all(positionals.map((a) => setsOf(a, values.prefix as string, conn, Number(values.timeout))));
  const differ = differingSets(listings);
  const sets = new Set(listings.flatMap((l) => [...l.keys()])).size;
  if (values.quiet !== true) {
    const out = createOutput(values.json as boolean);
    const lines = differ.map((d) => `${d.key}  ${d.digests.map((x, i) => `${positionals[i]}=${x === "" ? "(none)" : x.slice(0, 12)}`).join("  ")}`);
    const summary = `${sets} set(s) on ${positionals.length} nodes, ${differ.length} differ`;
    out.result({ nodes: positionals, sets, differ }, [...lines, summary].join("\n"));
  }
  if (differ.length > 0) process.exitCode = 1;
}
