// Final reads: every key of every node read in full (Scan), repeated until all nodes return the
// same sets or a time bound passes. The time of the first identical round is the convergence point.
import * as grpc from "@grpc/grpc-js";
import { ReplicaClient, type ScanChunk } from "../gen/deltaset/v1/replica.js";
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

export async function readAll(nodes: readonly WorkloadNode[], keys: readonly string[], timeoutMs = 5000): Promise<FinalReads> {
  const out: FinalReads = {};
  await Promise.all(
    nodes.map(async (n) => {
      const client = new ReplicaClient(n.address, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": 64 * 1024 * 1024 });
      try {
        const sets: Record<string, string[]> = {};
        for (const key of keys) sets[key] = (await scanKey(client, key, timeoutMs)).sort();
        out[n.nodeId] = sets;
      } catch {
        out[n.nodeId] = null;
      } finally {
        client.close();
      }
    }),
  );
  return out;
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
