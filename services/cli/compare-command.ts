// `deltaset compare HOST:PORT HOST:PORT...`: which keys differ between nodes. Each node's Keys
// pages list every key with its type and, for sets, a state digest (KeyInfo.state_digest); a set
// differs when the nodes show different digests, and a key of any type differs when some node
// does not hold it, or when the nodes hold it as different types (a key created at once as two
// types: each node keeps its own, see the README); keys of the other types, held by every node as
// one type, are counted as not compared (their states carry no digest). Exit status 0 when nothing differs (the nodes converged, as far
// as Keys can tell), 1 when something differs, 2 when some node could not be read (nothing was
// compared), so a script can wait for convergence and still tell a node that is down:
//   until deltaset compare A B C --quiet; do [ $? = 2 ] && break; sleep 1; done
import { ObjectType } from "../crdt/index.js";
import { call, replicaClient } from "../client/rpc.js";
import { UsageError, connection, parse } from "./client-commands.js";
import { createOutput } from "./output.js";
import { connectionFailureReason } from "../common/connection-error.js";

const USAGE = "deltaset compare HOST:PORT HOST:PORT... [--prefix P] [--quiet]";

/** A node could not be read: nothing was compared (exit status 2, apart from "they differ"). */
class NotCompared extends Error {}

/** The types whose Keys entries carry a state digest. */
const DIGESTED = new Set([ObjectType.AWSET, ObjectType.AWSET_PROB]);

/** One key as a node lists it: its type, whether that carries a digest, and the digest in hex ("" when none). */
type Listing = Map<string, { type: ObjectType; digested: boolean; digest: string }>;

/** Every key of a node with a prefix, page after page. */
async function keysOf(addr: string, prefix: string, conn: ReturnType<typeof connection>, timeoutMs: number): Promise<Listing> {
  const client = replicaClient(addr, conn.creds);
  const out: Listing = new Map();
  try {
    let token: Buffer = Buffer.alloc(0);
    do {
      const res = await call(client, client.keys, { prefix, pageSize: 0, pageToken: token }, { timeoutMs, metadata: conn.metadata() });
      for (const k of res.keys) out.set(k.key, { type: k.type, digested: DIGESTED.has(k.type), digest: Buffer.from(k.stateDigest).toString("hex") });
      token = res.nextPageToken;
    } while (token.length > 0);
  } catch (err) {
    // Name the node that did not answer (the CLI's message for an unreachable node names --addr,
    // which compare does not take).
    const e = err as { code?: number; details?: string };
    if (typeof e.code === "number" && e.details !== undefined) throw new NotCompared(`${addr} did not answer Keys: ${connectionFailureReason(e.details)} (gRPC status ${e.code})`);
    throw err;
  } finally {
    client.close();
  }
  return out;
}

export interface Comparison {
  /**
   * The keys that differ: per key, each node's digest ("" where it has none, "(none)" where it
   * lacks the key) and, when the nodes hold it as different types, each node's type ("(none)"
   * where it lacks the key).
   */
  differ: Array<{ key: string; digests: string[]; types?: string[] }>;
  /** Keys held by every node whose type carries no digest: their states were not compared. */
  notCompared: number;
}

/** Which keys the listings disagree on. */
export function compareListings(listings: readonly Listing[]): Comparison {
  const keys = new Set<string>();
  for (const l of listings) for (const k of l.keys()) keys.add(k);
  const differ: Comparison["differ"] = [];
  let notCompared = 0;
  for (const key of [...keys].sort()) {
    const entries = listings.map((l) => l.get(key));
    const digests = entries.map((e) => (e === undefined ? "(none)" : e.digest));
    const held = entries.filter((e) => e !== undefined);
    if (held.some((e) => e.type !== held[0]!.type)) differ.push({ key, digests, types: entries.map((e) => (e === undefined ? "(none)" : (ObjectType[e.type] ?? String(e.type)))) });
    else if (entries.some((e) => e === undefined)) differ.push({ key, digests });
    else if (!entries.some((e) => e!.digested)) notCompared++;
    // An empty digest (a set whose digest the node does not know yet) never counts as agreeing.
    else if (digests.some((d) => d === "" || d !== digests[0])) differ.push({ key, digests });
  }
  return { differ, notCompared };
}

export async function compareCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { prefix: { type: "string", default: "" }, quiet: { type: "boolean", default: false } });
  if (positionals.length < 2) throw new UsageError(`name two nodes or more: ${USAGE}`);
  const conn = connection(values);
  let listings: Listing[];
  try {
    listings = await Promise.all(positionals.map((a) => keysOf(a, values.prefix as string, conn, Number(values.timeout))));
  } catch (err) {
    if (!(err instanceof NotCompared)) throw err;
    process.stderr.write(`deltaset compare: ${err.message}; nothing compared\n`);
    process.exit(2);
  }
  const { differ, notCompared } = compareListings(listings);
  const keys = new Set(listings.flatMap((l) => [...l.keys()])).size;
  if (values.quiet !== true) {
    const out = createOutput(values.json as boolean);
    const show = (x: string) => (x === "" ? "(no digest)" : x === "(none)" ? x : x.slice(0, 12));
    const lines = differ.map((d) =>
      d.types !== undefined
        ? `${d.key}  held as different types: ${d.types.map((t, i) => `${positionals[i]}=${t}`).join("  ")}`
        : `${d.key}  ${d.digests.map((x, i) => `${positionals[i]}=${show(x)}`).join("  ")}`,
    );
    const summary = `${keys} key(s) on ${positionals.length} nodes, ${differ.length} differ` + (notCompared > 0 ? `; ${notCompared} held by every node not compared (filters and counters carry no state digest)` : "");
    out.result({ nodes: positionals, keys, differ, notCompared }, [...lines, summary].join("\n"));
  }
  if (differ.length > 0) process.exitCode = 1;
}
