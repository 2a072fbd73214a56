// The background parts of a node: membership (SWIM) and anti-entropy gossip, wired so that the
// gossip neighbour set is always the live members. Chosen by configuration.
import { status } from "@grpc/grpc-js";
import { logThrottle } from "../common/log-throttle.js";
import { looksLikeTlsFailure } from "../common/tls-failure.js";
import { GossipService, type GossipServer } from "../gen/deltaset/v1/gossip.js";
import { MembershipService, type MembershipServer } from "../gen/deltaset/v1/membership.js";
import { NodeGossip, type NodeGossipOptions } from "../gossip/node-gossip.js";
import { type SeedProvider, dnsSeeds, staticSeeds } from "../membership/discovery.js";
import { MembershipDriver } from "../membership/driver.js";
import { createMembershipService } from "../membership/grpc-service.js";
import { MemberState, isLive } from "../membership/types.js";
import { type NodeConfig, replicationFactorOf } from "./config.js";
import type { NodeContext, NodeExtension } from "./node.js";
import { withBodyDigests } from "./peer-interceptors.js";
import { type PeerDialer, ToxiproxyDialer } from "./peer-dialer.js";

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

/**
 * The gossip settings as NodeGossip options, unchanged: it fails to compile if a setting's name is
 * not NodeGossip's own, so nothing is renamed on the way.
 */
function gossipSettings(config: NodeConfig): Pick<NodeGossipOptions, keyof NodeConfig["gossip"]> {
  return config.gossip;
}

export function nodeExtensions(
  config: NodeConfig,
  opts: { onParts?: (parts: ClusterParts) => void; dialer?: PeerDialer } = {},
): Array<(ctx: NodeContext) => NodeExtension> {
  return [
    (ctx) => {
      let gossip: NodeGossip | undefined;
      let gossipImpl: GossipServer | undefined;
      // Built in start(), once the server is bound and the advertised address is known.
      let membership: MembershipDriver | undefined;
      let membershipImpl: MembershipServer | undefined;
      let ownDialer: ToxiproxyDialer | undefined;
      let lastPeers = "";
      const syncPeers = () => {
        if (gossip === undefined || membership === undefined) return;
        const live = new Map<string, string>();
        const suspects = new Set<string>();
        for (const m of membership.members()) {
          if (!isLive(m.state) || m.nodeId === ctx.store.nodeId) continue;
          live.set(m.nodeId, m.address);
          if (m.state === MemberState.SUSPECT) suspects.add(m.nodeId);
        }
        if (ctx.ownership.setLive(live, ctx.advertise(), Date.now())) ctx.log.info("placement changed", { owned: ctx.ownership.owned().length, partitions: config.partitions, members: live.size + 1 });
        gossip.setPeers(live);
        gossip.setSuspects(suspects);
        const now = gossip.peerIds().join(",");
        if (now !== lastPeers) {
          lastPeers = now;
          ctx.log.info("gossip neighbours", { neighbours: gossip.peerIds(), ackMap: gossip.engine.neighbours() });
        }
      };
      const pending: Array<[string, number, unknown]> = [];
      const tlsWarnings = logThrottle(60_000);
      const settingsWarnings = logThrottle(60_000);
      // Set when the cluster refused this node's settings before it ever joined: it is no member.
      let refusedSettings = false;
      const identityConflicts = logThrottle(60_000);
      const unavailable = { code: status.UNAVAILABLE, details: "node is starting" };
      return {
        register(server) {
          // Calls can arrive before start(): answer through late-bound implementations.
          const lateMembership: MembershipServer = {
            join: (call, cb) => (membershipImpl ? membershipImpl.join(call, cb) : cb(unavailable)),
            leave: (call, cb) => (membershipImpl ? membershipImpl.leave(call, cb) : cb(unavailable)),
            ping: (call, cb) => (membershipImpl ? membershipImpl.ping(call, cb) : cb(unavailable)),
            pingReq: (call, cb) => (membershipImpl ? membershipImpl.pingReq(call, cb) : cb(unavailable)),
            members: (call, cb) => (membershipImpl ? membershipImpl.members(call, cb) : cb(unavailable)),
            watch: (call) => (membershipImpl ? membershipImpl.watch(call) : call.emit("error", unavailable)),
          };
          server.addService(withBodyDigests(MembershipService), lateMembership);
          const lateGossip: GossipServer = {
            exchange: (call, cb) => (gossipImpl ? gossipImpl.exchange(call, cb) : cb(unavailable)),
            exchangeStream: (call) => (gossipImpl ? gossipImpl.exchangeStream(call) : call.emit("error", unavailable)),
            pushState: (call, cb) => (gossipImpl ? gossipImpl.pushState(call, cb) : cb(unavailable)),
            contexts: (call, cb) => (gossipImpl ? gossipImpl.contexts(call, cb) : cb(unavailable)),
            handOver: (call, cb) => (gossipImpl ? gossipImpl.handOver(call, cb) : cb(unavailable)),
          };
          server.addService(withBodyDigests(GossipService), lateGossip);
        },
        async start() {
          // With --peer-proxy, peers are dialed through per-link fault proxies (chaos runs).
          const dialer = opts.dialer ?? (config.peerProxy ? (ownDialer = new ToxiproxyDialer({
            api: config.peerProxy,
            self: ctx.store.nodeId,
            log: (level, message, fields) => ctx.log[level](message, fields),
          })) : undefined);
          // A join goes to a seed address; the member there, if already known, names the link.
          const idAt = (address: string) => membership?.members({ includeDeparted: true }).find((m) => m.address === address)?.nodeId ?? "";
          const factor = replicationFactorOf(config);
          const driver = new MembershipDriver({
            cluster: config.cluster,
            self: { nodeId: ctx.store.nodeId, address: ctx.advertise() },
            // Nodes that differ in these cannot share partitions: a member refuses the other's Join
            // and Pings, so neither is placed on the other's partitions.
            settings: { partitions: config.partitions, replicationFactor: factor === "all" ? 0 : factor },
            onSettingsRefused: (refusal) => {
              if (!refusal.joined && refusal.refuserInCluster) {
                // Never a member, refused by a cluster's member: stop rather than serve alone with
                // settings the cluster refuses.
                refusedSettings = true;
                ctx.settingsRefused(`join refused by ${refusal.address}: ${refusal.message}`);
                return;
              }
              const admitted = settingsWarnings.admit(refusal.address);
              if (admitted === undefined) return;
              const fields = { reason: refusal.message, suppressedSinceLast: admitted.suppressed };
              // Two nodes alone, each refusing the other: neither speaks for a cluster, both keep trying.
              if (!refusal.joined) ctx.log.error(`membership: the node at ${refusal.address}, in no cluster either, refused this node's join: its --${refusal.setting} differs; this node keeps trying its seeds (give every node the same --${refusal.setting})`, fields);
              else ctx.log.error(`membership: the node at ${refusal.address} refused this node's join: its --${refusal.setting} differs from this node's; it is not a member of this cluster (give every node the same --${refusal.setting})`, fields);
            },
            onKeyRefused: (reason) => ctx.keyRefused(reason),
            seeds: seedProvider(config),
            config: config.membership,
            warn: (message, fields) => ctx.log.warn(`membership: ${message}`, fields),
            log: (message, error) => {
              // A TLS failure toward a peer is a configuration problem, not a peer being down.
              const text = error instanceof Error ? error.message : String(error ?? "");
              const tls = looksLikeTlsFailure(`${message} ${text}`);
              const admitted = tls ? tlsWarnings.admit(message.split(" ").slice(0, 4).join(" ")) : undefined;
              if (admitted !== undefined) ctx.log.warn(`membership: ${message}`, { err: error, suppressedSinceLast: admitted.suppressed });
              else ctx.log.debug(message, { err: error });
            },
            credentials: ctx.peerCredentials,
            channelOptions: ctx.peerChannelOptions,
            dialAddress: dialer ? (nodeId, address) => dialer.dial(nodeId ?? idAt(address), address) : undefined,
            // Two live processes under one id (a second node given the same --node-id, or a copy
            // of a data directory started beside its original) refute each other for ever; with
            // the same directory they also mint the same dots, one acknowledged add taking
            // another's place. Each draws a new replica id (at most once a minute), so their next
            // dots differ, and says so loudly: the operator must stop one. Meanwhile it greets
            // every neighbour each period, so that the one left ends with the other's writes.
            onIdentityConflict: (address) => {
              // At every sign of the other process, not only the logged ones (node-gossip.ts).
              gossip?.identityContested();
              const admitted = identityConflicts.admit(address);
              if (admitted === undefined) return;
              ctx.log.error("another live process runs with this node's id: stop one of them (every node needs its own --node-id and its own data directory); drawing a new replica id", { address, suppressedSinceLast: admitted.suppressed });
              void ctx.store.rotateReplicaId().then(
                (id) => ctx.log.warn("new replica id after an identity conflict", { replicaId: id }),
                (err) => ctx.log.error("could not draw a new replica id", { err }),
              );
            },
          });
          membership = driver;
          driver.onChange((change) => {
            ctx.log.info("membership change", { member: change.member.nodeId, address: change.member.address, kind: change.kind });
            syncPeers();
          });
          membershipImpl = createMembershipService(driver, ctx.stopping);
          gossip = await NodeGossip.create({
            store: ctx.store,
            log: ctx.log.child({ part: "gossip" }),
            cluster: config.cluster,
            partitions: config.partitions,
            ...gossipSettings(config),
            maxMessageBytes: config.limits.maxMessageBytes,
            maxFilterBytes: config.limits.maxFilterBytes,
            maxStateBytes: config.limits.maxStateBytes,
            dialAddress: dialer ? (id, address) => dialer.dial(id, address) : undefined,
            credentials: ctx.peerCredentials,
            channelOptions: ctx.peerChannelOptions,
            trace: ctx.telemetry?.span,
            ownership: ctx.ownership,
          });
          gossipImpl = gossip.service();
          const g = gossip;
          ctx.copies.confirmer = {
            holders: (key) => g.copyHolders(key),
            mark: (key) => g.copyMark(key),
            confirm: (key, need, timeoutMs, since) => g.confirmCopies(key, need, timeoutMs, since),
          };
          for (const [key, type, delta] of pending.splice(0)) gossip.onLocalDelta(key, type as never, delta as never);
          syncPeers();
          gossip.start();
          driver.start();
          ctx.telemetry?.observeCluster({ gossip, membership: driver });
          opts.onParts?.({ gossip, membership: driver });
          // Client calls wait for the first join through the seeds (node.ts opens them after
          // start): before it, a node knows no other member, takes every key for its own, and
          // answered reads of keys it does not own as absent. A seed that does not answer holds
          // it for at most a join's timeout; bounded here too (a seed lookup that hangs).
          const cap = 2 * config.membership.requestTimeoutMs;
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([driver.firstJoinSettled(), new Promise<void>((r) => (timer = setTimeout(r, cap)))]);
          clearTimeout(timer);
        },
        async stop() {
          // What this node acknowledged lately must reach a neighbour before it goes: its last
          // client calls have ended (node.ts drains them first), gossip still runs.
          // A node the cluster refused was never a member: nothing to ship to, nobody to tell.
          if (gossip !== undefined && membership !== undefined && !refusedSettings) {
            const r = await gossip.ship(ctx.config.leaveTimeoutMs);
            // unshipped: partitions no neighbour (with placement: no next owner) acknowledged, and keys whose deferred removes no owner took.
            if (r.unshipped > 0) ctx.log.warn("leaving with changes no neighbour acknowledged yet (--leave-timeout-ms); they stay on this node's disk until it returns", { unshipped: r.unshipped, waitedMs: r.waitedMs });
            else ctx.log.info("changes shipped to neighbours before leaving", { waitedMs: r.waitedMs });
          }
          if (membership !== undefined) {
            if (!refusedSettings) {
              const told = await membership.leave();
              ctx.log.info("left the cluster", { told });
            }
            await membership.stop();
          }
          await gossip?.stop();
          ownDialer?.close();
        },
        onLocalDelta(key, type, delta) {
          if (gossip) gossip.onLocalDelta(key, type, delta);
          else pending.push([key, type, delta]);
        },
      };
    },
  ];
}
