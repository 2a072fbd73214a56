// Emptying keys a sweep is done with (the warm-up's, and each cell's once it is measured), so the
// cells after them measure the same state size: a full-state mode ships every key's state every
// period, so keys left by earlier cells made each later cell of a group (the lossier ones) carry
// more and more data. A deleted set keeps only its header (its context), which a full state then
// ships instead of the elements.
import * as grpc from "@grpc/grpc-js";
import { call } from "../../client/rpc.js";
import { ReplicaClient } from "../../gen/deltaset/v1/replica.js";
import { readUntilIdentical } from "../final-reads.js";
import type { WorkloadNode } from "../workload.js";

export interface DeleteReport {
  /** From the first Delete until every node read every key empty (ms), or null past the bound. */
  emptiedMs: number | null;
}

/**
 * Delete keys at every node (each node removes the elements it has observed, so together they
 * remove every element written before, whether or not the nodes had converged), then wait until
 * every node reads all of them empty. Nothing may write to the keys meanwhile.
 */
export async function deleteEverywhere(nodes: readonly WorkloadNode[], keys: readonly string[], boundMs = 60_000): Promise<DeleteReport> {
  const start = Date.now();
  await Promise.all(
    nodes.map(async (n) => {
      const client = new ReplicaClient(n.address, grpc.credentials.createInsecure());
      try {
        for (const key of keys) {
          await call(client, client.delete, { key }, { timeoutMs: 10_000 }).catch((err: grpc.ServiceError) => {
            if (err.code !== grpc.status.NOT_FOUND) throw err; // a key this node never held
          });
        }
      } finally {
        client.close();
      }
    }),
  );
  const emptied = await readUntilIdentical(nodes, keys, { boundMs, intervalMs: 100 });
  const empty = emptied.identicalAt !== null && keys.every((k) => (emptied.reads[nodes[0]!.nodeId]?.[k]?.length ?? 0) === 0);
  return { emptiedMs: empty ? emptied.identicalAt! - start : null };
}
