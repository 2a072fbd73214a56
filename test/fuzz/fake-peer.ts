// A stand-in cluster member for the fuzzer: a gRPC server on a loopback address that answers the
// node's Membership probes for its own id (so the node keeps it alive and accepts the fuzzer's
// Gossip frames sent in its name) and swallows the node's gossip, acknowledging what it carried.
// It answers probes for any other id with no ack, so ghost members that mutants invent die and are
// reaped. It never dials anything.
import * as grpc from "@grpc/grpc-js";
import { GossipService, type GossipServer, type StateChunk } from "../../services/gen/deltaset/v1/gossip.ts";
import { MembershipService, type MembershipServer } from "../../services/gen/deltaset/v1/membership.ts";
import { createLogger } from "../../services/common/logger.ts";
import type { ClusterKeyring } from "../../services/node/cluster-keys.ts";
import { peerAuthInterceptor } from "../../services/node/peer-interceptors.ts";

export const FAKE_BOOT = 42n;

export interface FakePeer {
  nodeId: string;
  address: string;
  /** Calls the node made to it, by method. */
  calls: Record<string, number>;
  close(): Promise<void>;
}

/** With keys, the stand-in checks the node's proofs and signs its answers as a member does. */
export async function startFakePeer(host: string, nodeId: string, keys?: ClusterKeyring): Promise<FakePeer> {
  const calls: Record<string, number> = {};
  const count = (m: string) => (calls[m] = (calls[m] ?? 0) + 1);
  const server = new grpc.Server(
    keys === undefined ? {} : { interceptors: [peerAuthInterceptor({ self: () => nodeId, keys: () => keys, mutualTls: () => false, log: createLogger("error", {}, () => {}) })] },
  );
  const membership: MembershipServer = {
    join: (_c, cb) => (count("join"), cb(null, { from: nodeId, members: [] })),
    leave: (_c, cb) => (count("leave"), cb(null, { from: nodeId })),
    ping: (c, cb) => {
      count("ping");
      cb(null, { from: nodeId, seq: c.request.seq, ack: c.request.target === nodeId || c.request.target === "", updates: [] });
    },
    pingReq: (c, cb) => (count("pingReq"), cb(null, { from: nodeId, seq: c.request.seq, ack: false, updates: [] })),
    members: (_c, cb) => cb(null, { self: nodeId, members: [] }),
    watch: (c) => c.end(),
  };
  const gossip: GossipServer = {
    exchange: (c, cb) => {
      count("exchange");
      cb(null, { from: nodeId, acks: c.request.payloads.map((p) => ({ partition: p.partition, seq: p.seq })), boot: FAKE_BOOT, dropped: [], frameId: c.request.frameId, leaving: false, mac: Buffer.alloc(0) });
    },
    // Not served: the node falls back to Exchange calls for this peer (as for an older version).
    exchangeStream: (c) => {
      count("exchangeStream");
      c.emit("error", { code: grpc.status.UNIMPLEMENTED, details: "not served by the fake peer" });
    },
    handOver: (c, cb) => (count("handOver"), cb(null, { from: nodeId, pending: c.request.removes.length })),
    // Not served either: the node pushes this peer full state (as to an older version).
    contexts: (_c, cb) => (count("contexts"), cb({ code: grpc.status.UNIMPLEMENTED, details: "not served by the fake peer" })),
    pushState: (c, cb) => {
      count("pushState");
      let chunks = 0n;
      c.on("data", (_chunk: StateChunk) => chunks++);
      c.on("error", () => {});
      c.on("end", () => cb(null, { from: nodeId, acks: [], chunks, boot: FAKE_BOOT, dropped: [] }));
    },
  };
  server.addService(MembershipService, membership);
  server.addService(GossipService, gossip);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    nodeId,
    address: `${host}:${port}`,
    calls,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
