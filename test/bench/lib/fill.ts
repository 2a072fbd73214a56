// Fill one set over gRPC with batch Adds: 1000 elements per call, one call in flight per client,
// elements from..to-1 named by name(i).
import { call, type replicaClient } from "../../../services/client/rpc.ts";

export async function batchFill(clients: ReadonlyArray<ReturnType<typeof replicaClient>>, key: string, from: number, to: number, name: (i: number) => Buffer): Promise<void> {
  let filled = from;
  while (filled < to) {
    const calls: Promise<unknown>[] = [];
    for (let k = 0; k < clients.length && filled < to; k++) {
      const base = filled;
      const n = Math.min(1000, to - filled);
      filled += n;
      const c = clients[k]!;
      calls.push(call(c, c.add, { key, elements: Array.from({ length: n }, (_, j) => name(base + j)), texts: [] }, { timeoutMs: 120_000 }));
    }
    await Promise.all(calls);
  }
}
