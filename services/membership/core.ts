// The SWIM membership protocol as a deterministic state machine. It never reads a clock, draws
// randomness, sets a timer or does I/O: the caller passes `now` (milliseconds) into every method,
// gives it a seeded random source, delivers the calls it returns, feeds the answers (or failures)
// back, and calls tick() at nextDeadline(). The same code runs behind gRPC and in the simulator.
//
// Protocol (Das, Gupta, Motivala: SWIM, DSN 2002; with memberlist's round-robin probing):
// - every probe interval ping the next member of a shuffled round-robin order;
// - if it does not answer within the probe timeout, ask k other members to ping it (PingReq);
// - if nobody got an answer, mark it SUSPECT; after a timeout that grows with log(n), DEAD;
// - a member that hears it is suspected raises its incarnation and spreads ALIVE (refutation);
// - every state change is piggybacked on pings and replies a bounded number of times;
// - LEFT is a graceful departure, told to a few members at once; DEAD and LEFT are reaped later;
// - a periodic pull of a random member's full view (Join used as a sync) repairs missed updates.
//
// This class checks and routes messages and owns join, leave and the periodic pull; the mechanisms
// are one file each: member-table.ts (the member list), probe.ts (probes and PingReq relays),
// suspicion.ts (merging records, suspicion timers, refutation, reaping), dissemination.ts (what
// rides on each message), outbox.ts (calls awaiting answers and the output of the last step).
import { resolveConfig, type MembershipConfig } from "./config.js";
import { Dissemination } from "./dissemination.js";
import { MemberTable, toInfo } from "./member-table.js";
import { Outbox } from "./outbox.js";
import { Prober } from "./probe.js";
import { Suspicion } from "./suspicion.js";
import { sample, type Random } from "../common/prng.js";
import {
  MemberState,
  settingsFields,
  type Answer,
  type ClusterSettings,
  type CoreOutput,
  type DeferredAnswer,
  type JoinReply,
  type JoinRequest,
  type LeaveReply,
  type LeaveRequest,
  type MemberInfo,
  type MembershipStats,
  type NodeIdentity,
  type PingReply,
  type PingReqRequest,
  type PingRequest,
  type Refusal,
} from "./types.js";
import { checkAddress, checkCluster, checkMember, checkMembers, checkNodeId, checkSameCluster, checkSettings, quote } from "./validate.js";

export type { MembershipStats };

export interface MembershipCoreOptions {
  /**
   * Cluster name; messages of another cluster are refused as a setting that differs (--cluster),
   * naming both names.
   */
  cluster: string;
  /** This node. */
  self: NodeIdentity;
  /**
   * Settings every node of the cluster must share (partitions, replication factor). Sent with every
   * Join, Ping and PingReq; one of these whose settings differ is refused. Undefined: neither sent
   * nor checked.
   */
  settings?: ClusterSettings;
  /**
   * Incarnation to start at. A restarted node must start above every incarnation it used before:
   * pass the persisted value + 1, or a clock reading. If the cluster still remembers a higher one,
   * the node raises its own above it as soon as it hears about it (on join at the latest).
   */
  incarnation?: bigint;
  config?: Partial<MembershipConfig>;
  /** Seeded uniform source in [0, 1). */
  random: Random;
  /** Current time in milliseconds (the epoch of the caller's clock: Unix time in production). */
  now: number;
  /** Another live process claims this node's id, from this address (seen twice). */
  onIdentityConflict?: (address: string) => void;
}

export class MembershipCore {
  readonly cluster: string;
  readonly settings: ClusterSettings | undefined;
  readonly config: MembershipConfig;
  private readonly random: Random;
  private readonly table: MemberTable;
  private readonly outbox = new Outbox();
  private readonly dissemination: Dissemination;
  private readonly suspicion: Suspicion;
  private readonly prober: Prober;
  private nextPushPullAt: number;
  private joinedCluster = false;
  private readonly counters: MembershipStats = {
    probes: 0, probesFailed: 0, indirectProbes: 0, suspicionsRaised: 0, deathsDeclared: 0,
    refutations: 0, identityContests: 0, reaped: 0, refusedRequests: 0, invalidReplies: 0,
  };

  constructor(options: MembershipCoreOptions) {
    this.config = resolveConfig(options.config);
    const bad =
      checkNodeId(options.cluster, "cluster") ??
      checkNodeId(options.self?.nodeId, "self.nodeId") ??
      checkAddress(options.self?.address, "self.address");
    if (bad) throw new RangeError(bad.message);
    const incarnation = options.incarnation ?? 0n;
    if (typeof incarnation !== "bigint" || incarnation < 0n) throw new RangeError("incarnation must be a non-negative bigint");
    const settings = options.settings;
    if (settings !== undefined && !(Number.isInteger(settings.partitions) && settings.partitions >= 1 && settings.partitions <= 0xffffffff &&
      Number.isInteger(settings.replicationFactor) && settings.replicationFactor >= 0 && settings.replicationFactor <= 0xffffffff)) {
      throw new RangeError("settings.partitions must be a positive uint32 and settings.replicationFactor a uint32");
    }
    this.cluster = options.cluster;
    this.settings = options.settings === undefined ? undefined : { ...options.settings };
    this.random = options.random;
    const now = options.now;
    this.table = new MemberTable(options.self, incarnation, now);
    this.dissemination = new Dissemination(this.config, this.table);
    this.suspicion = new Suspicion(this.config, this.table, this.dissemination, this.outbox, this.counters, (id) => this.prober.admit(id), options.onIdentityConflict);
    this.prober = new Prober({
      cluster: this.cluster, settings: this.settings, config: this.config, random: this.random, table: this.table, dissemination: this.dissemination,
      suspicion: this.suspicion, outbox: this.outbox, counters: this.counters,
    }, now);
    // Drawn after the prober's phase: the order of draws from the seeded source is part of a run.
    this.nextPushPullAt = now + this.config.pushPullIntervalMs * (0.5 + this.random() / 2);
  }

  // ---- views -------------------------------------------------------------------------------

  get nodeId(): string {
    return this.table.self.nodeId;
  }

  get incarnation(): bigint {
    return this.table.self.incarnation;
  }

  /** True once this node is part of a cluster: a join answered, or another member contacted it. */
  get joined(): boolean {
    return this.joinedCluster;
  }

  /** True after leave(). */
  get left(): boolean {
    return this.table.left;
  }

  /** This node's record. */
  selfInfo(): MemberInfo {
    return toInfo(this.table.self);
  }

  /** The view, this node included, sorted by node id. */
  members(options: { includeDeparted?: boolean } = {}): MemberInfo[] {
    return this.table.list(options.includeDeparted ?? false);
  }

  /** One member's record, or undefined. */
  member(nodeId: string): MemberInfo | undefined {
    const member = this.table.lookup(nodeId);
    return member && toInfo(member);
  }

  /** Live members (ALIVE or SUSPECT), this node included unless it left. */
  liveCount(): number {
    return this.table.liveCount();
  }

  stats(): MembershipStats {
    return { ...this.counters };
  }

  /** Everything produced since the last call. */
  drain(): CoreOutput {
    return this.outbox.drain();
  }

  /** The earliest time at which tick() has work to do. */
  nextDeadline(): number {
    let at = Math.min(this.prober.nextDeadline(), this.suspicion.nextDeadline());
    if (this.config.pushPullIntervalMs > 0 && !this.left) at = Math.min(at, this.nextPushPullAt);
    for (const pending of this.outbox.pending.values()) at = Math.min(at, pending.deadline);
    return at;
  }

  // ---- actions of this node -----------------------------------------------------------------

  /** Ask the members at these addresses to admit this node. Returns how many calls were made. */
  join(addresses: readonly string[], now: number): number {
    if (this.left) return 0;
    const unique = [...new Set(addresses)].filter((a) => a !== this.table.self.address);
    for (const address of unique) this.sendJoin(address, now);
    return unique.length;
  }

  /** Leave gracefully: become LEFT and tell up to leaveFanout live members at once. */
  leave(now: number): number {
    if (this.left) return 0;
    const self = this.table.self;
    self.state = MemberState.LEFT;
    self.since = now;
    this.prober.stop();
    this.dissemination.broadcast(self);
    const targets = sample(this.table.liveOthers(), this.config.leaveFanout, this.random);
    for (const member of targets) {
      const id = this.outbox.nextId();
      const request: LeaveRequest = { cluster: this.cluster, nodeId: self.nodeId, incarnation: self.incarnation };
      this.outbox.pending.set(id, { kind: "leave", deadline: now + this.config.requestTimeoutMs });
      this.outbox.out.calls.push({ kind: "leave", id, address: member.address, nodeId: member.nodeId, request, timeoutMs: this.config.requestTimeoutMs });
    }
    return targets.length;
  }

  /** Run whatever is due at `now`: timeouts, the next probe, suspicion expiry, reaping, push/pull. */
  tick(now: number): void {
    for (const [id, pending] of [...this.outbox.pending]) {
      if (pending.deadline <= now) this.callFailed(id, now);
    }
    this.prober.expire(now);
    this.dissemination.expire(now);
    this.suspicion.expire(now);
    if (this.left) return;
    this.prober.tick(now);
    if (this.config.pushPullIntervalMs > 0 && now >= this.nextPushPullAt) {
      this.nextPushPullAt = now + this.config.pushPullIntervalMs;
      const peers = this.table.liveOthers().filter((m) => m.state === MemberState.ALIVE);
      const peer = sample(peers, 1, this.random)[0];
      if (peer) this.sendJoin(peer.address, now);
    }
  }

  // ---- inbound requests ---------------------------------------------------------------------

  handlePing(request: PingRequest, now: number): Answer<PingReply> {
    const bad =
      checkCluster(request.cluster) ??
      checkNodeId(request.from, "from") ??
      checkNodeId(request.target, "target") ??
      checkMembers(request.updates, "updates", this.config.maxUpdatesPerMessage) ??
      this.checkShared(request, `node ${quote(request.from)}`, `node ${quote(this.nodeId)}`);
    if (bad) return this.refuse(bad);
    if (request.from !== this.nodeId) this.joinedCluster = true;
    const corrections = this.suspicion.applyAll(request.updates, now);
    return {
      ok: true,
      reply: {
        from: this.nodeId,
        seq: request.seq,
        // A probe meant for another node id (say, a new node on a reused address) is not acked.
        ack: request.target === this.nodeId,
        updates: this.dissemination.piggyback(request.from, corrections),
      },
    };
  }

  handlePingReq(request: PingReqRequest, now: number): DeferredAnswer {
    const bad =
      checkCluster(request.cluster) ??
      checkNodeId(request.from, "from") ??
      checkNodeId(request.target, "target") ??
      checkAddress(request.targetAddress, "target_address") ??
      checkMembers(request.updates, "updates", this.config.maxUpdatesPerMessage) ??
      this.checkShared(request, `node ${quote(request.from)}`, `node ${quote(this.nodeId)}`);
    if (bad) return this.refuse(bad);
    this.joinedCluster = true;
    const corrections = this.suspicion.applyAll(request.updates, now);
    if (request.target === this.nodeId) {
      return { ok: true, reply: { from: this.nodeId, seq: request.seq, ack: true, updates: this.dissemination.piggyback(request.from, corrections) } };
    }
    return { ok: true, pending: this.prober.relay(request, corrections, now) };
  }

  handleJoin(request: JoinRequest, now: number): Answer<JoinReply> {
    const bad =
      checkCluster(request.cluster) ??
      checkMember(request.self, "self") ??
      this.checkShared(request, `joining node ${quote(request.self!.nodeId)} (${request.self!.address})`, `${this.joinedCluster ? "member" : "node"} ${quote(this.nodeId)}`);
    // A node in no cluster yet speaks for none: the joiner keeps trying rather than giving up.
    if (bad?.setting !== undefined) bad.inCluster = this.joinedCluster;
    if (bad) return this.refuse(bad);
    const joiner = request.self!;
    if (joiner.state !== MemberState.ALIVE) return this.refuse({ code: "INVALID_ARGUMENT", message: "self.state must be ALIVE" });
    if (joiner.nodeId === this.nodeId) {
      return this.refuse({
        code: "FAILED_PRECONDITION",
        message: `node id ${quote(joiner.nodeId)} is this node's own id; every node needs its own id`,
      });
    }
    if (this.left) return this.refuse({ code: "UNAVAILABLE", message: "this node is leaving the cluster" });
    this.suspicion.apply({ ...joiner, sinceUnixMs: BigInt(Math.floor(now)) }, now);
    this.joinedCluster = true;
    return { ok: true, reply: { from: this.nodeId, members: this.members({ includeDeparted: true }) } };
  }

  handleLeave(request: LeaveRequest, now: number): Answer<LeaveReply> {
    const bad =
      checkCluster(request.cluster) ??
      checkNodeId(request.nodeId, "node_id") ??
      (typeof request.incarnation === "bigint" && request.incarnation >= 0n ? undefined : { code: "INVALID_ARGUMENT" as const, message: "incarnation must be a uint64" }) ??
      checkSameCluster(request.cluster, this.cluster, `node ${quote(request.nodeId)}`, `node ${quote(this.nodeId)}`);
    if (bad) return this.refuse(bad);
    const known = this.table.lookup(request.nodeId);
    // Nothing to record about a node never seen: there is no address to keep a tombstone for.
    if (known) {
      this.suspicion.apply({
        nodeId: request.nodeId, address: known.address, state: MemberState.LEFT, incarnation: request.incarnation,
        sinceUnixMs: BigInt(Math.floor(now)),
      }, now);
    }
    return { ok: true, reply: { from: this.nodeId } };
  }

  // ---- answers to this node's calls ---------------------------------------------------------

  receivePingReply(id: number, reply: PingReply, now: number): void {
    const pending = this.outbox.pending.get(id);
    if (!pending || (pending.kind !== "probe-ping" && pending.kind !== "probe-pingReq" && pending.kind !== "relay-ping" && pending.kind !== "notice-ping")) return;
    const bad = checkNodeId(reply?.from, "from") ?? checkMembers(reply?.updates, "updates", this.config.maxUpdatesPerMessage);
    if (bad) {
      this.counters.invalidReplies++;
      this.callFailed(id, now);
      return;
    }
    this.outbox.pending.delete(id);
    this.suspicion.applyAll(reply.updates, now);
    this.prober.replied(pending, reply, now);
  }

  receiveJoinReply(id: number, reply: JoinReply, now: number): void {
    const pending = this.outbox.pending.get(id);
    if (!pending || pending.kind !== "join") return;
    const bad = checkNodeId(reply?.from, "from") ?? checkMembers(reply?.members, "members", this.config.maxUpdatesPerMessage);
    if (bad) {
      this.counters.invalidReplies++;
      this.callFailed(id, now);
      return;
    }
    this.outbox.pending.delete(id);
    this.joinedCluster = true;
    this.suspicion.applyAll(reply.members, now);
  }

  receiveLeaveReply(id: number, _reply: LeaveReply, _now: number): void {
    const pending = this.outbox.pending.get(id);
    if (pending?.kind === "leave") this.outbox.pending.delete(id);
  }

  /** A call failed or timed out (errors count as timeouts). Unknown or finished ids are ignored. */
  callFailed(id: number, now: number): void {
    const pending = this.outbox.pending.get(id);
    if (!pending) return;
    this.outbox.pending.delete(id);
    // Joins and leaves are not retried: the periodic pull repairs what a lost one misses.
    if (pending.kind !== "join" && pending.kind !== "leave") this.prober.failed(pending, now);
  }

  /** True while the call with this id awaits an answer. */
  isPending(id: number): boolean {
    return this.outbox.pending.has(id);
  }

  private sendJoin(address: string, now: number): void {
    const id = this.outbox.nextId();
    this.outbox.pending.set(id, { kind: "join", deadline: now + this.config.requestTimeoutMs });
    this.outbox.out.calls.push({
      kind: "join", id, address, timeoutMs: this.config.requestTimeoutMs,
      request: { cluster: this.cluster, self: toInfo(this.table.self), ...settingsFields(this.settings) },
    });
  }

  /** What every node of a cluster shares: its name, then the settings; a well-formed message is assumed. */
  private checkShared(
    request: { cluster: string; partitions?: number | undefined; replicationFactor?: number | undefined },
    caller: string,
    self: string,
  ): Refusal | undefined {
    return checkSameCluster(request.cluster, this.cluster, caller, self) ?? checkSettings(request, this.settings, caller, self);
  }

  private refuse(refusal: Refusal): { ok: false; refusal: Refusal } {
    this.counters.refusedRequests++;
    return { ok: false, refusal };
  }
}
