// Export a key's chunks from one node and Import them into another, with a Replica client per
// call: what the export and import tests do between clusters.
import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import type { CausalContext } from "../../services/gen/deltaset/v1/types.ts";
import type { ExportChunk, ImportResponse, ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { replicaClient } from "../../services/client/rpc.ts";

export async function withClient<T>(addr: string, fn: (c: ReplicaClient) => Promise<T>): Promise<T> {
  const c = replicaClient(addr);
  try {
    return await fn(c);
  } finally {
    c.close();
  }
}

/** Every chunk of an Export. */
export function exportOf(
  addr: string,
  key: string,
  opts: { maxEntries?: number; maxBytes?: number; since?: CausalContext; metadata?: grpc.Metadata } = {},
): Promise<ExportChunk[]> {
  return withClient(addr, async (c) => {
    const out: ExportChunk[] = [];
    const stream = c.export({ key, maxEntries: opts.maxEntries ?? 0, maxBytes: opts.maxBytes ?? 0, since: opts.since }, opts.metadata ?? new grpc.Metadata(), { deadline: Date.now() + 60_000 });
    for await (const ch of stream as AsyncIterable<ExportChunk>) out.push(ch);
    return out;
  });
}

/** Send chunks as one Import stream (the key given on the first chunk). */
export function importTo(addr: string, key: string, chunks: ExportChunk[], metadata = new grpc.Metadata()): Promise<ImportResponse> {
  return withClient(addr, (c) =>
    new Promise<ImportResponse>((resolve, reject) => {
      const s = c.import(metadata, { deadline: Date.now() + 60_000 }, (err, r) => (err ? reject(err) : resolve(r)));
      void (async () => {
        for (const [i, ch] of chunks.entries()) if (!s.write({ ...ch, key: i === 0 ? key : "" })) await once(s, "drain");
        s.end();
      })();
    }),
  );
}
