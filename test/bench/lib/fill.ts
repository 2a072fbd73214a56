// Fill one set over gRPC with batch Adds of 1000 elements: each client keeps one call in flight
// (the next call leaves as soon as its previous one is answered, as independent writers would),
// taking the next 1000 of elements from..to-1, named by name(i).
import { call, type replicaClient } from "../../../services/client/rpc.ts";

export async function batchFill(clients: ReadonlyArray<ReturnType<typeof replicaClient>>, key: string, from: number, to: number, name: (i: number) => Buffer): Promise<void> {
  let next = from;
  await Promise.all(
    clients.map(async (c) => {
      while (next < to) {
        const base = next;
        const n = Math.min(1000, to - base);
        next += n;
        await call(c, c.add, { key, elements: Array.from({ length: n }, (_, j) => name(base + j)), texts: [] }, { timeoutMs: 120_000 });
      }
    }),
  );
}
