// Probing for the SWIM core: once per probe interval ping the next member of the round-robin order;
// without an ack, ping it again and ask k helpers to ping it (PingReq); when nobody got an ack in
// time, hand it to suspicion. Also the helper's side of PingReq: relay a ping to the target and
// answer the asker once the target has (or has not). Sends nothing itself: calls go to the outbox.
import { probeDurationMs, type MembershipConfig } from "./config.js";
import type { Dissemination } from "./dissemination.js";
import type { Member, MemberTable } from "./member-table.js";
import type { Outbox, PendingCall, RelayCall } from "./outbox.js";
import { ProbeOrder } from "./probe-order.js";
import type { Suspicion } from "./suspicion.js";
import { sample, type Random } from "../common/prng.js";
import { MemberState, isLive, settingsFields, type ClusterSettings, type MembershipStats, type PingReply, type PingReqRequest, type PingRequest } from "./types.js";

/** One probe of one member, from the first ping until an ack or the end of the indirect phase. */
interface Probe {
  seq: bigint;
  target: string;
  /** The target's incarnation when the probe started: news of a newer one proves it alive. */
  incarnation: bigint;
  phase: "direct" | "indirect";
  /** Indirect phase: answers (or failures) still awaited. */
  outstanding: number;
  deadline: number;
}

/** The parts of the core a prober works with. */
export interface ProberParts {
  cluster: string;
  /** Sent with every Ping and PingReq (the receiver refuses one whose settings differ from its own). */
  settings?: ClusterSettings;
  config: MembershipConfig;
  random: Random;
  table: MemberTable;
  dissemination: Dissemination;
  suspicion: Suspicion;
  outbox: Outbox;
  counters: MembershipStats;
}

export class Prober {
  private readonly probes = new Map<bigint, Probe>();
  private readonly order = new ProbeOrder();
  private nextProbeAt: number;

  constructor(private readonly parts: ProberParts, now: number) {
    // A random phase so that nodes started together do not probe in lockstep.
    this.nextProbeAt = now + parts.random() * parts.config.probeIntervalMs;
  }

  /** A member became live: it joins the current round at a random remaining place. */
  admit(nodeId: string): void {
    this.order.add(nodeId, this.parts.random);
  }

  /** The earliest probe to start or to give up on, or Infinity. */
  nextDeadline(): number {
    let at = this.parts.table.left ? Infinity : this.nextProbeAt;
    for (const probe of this.probes.values()) at = Math.min(at, probe.deadline);
    return at;
  }

  /** Give up on the probes whose time is over. */
  expire(now: number): void {
    for (const probe of [...this.probes.values()]) {
      if (probe.deadline <= now) this.probeFailed(probe, now);
    }
  }

  /** Start the next probe if it is due. */
  tick(now: number): void {
    if (now < this.nextProbeAt) return;
    this.start(now);
    const interval = this.parts.config.probeIntervalMs;
    this.nextProbeAt += interval;
    if (this.nextProbeAt <= now) this.nextProbeAt = now + interval;
  }

  /** This node leaves: drop every probe and the calls made for them. */
  stop(): void {
    this.probes.clear();
    const pending = this.parts.outbox.pending;
    for (const [id, call] of pending) {
      if (call.kind === "probe-ping" || call.kind === "probe-pingReq") pending.delete(id);
    }
  }

  /**
   * A PingReq for another member: ping it on the asker's behalf. Returns the id under which the
   * answer to the asker will come out as a deferred reply.
   */
  relay(request: PingReqRequest, corrections: string[], now: number): number {
    const { config, outbox } = this.parts;
    const inboundId = outbox.nextId();
    const wanted = request.timeoutMs > 0 ? request.timeoutMs : Math.floor(config.indirectTimeoutMs * 0.8);
    const timeoutMs = Math.max(1, Math.min(wanted, config.requestTimeoutMs));
    const id = outbox.nextId();
    const seq = outbox.nextSeq();
    outbox.pending.set(id, {
      kind: "relay-ping", inboundId, originSeq: request.seq, origin: request.from, target: request.target, seq,
      corrections, deadline: now + timeoutMs,
    });
    outbox.out.calls.push({
      kind: "ping", id, address: request.targetAddress, nodeId: request.target, timeoutMs,
      request: this.ping(seq, request.target, this.parts.dissemination.piggyback(request.target)),
    });
    return inboundId;
  }

  /** The answer to one of the pings or PingReqs made here (its updates are already applied). */
  replied(call: PendingCall, reply: PingReply, now: number): void {
    switch (call.kind) {
      case "probe-ping": {
        const probe = this.probes.get(call.seq);
        if (!probe) return;
        if (reply.ack && reply.from === call.target && reply.seq === call.seq) this.probes.delete(probe.seq);
        else if (call.fallback) this.indirectFailed(probe, now);
        else this.directFailed(probe, now);
        return;
      }
      case "probe-pingReq": {
        const probe = this.probes.get(call.seq);
        if (!probe) return;
        if (reply.ack && reply.seq === call.seq) this.probes.delete(probe.seq);
        else this.indirectFailed(probe, now);
        return;
      }
      case "relay-ping":
        this.answerRelay(call, reply.ack && reply.from === call.target && reply.seq === call.seq);
        return;
      default:
        // notice-ping: its updates (a refutation, if the member is alive) were all it was for.
        return;
    }
  }

  /** One of the pings or PingReqs made here failed or timed out. */
  failed(call: PendingCall, now: number): void {
    switch (call.kind) {
      case "probe-ping": {
        const probe = this.probes.get(call.seq);
        if (probe && call.fallback) this.indirectFailed(probe, now);
        else if (probe) this.directFailed(probe, now);
        return;
      }
      case "probe-pingReq": {
        const probe = this.probes.get(call.seq);
        if (probe) this.indirectFailed(probe, now);
        return;
      }
      case "relay-ping":
        this.answerRelay(call, false);
        return;
      default:
        return;
    }
  }

  private start(now: number): void {
    const { config, table, outbox, counters, random } = this.parts;
    const target = this.order.next(
      (id) => isLive(table.get(id)?.state ?? MemberState.MEMBER_STATE_UNSPECIFIED),
      () => table.liveOthers().map((m) => m.nodeId),
      random,
    );
    if (target === undefined) return;
    const member = table.get(target)!;
    const seq = outbox.nextSeq();
    const id = outbox.nextId();
    counters.probes++;
    this.probes.set(seq, {
      seq, target, incarnation: member.incarnation, phase: "direct", outstanding: 0, deadline: now + probeDurationMs(config),
    });
    outbox.pending.set(id, { kind: "probe-ping", seq, target, fallback: false, deadline: now + config.probeTimeoutMs });
    outbox.out.calls.push({
      kind: "ping", id, address: member.address, nodeId: target, timeoutMs: config.probeTimeoutMs,
      request: this.ping(seq, target, this.parts.dissemination.piggyback(target, [], true)),
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
    const { config, table, outbox, counters, random, dissemination } = this.parts;
    const target = table.get(probe.target);
    if (!target || !isLive(target.state)) {
      this.probeFailed(probe, now);
      return;
    }
    const helpers = sample(
      table.liveOthers().filter((m) => m.state === MemberState.ALIVE && m.nodeId !== probe.target),
      config.indirectChecks, random,
    );
    probe.outstanding = helpers.length + 1;
    probe.deadline = Math.max(probe.deadline, now + config.indirectTimeoutMs);
    const retryId = outbox.nextId();
    outbox.pending.set(retryId, { kind: "probe-ping", seq: probe.seq, target: probe.target, fallback: true, deadline: now + config.indirectTimeoutMs });
    outbox.out.calls.push({
      kind: "ping", id: retryId, address: target.address, nodeId: probe.target, timeoutMs: config.indirectTimeoutMs,
      request: this.ping(probe.seq, probe.target, dissemination.piggyback(probe.target, [], true)),
    });
    const relayTimeout = Math.max(1, Math.floor(config.indirectTimeoutMs * 0.8));
    for (const helper of helpers) {
      const id = outbox.nextId();
      counters.indirectProbes++;
      outbox.pending.set(id, { kind: "probe-pingReq", seq: probe.seq, deadline: now + config.indirectTimeoutMs });
      outbox.out.calls.push({
        kind: "pingReq", id, address: helper.address, nodeId: helper.nodeId, timeoutMs: config.indirectTimeoutMs,
        request: {
          cluster: this.parts.cluster, from: table.self.nodeId, seq: probe.seq, target: probe.target,
          targetAddress: target.address, timeoutMs: relayTimeout, updates: dissemination.piggyback(helper.nodeId, [], true),
          ...settingsFields(this.parts.settings),
        },
      });
    }
  }

  private indirectFailed(probe: Probe, now: number): void {
    probe.outstanding--;
    if (probe.outstanding <= 0 && probe.phase === "indirect") this.probeFailed(probe, now);
  }

  private probeFailed(probe: Probe, now: number): void {
    const { table, outbox, counters, suspicion } = this.parts;
    this.probes.delete(probe.seq);
    for (const [id, call] of outbox.pending) {
      if ((call.kind === "probe-ping" || call.kind === "probe-pingReq") && call.seq === probe.seq) outbox.pending.delete(id);
    }
    counters.probesFailed++;
    const member = table.get(probe.target);
    if (!member || member.state !== MemberState.ALIVE || member.incarnation !== probe.incarnation) return;
    suspicion.suspect(member, now);
    this.sendNotice(member, now);
  }

  /**
   * Tell a member we just suspected, at once: if it is alive (the probe failed on a lossy path), its
   * answer carries the refutation straight back, long before gossip would have let it learn of the
   * suspicion. A crashed member just does not answer.
   */
  private sendNotice(member: Member, now: number): void {
    const { config, outbox, dissemination } = this.parts;
    const id = outbox.nextId();
    outbox.pending.set(id, { kind: "notice-ping", deadline: now + config.probeTimeoutMs });
    outbox.out.calls.push({
      kind: "ping", id, address: member.address, nodeId: member.nodeId, timeoutMs: config.probeTimeoutMs,
      request: this.ping(outbox.nextSeq(), member.nodeId, dissemination.piggyback(member.nodeId, [], true)),
    });
  }

  /** Answer the member whose PingReq this node relayed. */
  private answerRelay(relay: RelayCall, ack: boolean): void {
    const { table, outbox, dissemination } = this.parts;
    outbox.out.replies.push({
      requestId: relay.inboundId,
      reply: { from: table.self.nodeId, seq: relay.originSeq, ack, updates: dissemination.piggyback(relay.origin, relay.corrections) },
    });
  }

  private ping(seq: bigint, target: string, updates: PingRequest["updates"]): PingRequest {
    return { cluster: this.parts.cluster, from: this.parts.table.self.nodeId, seq, target, updates, ...settingsFields(this.parts.settings) };
  }
}
