// The background parts of a node: membership (SWIM) and anti-entropy gossip, wired so that the
// gossip neighbour set is always the live members. Chosen by configuration.
import { GossipService, type GossipServer } from "../gen/deltaset/v1/gossip.js";
import { MembershipService } from "../gen/deltaset/v1/membership.js";
import { NodeGossip } from "../gossip/node-gossip.js";
import { type SeedProvider, dnsSeeds, staticSeeds } from "../membership/discovery.js";
import { MembershipDriver } from "../membership/driver.js";
import { createMembershipService } from "../membership/grpc-service.js";
import { isLive } from "../membership/types.js";
import type { NodeConfig } from "./config.js";
import type { NodeContext, NodeExtension } from "./node.js";
import type { PeerDialer } from "./peer-dialer.js";

export interface ClusterParts {
  gossip: NodeGossip;
  membership: MembershipDriver;
}

/** Seeds from --seeds/--peers (static) and --seeds-dns (a name:port resolved periodically). */
export function seedProvider(config: NodeConfig): SeedProvider {
  const fixed = staticSeeds([...config.seeds, ...config.peers].filter((a) => a !== config.advertise));
  if (config.seedsDns === undefined || config.seedsDns === "") return fixed;
  const i = config.seedsDns.lastIndexOf(":");
  const dns = dnsSeeds({ name: config.seedsDns.slice(0, i), port: Number(config.seedsDns.slice(i + 1)) });
  return async () => [...new Set([...(await fixed()), ...(await dns())])].filter((a) => a !== config.advertise);
}

export function nodeExtensions(
  config: NodeConfig,
  opts: { onParts?: (parts: ClusterParts) => void; dialer?: PeerDialer } = {},
): Array<(ctx: NodeContext) => NodeExtension> {
  return [
    (ctx) => {
      let gossip: NodeGossip | undefined;
      let gossipImpl: GossipServer | undefined;
      const membership = new MembershipDriver({
        cluster: config.cluster,
        self: { nodeId: ctx.store.nodeId, address: config.advertise },
        seeds: seedProvider(config),
        config: {
          probeIntervalMs: config.membership.probeIntervalMs,
          probeTimeoutMs: config.membership.probeTimeoutMs,
          indirectChecks: config.membership.indirectProbes,
          suspicionMult: config.membership.suspicionMult,
          reapAfterMs: config.membership.reapAfterMs,
        },
        log: (message, error) => ctx.log.debug(message, { err: error }),
      });
      let lastPeers = "";
      const syncPeers = () => {
        const live = new Map<string, string>();
        for (const m of membership.members()) if (isLive(m.state) && m.nodeId !== ctx.store.nodeId) live.set(m.nodeId, m.address);
        if (gossip === undefined) return;
        gossip.setPeers(live);
        const now = gossip.peerIds().join(",");
        if (now !== lastPeers) {
          lastPeers = now;
          ctx.log.info("gossip neighbours", { neighbours: gossip.peerIds(), ackMap: gossip.engine.neighbours() });
        }
      };
      membership.onChange((change) => {
        ctx.log.info("membership change", { member: change.member.nodeId, address: change.member.address, kind: change.kind });
        syncPeers();
      });
      const pending: Array<[string, number, unknown]> = [];
      return {
        register(server) {
          server.addService(MembershipService, createMembershipService(membership));
          // Gossip frames can arrive before start(): answer through a late-bound implementation.
          const late: GossipServer = {
            exchange: (call, cb) => (gossipImpl ? gossipImpl.exchange(call, cb) : cb({ code: 14, details: "node is starting" })),
            pushState: (call, cb) => (gossipImpl ? gossipImpl.pushState(call, cb) : cb({ code: 14, details: "node is starting" })),
          };
          server.addService(GossipService, late);
        },
        async start() {
          gossip = await NodeGossip.create({
            store: ctx.store,
            log: ctx.log.child({ part: "gossip" }),
            cluster: config.cluster,
            partitions: config.partitions,
            intervalMs: config.gossip.intervalMs,
            algorithm: config.gossip.algorithm,
            bp: config.gossip.bp,
            rr: config.gossip.rr,
            maxBufferBytes: config.gossip.maxBufferBytes,
            stateChunkEntries: config.gossip.stateChunkEntries,
            rpcTimeoutMs: config.gossip.rpcTimeoutMs,
            maxMessageBytes: config.limits.maxMessageBytes,
            dialAddress: opts.dialer?.dial,
          });
          gossipImpl = gossip.service();
          for (const [key, type, delta] of pending.splice(0)) gossip.onLocalDelta(key, type as never, delta as never);
          syncPeers();
          gossip.start();
          membership.start();
          opts.onParts?.({ gossip, membership });
        },
        async stop() {
          const told = await membership.leave();
          ctx.log.info("left the cluster", { told });
          await membership.stop();
          await gossip?.stop();
        },
        onLocalDelta(key, type, delta) {
          if (gossip) gossip.onLocalDelta(key, type, delta);
          else pending.push([key, type, delta]);
        },
      };
    },
  ];
}
