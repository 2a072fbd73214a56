// A no-op deltaset.v1.Replica server for the throughput ceilings of bench:replica: Add answers at
// once with an empty response, AddStream acknowledges each batch as it arrives. Same proto, same
// grpc-js server options as a node, its sessions' streams in KeyTables as a node's are
// (http2-stream-table.ts; with map-streams, in node:http2's own Map), its own process (as a node
// is). Prints "listening HOST:PORT".
// usage: node --import ./bin/register-ts.mjs test/bench/noop-server.ts HOST [map-streams]
import * as grpc from "@grpc/grpc-js";
import { type AddStreamAck, type AddStreamRequest, ReplicaService } from "../../services/gen/deltaset/v1/replica.js";
import { serverOptions } from "../../services/node/server.js";
import { useStreamTables } from "../../services/node/http2-stream-table.js";

const host = process.argv[2] ?? "127.0.0.1";
const server = new grpc.Server(serverOptions(64 * 1024 * 1024));
const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED, details: "no-op server" } as grpc.ServiceError);
server.addService(ReplicaService, {
  add: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => cb(null, { added: 0, replica: "", counters: [], duplicate: false, copies: 0 }),
  addStream: (call: grpc.ServerDuplexStream<AddStreamRequest, AddStreamAck>) => {
    call.on("data", (req: AddStreamRequest) => call.write({ seq: req.seq, batches: 1, elements: BigInt(req.elements.length), added: 0n, copies: 0 }));
    call.on("end", () => call.end());
  },
  remove: unimplemented,
  query: unimplemented,
  scan: (call: grpc.ServerWritableStream<unknown, unknown>) => call.emit("error", { code: grpc.status.UNIMPLEMENTED }),
  merge: unimplemented,
  increment: unimplemented,
  export: (call: grpc.ServerWritableStream<unknown, unknown>) => call.emit("error", { code: grpc.status.UNIMPLEMENTED }),
  import: unimplemented,
} as never);
server.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  if (process.argv[3] !== "map-streams") useStreamTables(server);
  process.stdout.write(`listening ${host}:${port}\n`);
});
process.on("SIGTERM", () => server.tryShutdown(() => process.exit(0)));
