// One real node for tests that send hand-encoded requests: a raw gRPC client (bytes in, bytes
// out, past any encoder) beside a typed Replica client, and the size of a key as the node reads it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "./node-process.ts";

export interface RawNode {
  node: NodeProcess;
  raw: grpc.Client;
  client: ReplicaClient;
  /** A unary call of `path` with these request bytes; resolves to the answer's bytes. */
  unary(path: string, body: Buffer): Promise<Buffer>;
  /** The key's size as a Query reads it. */
  size(key: string): Promise<bigint>;
  close(): Promise<void>;
}

/** Start a node on `listen` (host:0) with `args`, its data in a temporary directory removed by close. */
export async function startRawNode(listen: string, args: string[] = []): Promise<RawNode> {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-raw-node-"));
  const node = await startNodeProcess(["--listen", listen, "--data-dir", join(dir, "data"), ...args]);
  const raw = new grpc.Client(node.address, grpc.credentials.createInsecure());
  const client = replicaClient(node.address);
  return {
    node,
    raw,
    client,
    unary: (path, body) =>
      new Promise((resolve, reject) => {
        raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, body, (err, res) => (err ? reject(err) : resolve(res!)));
      }),
    size: async (key) => (await call(client, client.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false })).size,
    close: async () => {
      raw.close();
      client.close();
      await node.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
