// Composition root of a node: store, gRPC server (Replica, Gossip, Membership, health,
// reflection), anti-entropy and membership, started and stopped in order; TLS, client
// authentication and telemetry as configured.
import { KeyTypeRules } from "../store/key-type-rules.js";
import { setMaxListeners } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { peerChannelOptions as peerChannelOptionsOf } from "./peer-channel.js";
import { ReplicaService } from "../gen/deltaset/v1/replica.js";
import { partitionOf } from "../gossip/partition.js";
import { createReplicaService, type LocalDeltaListener } from "../replica/service.js";
import type { CopyConfirmer } from "../replica/copies.js";
import { Store, type StoreWriteError } from "../store/store.js";
import { accessInterceptor } from "./auth.js";
import { ConfigError, type NodeConfig, replicationFactorOf } from "./config.js";
import { Ownership } from "../gossip/ownership.js";
import { Router } from "./routing.js";
import { ReadPull } from "./read-pull.js";
import { applyImport } from "../replica/import-apply.js";
import { ObjectType } from "../crdt/index.js";
import { NodeCredentials } from "./credential-reload.js";
import type { Logger } from "../common/logger.js";
import { logThrottle } from "../common/log-throttle.js";
import { prepareDataDir } from "./data-dir.js";
import { activeCalls, drainCalls } from "./active-calls.js";
import { StrictStringServer } from "./strict-strings.js";
import { RateLimitedWarn, peerAuthInterceptor, peerSigner } from "./peer-interceptors.js";
import { ForwardMarkCheck, MARK_PROOF_WINDOW_MS, forwardMarkSigner } from "./forward-marks.js";
import { addOperatorServices, bind, serverOptions, setAlive, setServing } from "./server.js";
import { useClientCallTables } from "./grpc-client-tables.js";
import { useLeanAsyncResourceBind } from "./async-resource-bind.js";
import { StartGate } from "./start-gate.js";
import { type NodeTelemetry, startTelemetry } from "./telemetry.js";
import { watchTlsHandshakes } from "./tls-handshake-log.js";
import { isLoopbackHost } from "./loopback.js";
import { tlsMode } from "./tls.js";
import { startTtlSweeper } from "./ttl-sweeper.js";

export interface NodeHandle {
  readonly nodeId: string;
  readonly address: string;
  readonly port: number;
  readonly store: Store;
  readonly server: grpc.Server;
  /** host:port of the Prometheus endpoint, when metrics are on. */
  readonly metricsAddress?: string;
  stop(reason?: string): Promise<void>;
  /** Reread tokens, cluster keys and certificates (SIGHUP); returns what was reloaded. */
  reload(reason: string): string[];
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
  /** Credentials for calls to peers (mutual TLS); undefined: plaintext. */
  peerCredentials?: grpc.ChannelCredentials;
  /** Channel options of every client to peers (the interceptor signing peer calls with the cluster key). */
  peerChannelOptions: grpc.ChannelOptions;
  /** Metrics and traces, when on. */
  telemetry?: NodeTelemetry;
  /** Which partitions this node owns (placement over the live members; cluster-wiring feeds it). */
  ownership: Ownership;
  /** Forwards calls for keys owned elsewhere. */
  router: Router;
  /** Aborted as the node starts to stop (before its running calls drain). */
  stopping: AbortSignal;
  /**
   * The cluster refused this node's settings (a member refused its join: its --cluster,
   * --partitions or --replication-factor differ) before it was ever a member: the node stops instead of serving
   * alone (NodeHooks.onSettingsRefused). The first call counts.
   */
  settingsRefused(reason: string): void;
  /**
   * This node, alone, is refused as a peer (UNAUTHENTICATED: its cluster key or certificate) by the
   * seeds that answer (reason), or no longer is (undefined): meanwhile it answers no client call and its health says NOT_SERVING,
   * rather than take writes no other node would get until the key is fixed.
   */
  keyRefused(reason: string | undefined): void;
  /** What client writes asking for copies wait on: set by the gossip layer once it runs. */
  copies: { confirmer?: CopyConfirmer };
}

/**
 * A member refused this node's join because a cluster-wide setting differs, while the node started:
 * it has stopped and does not serve. Exit status 2 in `deltaset node`, like any other bad setting.
 */
export class SettingsRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SettingsRefusedError";
  }
}

/** What the process running a node does when the node cannot go on. */
export interface NodeHooks {
  /**
   * The node's storage failed to write: it has stopped serving and is stopping (the store takes
   * no more writes, and what it holds in memory may be ahead of the disk). Called once, with the
   * stop under way; the process should exit once `stopped` settles so that it restarts from
   * its data directory. Default: nothing more (the node stops).
   */
  onFatal?: (reason: string, stopped: Promise<void>) => void;
  /**
   * After the node started serving alone (no seed answered yet), a member refused its join because
   * a cluster-wide setting differs: it is stopping. Called once, with the stop under way; the
   * process should exit (status 2: a bad setting) once `stopped` settles. While the node starts,
   * startNode throws SettingsRefusedError instead.
   */
  onSettingsRefused?: (reason: string, stopped: Promise<void>) => void;
}

export async function startNode(
  config: NodeConfig,
  log: Logger,
  extensions: Array<(ctx: NodeContext) => NodeExtension> = [],
  hooks: NodeHooks = {},
): Promise<NodeHandle> {
  // Certificates and tokens are read first: a bad path fails before anything starts.
  const creds = new NodeCredentials(config, log);
  const tls = creds.tls;
  const peersAuthenticated = creds.keys !== undefined || tls?.mutual === true;
  if (!peersAuthenticated && !isLoopbackHost(config.listen) && !config.insecurePeers) {
    throw new ConfigError(
      `listening on ${config.listen} (not loopback) with neither a cluster key (--cluster-key-file) nor mutual TLS (--tls-ca): ` +
        "anyone who reaches the port could gossip and change membership. Configure one, or pass --insecure-peers to accept that",
    );
  }
  if (creds.tokens === undefined && !isLoopbackHost(config.listen) && !config.insecureClients) {
    throw new ConfigError(
      `listening on ${config.listen} (not loopback) without client tokens (--auth-tokens-file): ` +
        "anyone who reaches the port could read, write, delete and merge every key. Configure tokens, or pass --insecure-clients to accept that (behind a NetworkPolicy or firewall)",
    );
  }
  prepareDataDir(config.dataDir, log);
  // The node's calls to its peers keep their per-call tables off V8's Map and Set, and node:http2's
  // bind of each request makes no hidden class per call (both process-wide; grpc-client-tables.ts,
  // async-resource-bind.ts): otherwise every call to a peer outlives young-generation collections.
  if (!useClientCallTables()) log.warn("this grpc-js release moved its connector: outgoing calls keep node:http2's and grpc-js's per-call Map and Set (more garbage-collection work per call)");
  useLeanAsyncResourceBind();
  const refusedJoins = logThrottle(60_000);
  // The store's own warnings come after it opened, once the node's id is known: they name it.
  let storeLog = log;
  const skewWarnings = logThrottle(60_000);
  // A write failure before the node serves fails its start; once it serves, the node stops (below).
  let writeFailed: StoreWriteError | undefined;
  let onWriteFailure = (err: StoreWriteError) => void (writeFailed ??= err);
  const store = await Store.open({
    onWriteFailure: (err) => onWriteFailure(err),
    dir: config.dataDir,
    nodeId: config.nodeId,
    partitions: config.partitions,
    partitionOf,
    sync: config.sync,
    batchStartOperations: config.groupCommitStartOperations,
    keyTypes: KeyTypeRules.parse(config.keyTypes),
    maxPendingRemoves: config.maxPendingRemoves,
    maxRemoveUnseenDots: config.maxRemoveUnseenDots,
    maxRemoveUnseenReplicas: config.maxRemoveUnseenReplicas,
    maxPendingRemoveBytes: config.maxPendingRemoveBytes,
    writeBufferBytes: config.storage.writeBufferBytes,
    cacheBytes: config.storage.cacheBytes,
    stateCacheBytes: config.storage.stateCacheBytes,
    presenceFilterBytes: config.storage.presenceFilterBytes,
    onUpgradeStart: (e) => log.warn("upgrading the data directory to the current store format; the node starts after it", { dir: config.dataDir, ...e }),
    onUpgrade: (e) => log.info("data directory upgraded to the current store format", { dir: config.dataDir, ...e }),
    onCounterJoinRefused: (e) => {
      const admitted = refusedJoins.admit(e.key);
      if (admitted !== undefined) storeLog.warn("counter join refused: it would leave int64; the key keeps its state here", { ...e, ...admitted });
    },
    clockSkewBoundMs: config.maxClockSkewMs,
    onClockSkew: (e) => {
      const admitted = skewWarnings.admit(e.report.direction);
      if (admitted !== undefined) {
        storeLog.warn(
          e.report.direction === "ahead"
            ? "a peer's retry filter (of a counter or a filter key) shows its clock ahead of this node's by more than --max-clock-skew-ms (or this clock is behind): retries may be recognised for less than the reported retention"
            : "a peer's retry filter (of a counter or a filter key) shows its clock behind this node's by more than --max-clock-skew-ms (or its delta arrived late): retries may be recognised for less than the reported retention",
          { key: e.key, ...e.report, boundMs: config.maxClockSkewMs, ...admitted },
        );
      }
    },
  });
  const nodeLog = log.child({ node: store.nodeId });
  storeLog = nodeLog;
  let telemetry: NodeTelemetry | undefined;
  try {
    telemetry = await startTelemetry(config, nodeLog, store, () => creds.certificateSecondsLeft());
    let advertise = config.advertise;
    const peerChannelOptions = peerChannelOptionsOf([peerSigner(() => store.nodeId, () => creds.keys, Date.now, nodeLog, () => config.peerLegacyProofs), forwardMarkSigner(() => store.nodeId, () => creds.keys)], {
      initialMs: config.peerReconnectInitialMs,
      maxMs: config.peerReconnectMaxMs,
    });
    const factor = replicationFactorOf(config);
    const ownership = new Ownership(store.nodeId, advertise, config.partitions, factor);
    const markWarn = new RateLimitedWarn(nodeLog);
    const marks = new ForwardMarkCheck({
      self: () => store.nodeId,
      keys: () => creds.keys,
      notBeforeMs: Date.now() - config.maxClockSkewMs,
      // A shorter window than peer calls' 60 s: forwarded client calls can run to thousands a
      // second, and the replay cache holds each nonce for the window (200 000 at most).
      skewMs: MARK_PROOF_WINDOW_MS,
      mutualTls: () => tls?.mutual === true,
      onDropped: (reason, path) => markWarn.warn(`marks ${reason} ${path}`, "a call carried forwarding marks no cluster key holder proved; they were dropped and the call served as a client's", { reason, method: path }),
    });
    const router = new Router({ ownership, credentials: creds.peerCredentials(), channelOptions: peerChannelOptions, maxMessageBytes: config.limits.maxMessageBytes, forwardTimeoutMs: config.forwardTimeoutMs, readAfterMoveMs: config.readAfterMoveMs, holds: async (key) => (await store.typeOf(key)) !== undefined, log: nodeLog, onForward: telemetry?.onForwarded, marks });
    // Aborted as the node starts to stop: open Watch streams end at once instead of holding the drain.
    const stopSignal = new AbortController();
    setMaxListeners(config.limits.maxWatchers + 16, stopSignal.signal);
    // Before the node serves, a refusal is kept and fails its start; once it serves, it stops it (below).
    let refused: string | undefined;
    let onSettingsRefused = (reason: string) => void (refused ??= reason);
    // Client calls wait until the node opens (its parts started: the first join among them), and
    // while its seeds refuse it as a peer (its cluster key or certificate).
    const gate = new StartGate();
    let stopping: Promise<void> | undefined;
    const keyRefused = (reason: string | undefined) => {
      gate.hold(reason);
      if (reason !== undefined) {
        nodeLog.error(`not in a cluster: ${reason}; client calls are refused UNAVAILABLE and health says NOT_SERVING until it joins (give it a key the cluster holds in --cluster-key-file, or a certificate of the cluster's CA, and reload with SIGHUP)`, { reason });
      } else {
        nodeLog.info("no longer refused as a peer: serving clients");
      }
      if (gate.opened && stopping === undefined) setServing(health, gate.serving);
    };
    const ctx: NodeContext = {
      config, log: nodeLog, store, advertise: () => advertise, peerCredentials: creds.peerCredentials(), peerChannelOptions, telemetry, ownership, router,
      stopping: stopSignal.signal, settingsRefused: (reason) => onSettingsRefused(reason), keyRefused, copies: {},
    };
    const exts = extensions.map((make) => make(ctx));
    // Told of every durable local change (calls, and a read's fetch from former holders): the
    // change is made, so a listener that throws is logged and the others are still told.
    const onLocalDelta = (key: string, type: ObjectType, delta: unknown) => {
      for (const e of exts) {
        try {
          e.onLocalDelta?.(key, type, delta);
        } catch (err) {
          nodeLog.error("local delta listener failed", { key, err });
        }
      }
    };
    router.usePull(
      new ReadPull({
        ownership,
        windowMs: config.readAfterMoveMs,
        timeoutMs: config.forwardTimeoutMs,
        maxBytes: config.limits.maxStateBytes,
        describe: (key) => store.describe(key),
        exportFrom: (address, req, metadata, options) => {
          const c = router.client(address);
          return c.export(req, metadata, options);
        },
        apply: async (chunks) => (await applyImport({ store, limits: config.limits, notify: onLocalDelta, clockSkewBoundMs: config.maxClockSkewMs }, chunks)).changed,
        log: nodeLog,
        onPull: (outcome) => telemetry?.onForwarded?.("ReadPull", outcome),
      }),
    );
    const peerAuth = peerAuthInterceptor({
      self: () => store.nodeId,
      keys: () => creds.keys,
      mutualTls: () => tls?.mutual === true,
      legacyProofs: () => config.peerLegacyProofs,
      log: nodeLog,
      onRefused: telemetry?.onRefused,
      // The replay cache starts empty: calls signed before this process started are not taken.
      notBeforeMs: Date.now() - config.maxClockSkewMs,
    });
    const access = accessInterceptor({ tokens: () => creds.tokens, onRefused: telemetry?.onRefused });
    const calls = activeCalls();
    const server = new StrictStringServer({ ...serverOptions(config.limits.maxMessageBytes, config.maxConcurrentStreams), interceptors: [peerAuth, access] }, calls, config.limits.maxRequestEntries);
    server.addService(
      ReplicaService,
      gate.wrap(ReplicaService, router.wrap(createReplicaService({
        store,
        limits: config.limits,
        log: nodeLog,
        onLocalDelta,
        onCall: telemetry?.onCall,
        now: Date.now,
        clockSkewBoundMs: config.maxClockSkewMs,
        addRoute: (call) => router.addRoute(call),
        stopping: stopSignal.signal,
        placement: ownership,
        copies: () => ctx.copies.confirmer,
        copiesTimeoutMs: config.copiesTimeoutMs,
        owners: (key) => {
          const p = ownership.partitionOf(key);
          return { partition: p, owners: ownership.ownerAddresses(p), replicationFactor: String(factor), local: ownership.owns(p) };
        },
      }))),
    );
    for (const e of exts) e.register?.(server);
    const health = addOperatorServices(server);
    // Logged before binding: the warning must show even when the address turns out unusable.
    const security = {
      tls: tlsMode(tls),
      clientAuth: creds.tokens ? `bearer tokens (${creds.tokens.size})` : "off",
      peerAuth: [creds.keys ? `cluster keys ${creds.keys.fingerprints().join(",")}` : "", tls?.mutual ? "node certificates" : ""].filter(Boolean).join(" + ") || "off",
    };
    // Every weakness that applies is logged (each its own warning); the summary alone when none.
    const weaknesses: string[] = [];
    if (!isLoopbackHost(config.listen)) {
      if (!peersAuthenticated) weaknesses.push("--insecure-peers: peer calls are NOT authenticated on a non-loopback address: anyone who reaches it can gossip data in and change membership");
      if (creds.tokens === undefined) weaknesses.push("--insecure-clients: the client API is open on a non-loopback address: anyone who reaches it can read, write, delete and merge every key");
      if (tls === undefined) weaknesses.push("serving WITHOUT TLS on a non-loopback address: traffic can be read and client tokens stolen on the way; set --tls-cert and --tls-key");
    }
    if (creds.keys !== undefined && config.peerLegacyProofs) weaknesses.push("--peer-legacy-proofs: peer calls of an earlier version are accepted (for a rolling upgrade): proofs naming no receiver, which a captured call can be replayed under to this node, and unary calls without a body digest, whose messages are decoded before their proofs are checked; turn it off once every node is upgraded");
    for (const w of weaknesses) nodeLog.warn(w, { listen: config.listen, ...security });
    if (weaknesses.length === 0) nodeLog.info("security", security);
    const port = await bind(server, config.listen, creds.serverCredentials());
    watchTlsHandshakes(server, nodeLog, (f) => telemetry?.onTlsHandshakeFailure?.(f.reason));
    const host = config.listen.slice(0, config.listen.lastIndexOf(":"));
    const address = `${host}:${port}`;
    if (advertise.endsWith(":0")) advertise = `${advertise.slice(0, -2)}:${port}`;
    for (const e of exts) await e.start?.();
    const sweeper = startTtlSweeper(store, config.ttlSweep, nodeLog);
    creds.useLogger(nodeLog);
    creds.watch();
    // Refused while starting: never opened to clients (the stop below follows in this same turn).
    if (refused === undefined) {
      gate.open();
      setAlive(health);
      setServing(health, gate.serving);
      nodeLog.info(gate.serving ? "node serving" : "node started, holding client calls: its seeds refuse it as a peer", { address, nodeId: store.nodeId, dataDir: config.dataDir });
    }

    const stop = (reason = "stop requested") =>
      (stopping ??= (async () => {
        nodeLog.info("node stopping", { reason });
        setServing(health, false);
        stopSignal.abort();
        health.endWatches("the node is stopping");
        creds.close();
        await sweeper.stop();
        // Running client calls end first while new ones are refused and gossip and membership still
        // run (peers' pings are answered, so nobody suspects this node meanwhile): the writes they
        // acknowledge are then shipped to neighbours by the cluster's stop (leave), not left here.
        calls.close();
        const how = await drainCalls(calls, config.drainTimeoutMs);
        for (const e of [...exts].reverse()) await e.stop?.();
        server.forceShutdown(); // only peer calls and idle connections are left
        router.close();
        await store.close();
        await telemetry?.shutdown();
        nodeLog.info("node stopped", { drain: how });
      })());
    // Fail-stop: after a failed write (a full disk, an I/O error, a failed fsync) the disk's state
    // is what counts, so the node stops serving at once and its process restarts it from disk.
    onWriteFailure = (err) => {
      nodeLog.error("storage write failed: the node stops; restart it to recover from its data directory (acknowledged writes are on disk)", {
        reason: err.message,
      });
      setServing(health, false);
      hooks.onFatal?.(err.message, stop("storage write failed"));
    };
    if (writeFailed !== undefined) onWriteFailure(writeFailed);
    const refusedLog = (reason: string) =>
      nodeLog.error("the cluster refused this node's settings: it is not a member and stops; start it with the same --cluster, --partitions and --replication-factor as the cluster's nodes", { reason });
    if (refused !== undefined) {
      refusedLog(refused);
      await stop("settings refused by the cluster");
      throw new SettingsRefusedError(refused);
    }
    let stoppedForSettings = false;
    onSettingsRefused = (reason) => {
      if (stoppedForSettings) return;
      stoppedForSettings = true;
      refusedLog(reason);
      setServing(health, false);
      const stopped = stop("settings refused by the cluster");
      if (hooks.onSettingsRefused) hooks.onSettingsRefused(reason, stopped);
    };
    return { nodeId: store.nodeId, address, port, store, server, metricsAddress: telemetry?.metricsAddress, stop, reload: (reason) => creds.reload(reason) };
  } catch (err) {
    // Already stopped (store and telemetry closed with it).
    if (err instanceof SettingsRefusedError) throw err;
    await telemetry?.shutdown();
    await store.close();
    throw err;
  }
}
