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
import { BroadcastQueue } from "./broadcast-queue.js";
import {
  probeDurationMs,
  resolveConfig,
  retransmitLimit,
  suspicionTimeoutMs,
  type MembershipConfig,
} from "./config.js";
import { supersedes } from "./precedence.js";
import { ProbeOrder } from "./probe-order.js";
import { sample, type Random } from "../common/prng.js";
import {
  MemberState,
  isDeparted,
  isLive,
  kindOf,
  type Answer,
  type CoreOutput,
  type DeferredAnswer,
  type DeferredReply,
  type JoinReply,
  type JoinRequest,
  type LeaveReply,
  type LeaveRequest,
  type MemberInfo,
  type MembershipChange,
  type NodeIdentity,
  type PingReply,
  type PingReqRequest,
  type PingRequest,
  type Refusal,
} from "./types.js";
import { checkAddress, checkCluster, checkMember, checkMembers, checkNodeId, quote } from "./validate.js";

export interface MembershipCoreOptions {
  /** Cluster name; messages of another cluster are refused. */
  cluster: string;
  /** This node. */
  self: NodeIdentity;
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
}

/** Counters for metrics and tests. */
export interface MembershipStats {
  probes: number;
  probesFailed: number;
  indirectProbes: number;
  suspicionsRaised: number;
  deathsDeclared: number;
  refutations: number;
  reaped: number;
  refusedRequests: number;
  invalidReplies: number;
}

interface Member {
  nodeId: string;
  address: string;
  state: MemberState;
  incarnation: bigint;
  /** When this node saw the state change. */
  since: number;
  /** SUSPECT: when it becomes DEAD. */
  suspectUntil: number;
  /** DEAD/LEFT: when it is forgotten. */
  reapAt: number;
  /** DEAD/LEFT: earliest known time of the departure (from the record's since), for reaping. */
  departedAt: number;
  /** An event about it was emitted (tombstones learned second-hand are reaped silently). */
  announced: boolean;
}

interface Probe {
  seq: bigint;
  target: string;
  /** The target's incarnation when the probe started: news of a newer one proves it alive. */
  incarnation: bigint;
  phase: "direct" | "indirect";
  outstanding: number;
  deadline: number;
}

type Pending =
  | { kind: "probe-ping"; seq: bigint; target: string; fallback: boolean; deadline: number }
  | { kind: "probe-pingReq"; seq: bigint; deadline: number }
  | { kind: "notice-ping"; deadline: number }
  | {
    kind: "relay-ping"; inboundId: number; originSeq: bigint; origin: string; target: string; seq: bigint;
    corrections: string[]; deadline: number;
  }
  | { kind: "join"; deadline: number }
  | { kind: "leave"; deadline: number };

export class MembershipCore {
  readonly cluster: string;
  readonly config: MembershipConfig;
  private readonly self: Member;
  private readonly random: Random;
  private readonly view = new Map<string, Member>();
  private readonly queue = new BroadcastQueue();
  private readonly order = new ProbeOrder();
  private readonly pending = new Map<number, Pending>();
  /** Ids of members held SUSPECT (always piggybacked, see piggyback()). */
  private readonly suspects = new Set<string>();
  /** Members that left recently, with the time until which their LEFT is always piggybacked. */
  private readonly recentlyLeft = new Map<string, number>();
  private readonly probes = new Map<bigint, Probe>();
  private out: CoreOutput = { calls: [], replies: [], events: [] };
  private nextId = 1;
  private nextSeq = 1n;
  private nextProbeAt: number;
  private nextPushPullAt: number;
  private joinedCluster = false;
  private readonly counters: MembershipStats = {
    probes: 0, probesFailed: 0, indirectProbes: 0, suspicionsRaised: 0, deathsDeclared: 0,
    refutations: 0, reaped: 0, refusedRequests: 0, invalidReplies: 0,
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
    this.cluster = options.cluster;
    this.random = options.random;
    const now = options.now;
    this.self = {
      nodeId: options.self.nodeId,
      address: options.self.address,
      state: MemberState.ALIVE,
      incarnation,
      since: now,
      suspectUntil: 0,
      reapAt: 0,
      departedAt: 0,
      announced: true,
    };
    // A random phase so that nodes started together do not probe in lockstep.
    this.nextProbeAt = now + this.random() * this.config.probeIntervalMs;
    this.nextPushPullAt = now + this.config.pushPullIntervalMs * (0.5 + this.random() / 2);
  }

  // ---- views -------------------------------------------------------------------------------

  get nodeId(): string {
    return this.self.nodeId;
  }

  get incarnation(): bigint {
    return this.self.incarnation;
  }

  /** True once this node is part of a cluster: a join answered, or another member contacted it. */
  get joined(): boolean {
    return this.joinedCluster;
  }

  /** True after leave(). */
  get left(): boolean {
    return this.self.state === MemberState.LEFT;
  }

  /** This node's record. */
  selfInfo(): MemberInfo {
    return toInfo(this.self);
  }

  /** The view, this node included, sorted by node id. */
  members(options: { includeDeparted?: boolean } = {}): MemberInfo[] {
    const list: MemberInfo[] = [toInfo(this.self)];
    for (const member of this.view.values()) {
      if (options.includeDeparted || !isDeparted(member.state)) list.push(toInfo(member));
    }
    return list.sort(byNodeId);
  }

  /** One member's record, or undefined. */
  member(nodeId: string): MemberInfo | undefined {
    if (nodeId === this.self.nodeId) return toInfo(this.self);
    const member = this.view.get(nodeId);
    return member && toInfo(member);
  }

  /** Live members (ALIVE or SUSPECT), this node included unless it left. */
  liveCount(): number {
    let n = this.left ? 0 : 1;
    for (const member of this.view.values()) if (isLive(member.state)) n++;
    return n;
  }

  stats(): MembershipStats {
    return { ...this.counters };
  }

  /** Everything produced since the last call. */
  drain(): CoreOutput {
    const out = this.out;
    this.out = { calls: [], replies: [], events: [] };
    return out;
  }

  /** The earliest time at which tick() has work to do. */
  nextDeadline(): number {
    let at = Infinity;
    if (!this.left) at = Math.min(at, this.nextProbeAt);
    if (this.config.pushPullIntervalMs > 0 && !this.left) at = Math.min(at, this.nextPushPullAt);
    for (const pending of this.pending.values()) at = Math.min(at, pending.deadline);
    for (const probe of this.probes.values()) at = Math.min(at, probe.deadline);
    for (const member of this.view.values()) {
      if (member.state === MemberState.SUSPECT) at = Math.min(at, member.suspectUntil);
      else if (isDeparted(member.state)) at = Math.min(at, member.reapAt);
    }
    return at;
  }

  // ---- actions of this node -----------------------------------------------------------------

  /** Ask the members at these addresses to admit this node. Returns how many calls were made. */
  join(addresses: readonly string[], now: number): number {
    if (this.left) return 0;
    const unique = [...new Set(addresses)].filter((a) => a !== this.self.address);
    for (const address of unique) this.sendJoin(address, now);
    return unique.length;
  }

  /** Leave gracefully: become LEFT and tell up to leaveFanout live members at once. */
  leave(now: number): number {
    if (this.left) return 0;
    this.self.state = MemberState.LEFT;
    this.self.since = now;
    this.probes.clear();
    for (const [id, pending] of this.pending) {
      if (pending.kind === "probe-ping" || pending.kind === "probe-pingReq") this.pending.delete(id);
    }
    this.queue.enqueue(toInfo(this.self));
    const targets = sample(this.liveOthers(), this.config.leaveFanout, this.random);
    for (const member of targets) {
      const id = this.nextId++;
      const request: LeaveRequest = { cluster: this.cluster, nodeId: this.self.nodeId, incarnation: this.self.incarnation };
      this.pending.set(id, { kind: "leave", deadline: now + this.config.requestTimeoutMs });
      this.out.calls.push({ kind: "leave", id, address: member.address, nodeId: member.nodeId, request, timeoutMs: this.config.requestTimeoutMs });
    }
    return targets.length;
  }

  /** Run whatever is due at `now`: timeouts, the next probe, suspicion expiry, reaping, push/pull. */
  tick(now: number): void {
    for (const [id, pending] of [...this.pending]) {
      if (pending.deadline <= now) this.callFailed(id, now);
    }
    for (const probe of [...this.probes.values()]) {
      if (probe.deadline <= now) this.probeFailed(probe, now);
    }
    for (const [id, until] of this.recentlyLeft) if (until <= now) this.recentlyLeft.delete(id);
    for (const member of [...this.view.values()]) {
      if (member.state === MemberState.SUSPECT && member.suspectUntil <= now) {
        this.counters.deathsDeclared++;
        this.transition(member, MemberState.DEAD, member.incarnation, now, now);
        this.queue.enqueue(toInfo(member));
      } else if (isDeparted(member.state) && member.reapAt <= now) {
        this.view.delete(member.nodeId);
        this.queue.remove(member.nodeId);
        this.recentlyLeft.delete(member.nodeId);
        this.counters.reaped++;
        if (member.announced) this.out.events.push({ kind: "reaped", member: toInfo(member), previous: member.state });
      }
    }
    if (this.left) return;
    if (now >= this.nextProbeAt) {
      this.startProbe(now);
      this.nextProbeAt += this.config.probeIntervalMs;
      if (this.nextProbeAt <= now) this.nextProbeAt = now + this.config.probeIntervalMs;
    }
    if (this.config.pushPullIntervalMs > 0 && now >= this.nextPushPullAt) {
      this.nextPushPullAt = now + this.config.pushPullIntervalMs;
      const peers = this.liveOthers().filter((m) => m.state === MemberState.ALIVE);
      const peer = sample(peers, 1, this.random)[0];
      if (peer) this.sendJoin(peer.address, now);
    }
  }

  // ---- inbound requests ---------------------------------------------------------------------

  handlePing(request: PingRequest, now: number): Answer<PingReply> {
    const bad =
      checkCluster(request.cluster, this.cluster) ??
      checkNodeId(request.from, "from") ??
      checkNodeId(request.target, "target") ??
      checkMembers(request.updates, "updates", this.config.maxUpdatesPerMessage);
    if (bad) return this.refuse(bad);
    if (request.from !== this.self.nodeId) this.joinedCluster = true;
    const corrections = this.applyAll(request.updates, now);
    return {
      ok: true,
      reply: {
        from: this.self.nodeId,
        seq: request.seq,
        // A probe meant for another node id (say, a new node on a reused address) is not acked.
        ack: request.target === this.self.nodeId,
        updates: this.piggyback(request.from, corrections),
      },
    };
  }

  handlePingReq(request: PingReqRequest, now: number): DeferredAnswer {
    const bad =
      checkCluster(request.cluster, this.cluster) ??
      checkNodeId(request.from, "from") ??
      checkNodeId(request.target, "target") ??
      checkAddress(request.targetAddress, "target_address") ??
      checkMembers(request.updates, "updates", this.config.maxUpdatesPerMessage);
    if (bad) return this.refuse(bad);
    this.joinedCluster = true;
    const corrections = this.applyAll(request.updates, now);
    if (request.target === this.self.nodeId) {
      return { ok: true, reply: { from: this.self.nodeId, seq: request.seq, ack: true, updates: this.piggyback(request.from, corrections) } };
    }
    const inboundId = this.nextId++;
    const wanted = request.timeoutMs > 0 ? request.timeoutMs : Math.floor(this.config.indirectTimeoutMs * 0.8);
    const timeoutMs = Math.max(1, Math.min(wanted, this.config.requestTimeoutMs));
    const id = this.nextId++;
    const seq = this.nextSeq++;
    this.pending.set(id, {
      kind: "relay-ping", inboundId, originSeq: request.seq, origin: request.from, target: request.target, seq,
      corrections, deadline: now + timeoutMs,
    });
    this.out.calls.push({
      kind: "ping", id, address: request.targetAddress, nodeId: request.target, timeoutMs,
      request: { cluster: this.cluster, from: this.self.nodeId, seq, target: request.target, updates: this.piggyback(request.target) },
    });
    return { ok: true, pending: inboundId };
  }

  handleJoin(request: JoinRequest, now: number): Answer<JoinReply> {
    const bad = checkCluster(request.cluster, this.cluster) ?? checkMember(request.self, "self");
    if (bad) return this.refuse(bad);
    const joiner = request.self!;
    if (joiner.state !== MemberState.ALIVE) return this.refuse({ code: "INVALID_ARGUMENT", message: "self.state must be ALIVE" });
    if (joiner.nodeId === this.self.nodeId) {
      return this.refuse({
        code: "FAILED_PRECONDITION",
        message: `node id ${quote(joiner.nodeId)} is this node's own id; every node needs its own id`,
      });
    }
    if (this.left) return this.refuse({ code: "UNAVAILABLE", message: "this node is leaving the cluster" });
    this.apply({ ...joiner, sinceUnixMs: BigInt(Math.floor(now)) }, now);
    this.joinedCluster = true;
    return { ok: true, reply: { from: this.self.nodeId, members: this.members({ includeDeparted: true }) } };
  }

  handleLeave(request: LeaveRequest, now: number): Answer<LeaveReply> {
    const bad =
      checkCluster(request.cluster, this.cluster) ??
      checkNodeId(request.nodeId, "node_id") ??
      (typeof request.incarnation === "bigint" && request.incarnation >= 0n ? undefined : { code: "INVALID_ARGUMENT" as const, message: "incarnation must be a uint64" });
    if (bad) return this.refuse(bad);
    const known = request.nodeId === this.self.nodeId ? this.self : this.view.get(request.nodeId);
    // Nothing to record about a node never seen: there is no address to keep a tombstone for.
    if (known) {
      this.apply({
        nodeId: request.nodeId, address: known.address, state: MemberState.LEFT, incarnation: request.incarnation,
        sinceUnixMs: BigInt(Math.floor(now)),
      }, now);
    }
    return { ok: true, reply: { from: this.self.nodeId } };
  }

  // ---- answers to this node's calls ---------------------------------------------------------

  receivePingReply(id: number, reply: PingReply, now: number): void {
    const pending = this.pending.get(id);
    if (!pending || (pending.kind !== "probe-ping" && pending.kind !== "probe-pingReq" && pending.kind !== "relay-ping" && pending.kind !== "notice-ping")) return;
    const bad = checkNodeId(reply?.from, "from") ?? checkMembers(reply?.updates, "updates", this.config.maxUpdatesPerMessage);
    if (bad) {
      this.counters.invalidReplies++;
      this.callFailed(id, now);
      return;
    }
    this.pending.delete(id);
    this.applyAll(reply.updates, now);
    switch (pending.kind) {
      case "probe-ping": {
        const probe = this.probes.get(pending.seq);
        if (!probe) return;
        if (reply.ack && reply.from === pending.target && reply.seq === pending.seq) this.probes.delete(probe.seq);
        else if (pending.fallback) this.indirectFailed(probe, now);
        else this.directFailed(probe, now);
        return;
      }
      case "probe-pingReq": {
        const probe = this.probes.get(pending.seq);
        if (!probe) return;
        if (reply.ack && reply.seq === pending.seq) this.probes.delete(probe.seq);
        else this.indirectFailed(probe, now);
        return;
      }
      case "relay-ping": {
        const ack = reply.ack && reply.from === pending.target && reply.seq === pending.seq;
        this.deferredReply(pending, ack);
        return;
      }
      case "notice-ping":
        // Its updates (a refutation, if the member is alive) were applied above.
        return;
    }
  }

  receiveJoinReply(id: number, reply: JoinReply, now: number): void {
    const pending = this.pending.get(id);
    if (!pending || pending.kind !== "join") return;
    const bad = checkNodeId(reply?.from, "from") ?? checkMembers(reply?.members, "members", this.config.maxUpdatesPerMessage);
    if (bad) {
      this.counters.invalidReplies++;
      this.callFailed(id, now);
      return;
    }
    this.pending.delete(id);
    this.joinedCluster = true;
    this.applyAll(reply.members, now);
  }

  receiveLeaveReply(id: number, _reply: LeaveReply, _now: number): void {
    const pending = this.pending.get(id);
    if (pending?.kind === "leave") this.pending.delete(id);
  }

  /** A call failed or timed out (errors count as timeouts). Unknown or finished ids are ignored. */
  callFailed(id: number, now: number): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    switch (pending.kind) {
      case "probe-ping": {
        const probe = this.probes.get(pending.seq);
        if (probe && pending.fallback) this.indirectFailed(probe, now);
        else if (probe) this.directFailed(probe, now);
        return;
      }
      case "probe-pingReq": {
        const probe = this.probes.get(pending.seq);
        if (probe) this.indirectFailed(probe, now);
        return;
      }
      case "relay-ping":
        this.deferredReply(pending, false);
        return;
      default:
        return;
    }
  }

  /** True while the call with this id awaits an answer. */
  isPending(id: number): boolean {
    return this.pending.has(id);
  }

  // ---- probing ------------------------------------------------------------------------------

  private startProbe(now: number): void {
    const target = this.order.next(
      (id) => isLive(this.view.get(id)?.state ?? MemberState.MEMBER_STATE_UNSPECIFIED),
      () => this.liveOthers().map((m) => m.nodeId),
      this.random,
    );
    if (target === undefined) return;
    const member = this.view.get(target)!;
    const seq = this.nextSeq++;
    const id = this.nextId++;
    this.counters.probes++;
    this.probes.set(seq, {
      seq, target, incarnation: member.incarnation, phase: "direct", outstanding: 0, deadline: now + probeDurationMs(this.config),
    });
    this.pending.set(id, { kind: "probe-ping", seq, target, fallback: false, deadline: now + this.config.probeTimeoutMs });
    this.out.calls.push({
      kind: "ping", id, address: member.address, nodeId: target, timeoutMs: this.config.probeTimeoutMs,
      request: { cluster: this.cluster, from: this.self.nodeId, seq, target, updates: this.piggyback(target, [], true) },
    });
  }

  /**
   * The direct ping got no ack: ask k helpers to ping the target (PingReq), and ping it once more
   * ourselves (memberlist sends a TCP ping at this point), all waiting indirectTimeoutMs. One more
   * independent path divides the false-suspicion rate on a lossy network by about five.
   */
  private directFailed(probe: Probe, now: number): void {
    if (probe.phase !== "direct") return;
    probe.phase = "indirect";
    const target = this.view.get(probe.target);
    if (!target || !isLive(target.state)) {
      this.probeFailed(probe, now);
      return;
    }
    const helpers = sample(
      this.liveOthers().filter((m) => m.state === MemberState.ALIVE && m.nodeId !== probe.target),
      this.config.indirectChecks, this.random,
    );
    probe.outstanding = helpers.length + 1;
    probe.deadline = Math.max(probe.deadline, now + this.config.indirectTimeoutMs);
    const retryId = this.nextId++;
    this.pending.set(retryId, { kind: "probe-ping", seq: probe.seq, target: probe.target, fallback: true, deadline: now + this.config.indirectTimeoutMs });
    this.out.calls.push({
      kind: "ping", id: retryId, address: target.address, nodeId: probe.target, timeoutMs: this.config.indirectTimeoutMs,
      request: { cluster: this.cluster, from: this.self.nodeId, seq: probe.seq, target: probe.target, updates: this.piggyback(probe.target, [], true) },
    });
    const relayTimeout = Math.max(1, Math.floor(this.config.indirectTimeoutMs * 0.8));
    for (const helper of helpers) {
      const id = this.nextId++;
      this.counters.indirectProbes++;
      this.pending.set(id, { kind: "probe-pingReq", seq: probe.seq, deadline: now + this.config.indirectTimeoutMs });
      this.out.calls.push({
        kind: "pingReq", id, address: helper.address, nodeId: helper.nodeId, timeoutMs: this.config.indirectTimeoutMs,
        request: {
          cluster: this.cluster, from: this.self.nodeId, seq: probe.seq, target: probe.target,
          targetAddress: target.address, timeoutMs: relayTimeout, updates: this.piggyback(helper.nodeId, [], true),
        },
      });
    }
  }

  private indirectFailed(probe: Probe, now: number): void {
    probe.outstanding--;
    if (probe.outstanding <= 0 && probe.phase === "indirect") this.probeFailed(probe, now);
  }

  private probeFailed(probe: Probe, now: number): void {
    this.probes.delete(probe.seq);
    for (const [id, pending] of this.pending) {
      if ((pending.kind === "probe-ping" || pending.kind === "probe-pingReq") && pending.seq === probe.seq) this.pending.delete(id);
    }
    this.counters.probesFailed++;
    const member = this.view.get(probe.target);
    if (!member || member.state !== MemberState.ALIVE || member.incarnation !== probe.incarnation) return;
    this.counters.suspicionsRaised++;
    this.transition(member, MemberState.SUSPECT, member.incarnation, now, now);
    this.queue.enqueue(toInfo(member));
    this.sendNotice(member, now);
  }

  /**
   * Tell a member we just suspected, at once: if it is alive (the probe failed on a lossy path), its
   * answer carries the refutation straight back, long before gossip would have let it learn of the
   * suspicion. A crashed member just does not answer.
   */
  private sendNotice(member: Member, now: number): void {
    const id = this.nextId++;
    this.pending.set(id, { kind: "notice-ping", deadline: now + this.config.probeTimeoutMs });
    this.out.calls.push({
      kind: "ping", id, address: member.address, nodeId: member.nodeId, timeoutMs: this.config.probeTimeoutMs,
      request: { cluster: this.cluster, from: this.self.nodeId, seq: this.nextSeq++, target: member.nodeId, updates: this.piggyback(member.nodeId, [], true) },
    });
  }

  private deferredReply(relay: Extract<Pending, { kind: "relay-ping" }>, ack: boolean): void {
    const reply: DeferredReply = {
      requestId: relay.inboundId,
      reply: { from: this.self.nodeId, seq: relay.originSeq, ack, updates: this.piggyback(relay.origin, relay.corrections) },
    };
    this.out.replies.push(reply);
  }

  private sendJoin(address: string, now: number): void {
    const id = this.nextId++;
    this.pending.set(id, { kind: "join", deadline: now + this.config.requestTimeoutMs });
    this.out.calls.push({
      kind: "join", id, address, timeoutMs: this.config.requestTimeoutMs,
      request: { cluster: this.cluster, self: toInfo(this.self) },
    });
  }

  // ---- dissemination ------------------------------------------------------------------------

  /**
   * Updates to attach to a message for `peer`. Before the budgeted queue come, in order: this node's
   * LEFT record while it leaves; the peer's own record if we do not hold it ALIVE (so it can refute);
   * our newer records of what the peer just told us in an older version (corrections); every
   * suspicion we hold, so that a node that missed a refutation is corrected by whoever it talks to
   * before its suspicion timer runs out; and recent LEFT records. Plain epidemic piggybacking with
   * a log(n) budget misses about one node in a few hundred per update at 10% loss; these pinned
   * records close exactly the gaps that would turn into false deaths or late LEFTs.
   */
  private piggyback(peer: string, corrections: readonly string[] = [], introduce = false): MemberInfo[] {
    const max = this.config.maxPiggyback;
    const included = new Set<string>();
    const out: MemberInfo[] = [];
    const add = (member: Member | undefined): void => {
      if (!member || included.has(member.nodeId) || out.length >= max) return;
      included.add(member.nodeId);
      out.push(toInfo(member));
    };
    // A probe carries the prober's own record: a member that missed our join learns us from it.
    if (this.left || introduce) add(this.self);
    const known = this.view.get(peer);
    if (known && known.state !== MemberState.ALIVE) add(known);
    for (const id of corrections) add(id === this.self.nodeId ? this.self : this.view.get(id));
    let pinned = 0;
    for (const id of this.suspects) {
      if (pinned++ >= max / 2) break;
      add(this.view.get(id));
    }
    for (const id of this.recentlyLeft.keys()) {
      if (pinned++ >= (3 * max) / 4) break;
      add(this.view.get(id));
    }
    const limit = retransmitLimit(this.config, this.liveCount());
    return out.concat(this.queue.pick(max - out.length, limit, included));
  }

  /** Merge records; returns the ids of those for which this node holds a newer record. */
  private applyAll(updates: readonly MemberInfo[] | undefined, now: number): string[] {
    const stale: string[] = [];
    if (!updates) return stale;
    for (const info of updates) if (this.apply(info, now)) stale.push(info.nodeId);
    return stale;
  }

  /** Merge one record about a member into the view. Returns true when ours is newer than it. */
  private apply(info: MemberInfo, now: number): boolean {
    if (info.nodeId === this.self.nodeId) return this.applyAboutSelf(info);
    const current = this.view.get(info.nodeId);
    if (!current) {
      if (isDeparted(info.state)) {
        // Keep a tombstone so that stale ALIVE gossip cannot revive it, unless it is already due.
        const departedAt = clampSince(info.sinceUnixMs, now, this.config.reapAfterMs);
        if (departedAt + this.config.reapAfterMs <= now) return false;
        const member = newMember(info, now);
        member.departedAt = departedAt;
        member.reapAt = departedAt + this.config.reapAfterMs;
        this.view.set(info.nodeId, member);
        this.queue.enqueue(toInfo(member));
        return false;
      }
      const member = newMember(info, now);
      if (member.state === MemberState.SUSPECT) {
        member.suspectUntil = now + suspicionTimeoutMs(this.config, this.liveCount() + 1);
        this.suspects.add(member.nodeId);
      }
      this.view.set(info.nodeId, member);
      this.order.add(info.nodeId, this.random);
      this.queue.enqueue(toInfo(member));
      this.emit(member, MemberState.MEMBER_STATE_UNSPECIFIED, kindOf(member.state));
      return false;
    }
    if (!supersedes(info, current)) return supersedes(current, info);
    const departedAt = isDeparted(info.state) ? clampSince(info.sinceUnixMs, now, this.config.reapAfterMs) : now;
    const previousAddress = current.address;
    current.address = info.address;
    if (info.state !== current.state) {
      this.transition(current, info.state, info.incarnation, now, departedAt);
      if (isLive(info.state)) this.order.add(info.nodeId, this.random);
    } else {
      current.incarnation = info.incarnation;
      // A suspicion of a newer incarnation starts a new timeout.
      if (info.state === MemberState.SUSPECT) current.suspectUntil = now + suspicionTimeoutMs(this.config, this.liveCount());
      if (info.state === MemberState.ALIVE && previousAddress !== info.address) {
        this.emit(current, MemberState.ALIVE, "alive");
      }
    }
    this.queue.enqueue(toInfo(current));
    return false;
  }

  /**
   * Someone says something about this node: refute anything but our current record. Returns true
   * when the sender's record is out of date (it gets ours in the answer).
   */
  private applyAboutSelf(info: MemberInfo): boolean {
    const self = this.self;
    const newer = info.incarnation > self.incarnation;
    const contradicts = info.incarnation === self.incarnation && info.state !== self.state;
    if (!newer && !contradicts) return info.incarnation < self.incarnation;
    self.incarnation = (info.incarnation > self.incarnation ? info.incarnation : self.incarnation) + 1n;
    if (self.state !== MemberState.LEFT) this.counters.refutations++;
    this.queue.enqueue(toInfo(self));
    return true;
  }

  private transition(member: Member, state: MemberState, incarnation: bigint, now: number, departedAt: number): void {
    const previous = member.state;
    member.state = state;
    member.incarnation = incarnation;
    member.since = now;
    if (state === MemberState.SUSPECT) {
      member.suspectUntil = now + suspicionTimeoutMs(this.config, this.liveCount());
      this.suspects.add(member.nodeId);
    } else {
      this.suspects.delete(member.nodeId);
    }
    // A LEFT has no timer that would repair a missed copy (a DEAD has the suspicion timeout), so
    // it rides on every message for one suspicion timeout.
    if (state === MemberState.LEFT) this.recentlyLeft.set(member.nodeId, now + suspicionTimeoutMs(this.config, this.liveCount()));
    else this.recentlyLeft.delete(member.nodeId);
    if (isDeparted(state)) {
      member.departedAt = Math.min(departedAt, now);
      member.reapAt = member.departedAt + this.config.reapAfterMs;
    }
    // Listeners never heard of a tombstone learned second-hand: report it as new, or not at all.
    if (!member.announced && isDeparted(state)) return;
    this.emit(member, member.announced ? previous : MemberState.MEMBER_STATE_UNSPECIFIED, kindOf(state));
  }

  private emit(member: Member, previous: MemberState, kind: MembershipChange["kind"]): void {
    member.announced = true;
    this.out.events.push({ kind, member: toInfo(member), previous });
  }

  private liveOthers(): Member[] {
    const list: Member[] = [];
    for (const member of this.view.values()) if (isLive(member.state)) list.push(member);
    return list;
  }

  private refuse(refusal: Refusal): { ok: false; refusal: Refusal } {
    this.counters.refusedRequests++;
    return { ok: false, refusal };
  }
}

function newMember(info: MemberInfo, now: number): Member {
  return {
    nodeId: info.nodeId,
    address: info.address,
    state: info.state,
    incarnation: info.incarnation,
    since: now,
    suspectUntil: 0,
    reapAt: 0,
    departedAt: 0,
    announced: false,
  };
}

function toInfo(member: Member): MemberInfo {
  const since = isDeparted(member.state) ? member.departedAt : member.since;
  return {
    nodeId: member.nodeId,
    address: member.address,
    state: member.state,
    incarnation: member.incarnation,
    sinceUnixMs: BigInt(Math.floor(since)),
  };
}

/** The time a departure record says it happened, kept within [now - reapAfter, now]. */
function clampSince(since: bigint | undefined, now: number, reapAfterMs: number): number {
  const value = typeof since === "bigint" ? Number(since) : 0;
  if (!(value > 0)) return now;
  return Math.max(now - reapAfterMs, Math.min(now, value));
}

function byNodeId(a: MemberInfo, b: MemberInfo): number {
  return a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0;
}
