// Final reads: every key of every node read in full (Scan), repeated until all nodes return the
// same sets or a time bound passes. The time of the first identical round is the convergence point.
// Then the states themselves: the keys' state digests (Keys), until every node shows the same.
import * as grpc from "@grpc/grpc-js";
import { type KeysResponse, ReplicaClient, type ScanChunk } from "../gen/deltaset/v1/replica.js";
import type { FinalReads } from "./history.js";
import type { WorkloadNode } from "./workload.js";

/** Every member of a set at one node (text), or throws. */
export function scanKey(client: ReplicaClient, key: string, timeoutMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const out: string[] = [];
    const stream = client.scan({ key, chunkSize: 5000, startAfter: Buffer.alloc(0), withText: true }, new grpc.Metadata(), { deadline: Date.now() + timeoutMs });
    stream.on("data", (c: ScanChunk) => {
      for (const m of c.members) out.push(m.text !== "" ? m.text : Buffer.from(m.element).toString("utf8"));
    });
    stream.on("error", reject);
    stream.on("end", () => resolve(out));
  });
}

/** read(client) at every node at once, by node id; null for a node whose read failed. */
async function atEveryNode<T>(nodes: readonly WorkloadNode[], read: (client: ReplicaClient) => Promise<T>): Promise<Record<string, T | null>> {
  const out: Record<string, T | null> = {};
  await Promise.all(
    nodes.map(async (n) => {
      const client = new ReplicaClient(n.address, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": 64 * 1024 * 1024 });
      try {
        out[n.nodeId] = await read(client);
      } catch {
        out[n.nodeId] = null;
      } finally {
        client.close();
      }
    }),
  );
  return out;
}

export function readAll(nodes: readonly WorkloadNode[], keys: readonly string[], timeoutMs = 5000): Promise<FinalReads> {
  return atEveryNode(nodes, async (client) => {
    const sets: Record<string, string[]> = {};
    for (const key of keys) sets[key] = (await scanKey(client, key, timeoutMs)).sort();
    return sets;
  });
}

export function readsIdentical(reads: FinalReads): boolean {
  const sigs = Object.values(reads).map((r) => (r === null ? null : JSON.stringify(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1)))));
  return sigs.length > 0 && sigs.every((s) => s !== null && s === sigs[0]);
}

/**
 * Read until identical or `boundMs` passed; returns the last reads and when they first matched
 * (Unix ms), or null.
 */
export async function readUntilIdentical(
  nodes: readonly WorkloadNode[],
  keys: readonly string[],
  opts: { boundMs: number; intervalMs?: number; onRound?: (round: number) => void },
): Promise<{ reads: FinalReads; identicalAt: number | null; rounds: number }> {
  const until = Date.now() + opts.boundMs;
  let rounds = 0;
  for (;;) {
    const reads = await readAll(nodes, keys);
    rounds++;
    opts.onRound?.(rounds);
    if (readsIdentical(reads)) return { reads, identicalAt: Date.now(), rounds };
    if (Date.now() >= until) return { reads, identicalAt: null, rounds };
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 200));
  }
}

/**
 * Each key's state digest at every node (Keys' state_digest, hex; "" where the node lists none or
 * holds no such key), or null for a node that did not answer.
 */
export function readStateDigests(nodes: readonly WorkloadNode[], keys: readonly string[], timeoutMs = 5000): Promise<Record<string, Record<string, string> | null>> {
  return atEveryNode(nodes, async (client) => {
    const digests: Record<string, string> = {};
    for (const key of keys) {
      const page = await new Promise<KeysResponse>((resolve, reject) =>
        client.keys({ prefix: key, pageSize: 1, pageToken: Buffer.alloc(0) }, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res))),
      );
      const k = page.keys.find((x) => x.key === key);
      digests[key] = k === undefined ? "" : Buffer.from(k.stateDigest).toString("hex");
    }
    return digests;
  });
}

/**
 * After identical reads, the states themselves (causal contexts included): read the keys' state
 * digests until every node shows the same ones or `boundMs` passed. Identical reads can precede
 * identical states (a remove's context, or an add's dot that a later remove took, still on its
 * way), and a context a node lacks can let a late copy of an add come back there. Returns when
 * they first matched (Unix ms), null past the bound, or "unknown" when no node lists any digest
 * (older nodes).
 */
export async function statesUntilIdentical(nodes: readonly WorkloadNode[], keys: readonly string[], opts: { boundMs: number; intervalMs?: number; placement?: boolean }): Promise<number | null | "unknown"> {
  const until = Date.now() + opts.boundMs;
  for (;;) {
    const digests = await readStateDigests(nodes, keys);
    const views = Object.values(digests);
    if (views.every((v) => v !== null && keys.every((k) => v[k] === ""))) return "unknown";
    if (views.length > 0 && views.every((v) => v !== null) && keys.every((k) => sameDigest(views.map((v) => v![k]!), opts.placement === true))) return Date.now();
    if (Date.now() >= until) return null;
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 200));
  }
}

/**
 * Whether the nodes show one state of a key. With placement only the key's owners hold it (the
 * others list no digest), so the nodes that list one must agree, and some node must.
 */
function sameDigest(digests: string[], placement: boolean): boolean {
  const held = placement ? digests.filter((d) => d !== "") : digests;
  return held.length > 0 ? held.every((d) => d === held[0]) : digests.every((d) => d === "");
}

/** One element whose Query answer at a node disagreed with that node's Scan. */
export interface QueryMismatch {
  node: string;
  key: string;
  element: string;
  /** What Query answered (the Scan said the opposite). */
  queryPresent: boolean;
}

/** Elements per Query call of the final check (below the default --max-elements-per-call). */
const QUERY_BATCH = 1000;

/**
 * The read path clients use, checked against the final reads: at every node, Query every element
 * ever added to each key and compare each answer with that node's Scan. Run once the nodes are
 * quiet (nothing changes between the two reads). A node that does not answer is left out (its
 * Scan failed too, and divergence reports it).
 */
export async function queryMismatches(nodes: readonly WorkloadNode[], reads: FinalReads, elements: ReadonlyMap<string, readonly string[]>, timeoutMs = 5000): Promise<{ checked: number; mismatches: QueryMismatch[] }> {
  let checked = 0;
  const mismatches: QueryMismatch[] = [];
  const answers = await atEveryNode(nodes, async (client) => {
    const out: Array<{ key: string; element: string; present: boolean }> = [];
    for (const [key, all] of elements) {
      for (let i = 0; i < all.length; i += QUERY_BATCH) {
        const texts = all.slice(i, i + QUERY_BATCH);
        const res = await new Promise<{ presence: Array<{ present: boolean }> }>((resolve, reject) =>
          client.query({ key, elements: [], texts: [...texts], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, r) => (err ? reject(err) : resolve(r))),
        );
        texts.forEach((element, j) => out.push({ key, element, present: res.presence[j]?.present === true }));
      }
    }
    return out;
  });
  for (const [node, list] of Object.entries(answers)) {
    const scanned = reads[node];
    if (list === null || scanned === null || scanned === undefined) continue;
    const sets = new Map(Object.entries(scanned).map(([k, v]) => [k, new Set(v)]));
    for (const a of list) {
      checked++;
      const inScan = sets.get(a.key)?.has(a.element) === true;
      if (inScan !== a.present) mismatches.push({ node, key: a.key, element: a.element, queryPresent: a.present });
    }
  }
  return { checked, mismatches };
}
