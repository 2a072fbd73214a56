// Composition root of a node: store, gRPC server (Replica, Gossip, Membership, health,
// reflection), anti-entropy and membership, started and stopped in order.
import { mkdirSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { ReplicaService } from "../gen/deltaset/v1/replica.js";
import { partitionOf } from "../gossip/partition.js";
import { createReplicaService, type LocalDeltaListener } from "../replica/service.js";
import { Store } from "../store/store.js";
import type { NodeConfig } from "./config.js";
import type { Logger } from "./logger.js";
import { addOperatorServices, bind, drain, serverOptions, setServing } from "./server.js";

export interface NodeHandle {
  readonly nodeId: string;
  readonly address: string;
  readonly port: number;
  readonly store: Store;
  readonly server: grpc.Server;
  stop(reason?: string): Promise<void>;
}

/** Extra services and background work a node runs beside the Replica service. */
export interface NodeExtension {
  /** Add services to the server before it binds. */
  register?(server: grpc.Server): void;
  /** Start background work once the server listens. */
  start?(): Promise<void> | void;
  /** Stop background work (before the store closes). */
  stop?(): Promise<void> | void;
  /** Receives each durable local change. */
  onLocalDelta?: LocalDeltaListener;
}

export interface NodeContext {
  config: NodeConfig;
  log: Logger;
  store: Store;
  /** The address peers dial; known once the server is bound (a listen port 0 is resolved). */
  advertise(): string;
}

export async function startNode(
  config: NodeConfig,
  log: Logger,
  extensions: Array<(ctx: NodeContext) => NodeExtension> = [],
): Promise<NodeHandle> {
  mkdirSync(config.dataDir, { recursive: true });
  const store = await Store.open({
    dir: config.dataDir,
    nodeId: config.nodeId,
    partitions: config.partitions,
    partitionOf,
    sync: config.sync,
  });
  const nodeLog = log.child({ node: store.nodeId });
  try {
    let advertise = config.advertise;
    const ctx: NodeContext = { config, log: nodeLog, store, advertise: () => advertise };
    const exts = extensions.map((make) => make(ctx));
    const server = new grpc.Server(serverOptions(config.limits.maxMessageBytes));
    server.addService(
      ReplicaService,
      createReplicaService({
        store,
        limits: config.limits,
        log: nodeLog,
        onLocalDelta: (key, type, delta) => {
          for (const e of exts) e.onLocalDelta?.(key, type, delta);
        },
      }),
    );
    for (const e of exts) e.register?.(server);
    const health = addOperatorServices(server);
    const port = await bind(server, config.listen, grpc.ServerCredentials.createInsecure());
    const host = config.listen.slice(0, config.listen.lastIndexOf(":"));
    const address = `${host}:${port}`;
    if (advertise.endsWith(":0")) advertise = `${advertise.slice(0, -2)}:${port}`;
    for (const e of exts) await e.start?.();
    setServing(health, true);
    nodeLog.info("node serving", { address, nodeId: store.nodeId, dataDir: config.dataDir });

    let stopping: Promise<void> | undefined;
    const stop = (reason = "stop requested") =>
      (stopping ??= (async () => {
        nodeLog.info("node stopping", { reason });
        setServing(health, false);
        for (const e of [...exts].reverse()) await e.stop?.();
        const how = await drain(server, config.drainTimeoutMs);
        await store.close();
        nodeLog.info("node stopped", { drain: how });
      })());
    return { nodeId: store.nodeId, address, port, store, server, stop };
  } catch (err) {
    await store.close();
    throw err;
  }
}
