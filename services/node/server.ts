// The gRPC server of a node: one listen address for every service, plus grpc.health.v1 and
// server reflection over the deltaset protos (so grpcurl can list and describe everything).
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { protoPath as healthProtoPath } from "grpc-health-check";
import { NodeHealth } from "./health.js";
import { ConfigError } from "./config.js";
import { useStreamTables } from "./http2-stream-table.js";

export const PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));
export const PROTO_FILES = ["deltaset/v1/types.proto", "deltaset/v1/replica.proto", "deltaset/v1/gossip.proto", "deltaset/v1/membership.proto"];
export const SERVICE_NAMES = ["deltaset.v1.Replica", "deltaset.v1.Gossip", "deltaset.v1.Membership"];
/**
 * The health name of the process itself, for liveness probes: SERVING once the node has started,
 * whether or not it serves clients (service "" says that: a node held because its seeds refuse it
 * as a peer is alive, and restarting it would not help).
 */
export const LIVENESS = "liveness";

export function serverOptions(maxMessageBytes: number, maxConcurrentStreams?: number): grpc.ServerOptions {
  return {
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
    ...(maxConcurrentStreams === undefined ? {} : { "grpc.max_concurrent_streams": maxConcurrentStreams }),
    // Keep idle client connections alive through NATs and proxies, and drop dead ones.
    "grpc.keepalive_time_ms": 60_000,
    "grpc.keepalive_timeout_ms": 20_000,
    "grpc.keepalive_permit_without_calls": 1,
    // Channelz (per-call counters and timestamps for a debugging service this node does not
    // serve) costs every call event-loop time.
    "grpc.enable_channelz": 0,
  };
}

/** Add health and reflection services; returns the health implementation to flip status. */
export function addOperatorServices(server: grpc.Server): NodeHealth {
  const health = new NodeHealth(["", LIVENESS, ...SERVICE_NAMES], "NOT_SERVING");
  health.addToServer(server);
  const definitions = protoLoader.loadSync([...PROTO_FILES, healthProtoPath], {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  new ReflectionService(definitions).addToServer(server);
  return health;
}

/** The node has started: its liveness name says SERVING from now on (until the process ends). */
export function setAlive(health: NodeHealth): void {
  health.setStatus(LIVENESS, "SERVING");
}

export function setServing(health: NodeHealth, serving: boolean): void {
  const s = serving ? "SERVING" : "NOT_SERVING";
  health.setStatus("", s);
  for (const name of SERVICE_NAMES) health.setStatus(name, s);
}

/**
 * Listen on address; an address that cannot be taken (in use, not local) is a ConfigError naming it.
 * The sessions it accepts keep their open streams off a Map (http2-stream-table.ts).
 */
export function bind(server: grpc.Server, address: string, creds: grpc.ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, creds, (err, port) => {
      if (!err) {
        useStreamTables(server);
        return resolve(port);
      }
      // grpc-js wraps the socket errors: "No address added out of total 1 resolved errors: [listen EADDRINUSE: ...]".
      const why = /errors: \[(.*)\]$/s.exec(err.message)?.[1] ?? err.message;
      reject(new ConfigError(`cannot listen on ${address} (--listen): ${why}`));
    });
  });
}

