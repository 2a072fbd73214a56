// Runs a MembershipCore for real: wall-clock time, timers, a gRPC client per peer, the seed join
// loop, and change listeners. The gRPC server side (grpc-service.ts) reaches the core through
// driverEndpoint(); the public API stays start/stop/leave/members/onChange.
import { receiverMetadata } from "../client/peer-receiver.js";
import * as grpc from "@grpc/grpc-js";
import { logThrottle } from "../common/log-throttle.js";
import type { MembershipConfig } from "./config.js";
import { MembershipCore } from "./core.js";
import { SeedJoiner, type BackoffOptions, type SeedProvider } from "./discovery.js";
import { PeerPool } from "./peer-pool.js";
import { ProbeTiming, type ProbeTimingStats } from "./probe-timing.js";
import { REFUSED_SETTING_HEADER, REFUSER_IN_CLUSTER_HEADER, isClusterSetting, isLive, type ClusterSetting, type ClusterSettings, type MembershipStats } from "./types.js";
import type {
  Answer,
  DeferredAnswer,
  JoinReply,
  JoinRequest,
  LeaveReply,
  LeaveRequest,
  MemberInfo,
  MembershipChange,
  NodeIdentity,
  OutboundCall,
  PingReply,
  PingReqRequest,
  PingRequest,
  Refusal,
} from "./types.js";

export interface MembershipDriverOptions {
  /** Cluster name; peers of another cluster are refused (a Join of one as a setting that differs). */
  cluster: string;
  /** This node: stable id and the address peers dial. */
  self: NodeIdentity;
  /**
   * Settings every node of the cluster must share (partitions, replication factor): sent with
   * every Join, Ping and PingReq, and checked on those this node receives.
   */
  settings?: ClusterSettings;
  /**
   * A node refused this node's Join because a setting differs (its message names both values).
   * `refuserInCluster` says whether that node is in a cluster; `joined` whether this node is in
   * one all the same: for a join through the seeds,
   * told once every call of that attempt has ended, so a refusal beside a seed that admitted the
   * node comes with joined = true.
   */
  onSettingsRefused?: (refusal: SettingsRefusal) => void;
  /**
   * Told when this node, alone (never joined, or every other member gone), starts or stops being
   * refused UNAUTHENTICATED by a seed that answered its join: the seeds hold no cluster key this
   * node signs with, its certificate is not of their CA, or its clock is beyond their proof
   * window. The reason quotes the refusals;
   * undefined once it is in a cluster again, or no seed refuses it that way any more.
   */
  onKeyRefused?: (reason: string | undefined) => void;
  /** Addresses to join through (staticSeeds or dnsSeeds). */
  seeds: SeedProvider;
  config?: Partial<MembershipConfig>;
  /** Credentials for calls to peers; insecure by default. */
  credentials?: grpc.ChannelCredentials;
  /**
   * Incarnation to start at. Default: the current Unix time in ms, which is above every incarnation
   * an earlier process of this node used as long as the clock does not go back. Pass a persisted
   * value + 1 to be independent of the clock.
   */
  incarnation?: bigint;
  /** Extra channel options for peer clients. */
  channelOptions?: grpc.ChannelOptions;
  joinBackoff?: Partial<BackoffOptions>;
  /** Diagnostics (join failures, listener errors). */
  log?: (message: string, error?: unknown) => void;
  /** Operator warnings (probe round trips near the probe timeout: probe-timing.ts). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
  /** Uniform [0, 1) source; Math.random by default. */
  random?: () => number;
  /**
   * The address to dial for a peer (a per-link fault proxy in chaos runs); the peer's own address
   * by default. nodeId is undefined for joins through a seed address. May resolve later: the wait
   * counts against the call's timeout.
   */
  dialAddress?: (nodeId: string | undefined, address: string) => Promise<string> | string;
  /** Another live process claims this node's id, from this address. */
  onIdentityConflict?: (address: string) => void;
}

export interface SettingsRefusal {
  /** The address the Join went to. */
  address: string;
  setting: ClusterSetting;
  /** The refusal's message, naming both nodes' values. */
  message: string;
  /** The refusing node is in a cluster (false: it is alone, not joined, itself). */
  refuserInCluster: boolean;
  joined: boolean;
}

/** Codes of a call the peer never answered (down, unreachable, too slow, cancelled here). */
const NO_ANSWER = new Set<grpc.status>([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED]);

/** What a Join's refusal says, when a setting differing was the reason. */
function refusedSetting(error: grpc.ServiceError): { setting: ClusterSetting; refuserInCluster: boolean } | undefined {
  if (error.code !== grpc.status.FAILED_PRECONDITION) return undefined;
  const value = error.metadata?.get(REFUSED_SETTING_HEADER)[0];
  if (!isClusterSetting(value)) return undefined;
  return { setting: value, refuserInCluster: error.metadata.get(REFUSER_IN_CLUSTER_HEADER)[0] !== "0" };
}

export type ChangeListener = (change: MembershipChange) => void;

/** What the gRPC service needs from a running driver. */
export interface DriverEndpoint {
  readonly nodeId: string;
  running(): boolean;
  ping(request: PingRequest): Answer<PingReply>;
  /** The reply comes through `answer`, now or after the relayed probe. Returns a cancel function. */
  pingReq(request: PingReqRequest, answer: (result: PingReply | Refusal) => void): () => void;
  join(request: JoinRequest): Answer<JoinReply>;
  leave(request: LeaveRequest): Answer<LeaveReply>;
  /** Run when the driver stops (Watch streams end). Returns the unregister function. */
  onStop(hook: () => void): () => void;
}

const endpoints = new WeakMap<MembershipDriver, DriverEndpoint>();

/** The server-side hooks of a driver (used by createMembershipService). */
export function driverEndpoint(driver: MembershipDriver): DriverEndpoint {
  return endpoints.get(driver)!;
}

/**
 * The core's clock: Unix milliseconds that never go back (the process start time plus a monotonic
 * counter), so an NTP step cannot stall probing or fire every timeout at once.
 */
function clock(): number {
  return Math.floor(performance.timeOrigin + performance.now());
}

const UNAVAILABLE: Refusal = { code: "UNAVAILABLE", message: "membership is not running on this node" };

export class MembershipDriver {
  private readonly core: MembershipCore;
  private readonly pool: PeerPool;
  private readonly joiner: SeedJoiner;
  private readonly listeners = new Set<ChangeListener>();
  private readonly stopHooks = new Set<() => void>();
  private readonly deferred = new Map<number, (result: PingReply | Refusal) => void>();
  private readonly inflight = new Map<number, { call: grpc.ClientUnaryCall; address: string; settle: () => void }>();
  private readonly log: (message: string, error?: unknown) => void;
  private readonly warn: (message: string, fields: Record<string, unknown>) => void;
  private readonly probeTiming: ProbeTiming;
  private readonly dialAddress: MembershipDriverOptions["dialAddress"];
  private readonly onSettingsRefused: MembershipDriverOptions["onSettingsRefused"];
  /** Warnings about the nodes this one refused, once a minute per message. */
  private readonly refusedWarnings = logThrottle(60_000);
  /** Join calls of the seed join attempt under way, and the setting refusals among their answers. */
  private readonly attemptCalls = new Map<number, Omit<SettingsRefusal, "joined"> | undefined>();
  /** Per seed address: its last join call's refusal when it answered with one (cleared by a join it took or a call that got no answer). */
  private readonly joinRefusals = new Map<string, { code: grpc.status; details: string }>();
  /** What onKeyRefused was last told. */
  private keyRefusedReason: string | undefined;
  private readonly onKeyRefused: MembershipDriverOptions["onKeyRefused"];
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private state: "new" | "running" | "stopped" = "new";

  constructor(options: MembershipDriverOptions) {
    this.log = options.log ?? (() => {});
    this.warn = options.warn ?? (() => {});
    this.dialAddress = options.dialAddress;
    this.onSettingsRefused = options.onSettingsRefused;
    this.onKeyRefused = options.onKeyRefused;
    this.core = new MembershipCore({
      cluster: options.cluster,
      settings: options.settings,
      self: options.self,
      incarnation: options.incarnation ?? BigInt(Date.now()),
      config: options.config,
      random: options.random ?? Math.random,
      now: clock(),
      onIdentityConflict: options.onIdentityConflict,
    });
    const config = this.core.config;
    this.probeTiming = new ProbeTiming({ timeoutMs: config.probeTimeoutMs });
    this.pool = new PeerPool(options.credentials, Math.max(1000, config.probeIntervalMs), options.channelOptions);
    this.joiner = new SeedJoiner({
      seeds: options.seeds,
      self: options.self.address,
      attempt: (addresses) => this.attemptJoin(addresses),
      // Join until in a cluster, and again whenever every other member is gone.
      needsJoin: () => !this.core.left && (!this.core.joined || this.core.liveCount() <= 1),
      notLive: (seeds) => {
        const live = new Set(this.core.members().filter((m) => isLive(m.state)).map((m) => m.address));
        return seeds.filter((a) => !live.has(a));
      },
      reconcileMs: Math.max(5 * config.probeIntervalMs, 5000),
      backoff: options.joinBackoff,
      random: options.random,
      recheckMs: Math.max(config.probeIntervalMs, 1000),
      onError: (message, error) => this.log(message, error),
      onStillAlone: (failures, tried) => {
        // A seed that answered with a refusal is up: say what it said, not that nobody answered.
        const refusals = tried.flatMap((a) => (this.joinRefusals.has(a) ? [this.describeRefusal(a)] : []));
        if (refusals.length === 0) {
          this.warn("not in a cluster: no seed answered a join; this node serves alone meanwhile and keeps trying (check --seeds and that the seeds run and are reachable)", { joinAttempts: failures, lastTried: tried });
        } else {
          this.warn("not in a cluster: seeds refused this node's join; it keeps trying (an UNAUTHENTICATED refusal: the seeds hold no key of this node's --cluster-key-file, or its certificate is not of their CA, and it answers no client call meanwhile; a setting that differs: start it with the cluster's, it serves alone meanwhile)", { joinAttempts: failures, lastTried: tried, refusals });
        }
      },
    });
    endpoints.set(this, this.endpoint());
  }

  /** Round trips of the recent direct probes this node made, against its probe timeout. */
  probeTimingStats(): ProbeTimingStats {
    return this.probeTiming.stats();
  }

  /** Settles once the first join through the seeds has ended, joined or not (or there were no seeds). */
  firstJoinSettled(): Promise<void> {
    return this.joiner.firstAttempt;
  }

  /** Start probing and joining through the seeds (in the background). */
  start(): void {
    if (this.state !== "new") return;
    this.state = "running";
    this.joiner.start();
    this.arm();
  }

  /**
   * Stop without leaving (peers will detect the silence). Cancels calls in flight, answers pending
   * relayed probes with UNAVAILABLE, closes peer channels. Listeners get no more events.
   */
  async stop(): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const { call, settle } of this.inflight.values()) {
      call.cancel();
      settle();
    }
    this.inflight.clear();
    for (const answer of this.deferred.values()) answer(UNAVAILABLE);
    this.deferred.clear();
    for (const hook of [...this.stopHooks]) hook();
    this.stopHooks.clear();
    await this.joiner.stop();
    this.pool.closeAll();
  }

  /**
   * Leave gracefully: become LEFT, tell up to leaveFanout members at once and wait (at most the
   * request timeout) until they answered. Returns how many acknowledged. Call stop() afterwards.
   */
  async leave(): Promise<number> {
    if (this.state !== "running" || this.core.left) return 0;
    this.core.leave(clock());
    const sent = this.pump();
    const results = await Promise.all(sent.filter((s) => s.call.kind === "leave").map((s) => s.done));
    return results.filter(Boolean).length;
  }

  /** The core's counters (probes, refutations, identity contests...). */
  stats(): MembershipStats {
    return this.core.stats();
  }

  /** The current view, this node included, sorted by node id. */
  members(options: { includeDeparted?: boolean } = {}): MemberInfo[] {
    return this.core.members(options);
  }

  /** Subscribe to membership changes; returns the unsubscribe function. */
  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // ---- internals ----------------------------------------------------------------------------

  private endpoint(): DriverEndpoint {
    return {
      nodeId: this.core.nodeId,
      running: () => this.state === "running",
      onStop: (hook) => {
        this.stopHooks.add(hook);
        return () => this.stopHooks.delete(hook);
      },
      ping: (request) => this.inbound(() => this.core.handlePing(request, clock())),
      join: (request) => this.inbound(() => this.core.handleJoin(request, clock())),
      leave: (request) => this.inbound(() => this.core.handleLeave(request, clock())),
      pingReq: (request, answer) => {
        if (this.state !== "running") {
          answer(UNAVAILABLE);
          return () => {};
        }
        const result: DeferredAnswer = this.core.handlePingReq(request, clock());
        if (!result.ok) {
          this.noteRefusal(result.refusal);
          answer(result.refusal);
        } else if (result.pending === undefined) answer(result.reply);
        else this.deferred.set(result.pending, answer);
        this.pump();
        const pending = result.ok ? result.pending : undefined;
        return () => {
          if (pending !== undefined) this.deferred.delete(pending);
        };
      },
    };
  }

  private inbound<T>(handle: () => Answer<T>): Answer<T> {
    if (this.state !== "running") return { ok: false, refusal: UNAVAILABLE };
    const answer = handle();
    if (!answer.ok) this.noteRefusal(answer.refusal);
    this.pump();
    return answer;
  }

  /** Join through these addresses; resolves once all join calls finished, true if joined. */
  private async attemptJoin(addresses: string[]): Promise<boolean> {
    if (this.state !== "running") return false;
    this.core.join(addresses, clock());
    const joins = this.pump().filter((s) => s.call.kind === "join");
    for (const s of joins) this.attemptCalls.set(s.call.id, undefined);
    try {
      await Promise.all(joins.map((s) => s.done));
    } finally {
      for (const s of joins) {
        const refusal = this.attemptCalls.get(s.call.id);
        this.attemptCalls.delete(s.call.id);
        if (refusal !== undefined && this.state === "running") this.reportSettingsRefused(refusal);
      }
    }
    return this.core.joined;
  }

  /** Why this node, alone, is refused as a peer by its seeds (what onKeyRefused was last told), or undefined. */
  get peerRefusal(): string | undefined {
    return this.keyRefusedReason;
  }

  /** "ADDRESS: CODE details" of a seed's last join refusal. */
  private describeRefusal(address: string): string {
    const r = this.joinRefusals.get(address)!;
    return `${address}: ${grpc.status[r.code]} ${r.details}`;
  }

  /** Tell onKeyRefused when whether this node, alone, is refused for its cluster key changed. */
  private checkKeyRefused(): void {
    if (this.onKeyRefused === undefined || this.state !== "running") return;
    const alone = !this.core.joined || this.core.liveCount() <= 1;
    const refusedBy = alone ? [...this.joinRefusals].filter(([, r]) => r.code === grpc.status.UNAUTHENTICATED).map(([a]) => a) : [];
    const reason =
      refusedBy.length > 0 ? `its seeds refuse it as a peer: its cluster key or node certificate is not the cluster's (${refusedBy.map((a) => this.describeRefusal(a)).join("; ")})` : undefined;
    if (reason === this.keyRefusedReason) return;
    this.keyRefusedReason = reason;
    this.onKeyRefused(reason);
  }

  /** Deliver everything the core produced; returns the calls sent, each with its completion. */
  private pump(): { call: OutboundCall; done: Promise<boolean> }[] {
    const out = this.core.drain();
    if (out.events.length > 0) this.checkKeyRefused();
    for (const change of out.events) {
      if (change.kind === "reaped") this.pruneChannels();
      for (const listener of this.listeners) {
        try {
          listener(change);
        } catch (error) {
          this.log("membership listener failed", error);
        }
      }
    }
    for (const reply of out.replies) {
      const answer = this.deferred.get(reply.requestId);
      this.deferred.delete(reply.requestId);
      answer?.(reply.reply);
    }
    const sent = this.state === "running" ? out.calls.map((call) => ({ call, done: this.send(call) })) : [];
    this.arm();
    return sent;
  }

  /** Make one call; resolves true on a valid answer, false on any error (errors count as timeouts). */
  private send(call: OutboundCall): Promise<boolean> {
    const dial = this.dialAddress ? this.dialAddress(call.kind === "join" ? undefined : call.nodeId, call.address) : call.address;
    if (typeof dial === "string") return this.sendVia(call, dial, Date.now() + call.timeoutMs);
    // The route is still being set up: the call fails like a timeout if that takes too long.
    const deadline = Date.now() + call.timeoutMs;
    return new Promise((resolve) => {
      let done = false;
      const timer = setTimeout(() => {
        if (done) return;
        done = true;
        if (this.state !== "running") return resolve(false);
        this.core.callFailed(call.id, clock());
        this.pump();
        resolve(false);
      }, call.timeoutMs);
      void dial.then((address) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (this.state !== "running") return resolve(false);
        void this.sendVia(call, address, deadline).then(resolve);
      });
    });
  }

  /** A request refused because a setting differs is an operator's matter: warn, once a minute per message. */
  private noteRefusal(refusal: Refusal): void {
    if (refusal.setting === undefined) return;
    const admitted = this.refusedWarnings.admit(refusal.message);
    if (admitted !== undefined) this.warn(`refused a node whose --${refusal.setting} differs from this node's; it is not admitted as a member`, { reason: refusal.message, suppressedSinceLast: admitted.suppressed });
  }

  private reportSettingsRefused(refusal: Omit<SettingsRefusal, "joined">): void {
    try {
      this.onSettingsRefused?.({ ...refusal, joined: this.core.joined });
    } catch (error) {
      this.log("settings refusal listener failed", error);
    }
  }

  /** A direct probe answered after rttMs: warn when recent round trips near the probe timeout. */
  private noteRoundTrip(rttMs: number): void {
    const w = this.probeTiming.record(rttMs, clock());
    if (w === undefined) return;
    this.warn("probe round trips are close to the probe timeout: healthy peers will be suspected, and membership traffic multiplies; set --probe-timeout-ms to about twice the slowest round trip between nodes (and --probe-interval-ms above it)", {
      p95RoundTripMs: Math.round(w.p95Ms),
      probeTimeoutMs: w.timeoutMs,
      samples: w.samples,
    });
  }

  private sendVia(call: OutboundCall, dialed: string, deadline: number): Promise<boolean> {
    return new Promise((resolve) => {
      const client = this.pool.client(call.address, dialed);
      const options = { deadline };
      let settled = false;
      const settle = () => {
        if (!settled) {
          settled = true;
          this.inflight.delete(call.id);
        }
      };
      const finish = (error: grpc.ServiceError | null, accept: () => void) => {
        settle();
        if (this.state !== "running") return resolve(false);
        if (call.kind === "join") {
          // Only an answer from the seed is a refusal; no answer (down, unreachable, timed out) is not.
          if (error && !NO_ANSWER.has(error.code)) this.joinRefusals.set(call.address, { code: error.code, details: (error.details ?? "").slice(0, 300) });
          else this.joinRefusals.delete(call.address);
        }
        if (error) {
          if (call.kind === "join" || call.kind === "leave") this.log(`${call.kind} call to ${call.address} failed: ${error.message}`);
          const refused = call.kind === "join" ? refusedSetting(error) : undefined;
          if (refused !== undefined) {
            const refusal = { address: call.address, ...refused, message: error.details };
            // A seed join attempt reports it once all its calls ended; another join (the periodic pull) at once.
            if (this.attemptCalls.has(call.id)) this.attemptCalls.set(call.id, refusal);
            else this.reportSettingsRefused(refusal);
          }
          this.core.callFailed(call.id, clock());
        } else {
          accept();
        }
        this.pump();
        if (call.kind === "join") this.checkKeyRefused();
        resolve(!error);
      };
      let handle: grpc.ClientUnaryCall;
      switch (call.kind) {
        case "ping": {
          const sentAt = performance.now();
          handle = client.ping(call.request, receiverMetadata(call.nodeId), options, (error, reply) =>
            finish(error, () => {
              this.noteRoundTrip(performance.now() - sentAt);
              this.core.receivePingReply(call.id, reply, clock());
            }));
          break;
        }
        case "pingReq":
          handle = client.pingReq(call.request, receiverMetadata(call.nodeId), options, (error, reply) =>
            finish(error, () => this.core.receivePingReply(call.id, reply, clock())));
          break;
        case "join":
          handle = client.join(call.request, new grpc.Metadata(), options, (error, reply) =>
            finish(error, () => this.core.receiveJoinReply(call.id, reply, clock())));
          break;
        case "leave":
          handle = client.leave(call.request, receiverMetadata(call.nodeId), options, (error, reply) =>
            finish(error, () => this.core.receiveLeaveReply(call.id, reply, clock())));
          break;
      }
      if (!settled) this.inflight.set(call.id, { call: handle, address: call.address, settle: () => resolve(false) });
    });
  }

  /** Keep one timer armed for the core's next deadline. */
  private arm(): void {
    if (this.state !== "running") return;
    const now = clock();
    // Even with nothing due, wake up once per probe interval (cheap, and robust to clock jumps).
    const at = Math.min(this.core.nextDeadline(), now + this.core.config.probeIntervalMs);
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      if (this.state !== "running") return;
      this.core.tick(clock());
      this.pump();
    }, Math.max(0, at - now));
    this.timer.unref();
  }

  /** Close channels to addresses no member uses any more. */
  private pruneChannels(): void {
    const keep = new Set(this.core.members({ includeDeparted: true }).map((m) => m.address));
    for (const { address } of this.inflight.values()) keep.add(address);
    this.pool.prune(keep);
  }
}
