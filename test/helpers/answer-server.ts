// A Replica server on grpc-js (bound as a node binds, server.ts) whose Add answers at once, except
// for key "hold", which it never answers: for tests of the gRPC layer below the node's services.
// Servers started here are shut down after the importing file's tests.
import { after } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call, type replicaClient } from "../../services/client/rpc.ts";
import { ReplicaService } from "../../services/gen/deltaset/v1/replica.ts";
import { bind } from "../../services/node/server.ts";

const started: grpc.Server[] = [];
after(() => started.forEach((s) => s.forceShutdown()));

export async function startAnswerServer(host: string): Promise<{ server: grpc.Server; address: string }> {
  const server = new grpc.Server();
  started.push(server);
  server.addService(ReplicaService, {
    add: (c: grpc.ServerUnaryCall<{ key: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      if (c.request.key !== "hold") cb(null, { added: 1, replica: "", counters: [], duplicate: false, copies: 0 });
    },
  } as never);
  const port = await bind(server, `${host}:0`, grpc.ServerCredentials.createInsecure());
  return { server, address: `${host}:${port}` };
}

/** One Add of one element to key. */
export const addOne = (c: ReturnType<typeof replicaClient>, key: string, timeoutMs = 10_000) => call(c, c.add, { key, elements: [Buffer.from("e")], texts: [] }, { timeoutMs });
