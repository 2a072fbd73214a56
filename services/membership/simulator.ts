// An in-process, discrete-event simulation of many membership nodes: the real MembershipCore on a
// virtual clock, over a simulated network that delays each message by a seeded random amount and
// drops it with a given probability. Used by the unit tests and the benchmark; fully deterministic
// for a given seed.
import type { MembershipConfig } from "./config.js";
import { MembershipCore } from "./core.js";
import { EventQueue } from "./event-queue.js";
import { sample, seededRandom, type Random } from "../common/prng.js";
import { isLive, type MemberInfo, type MembershipChange, type OutboundCall } from "./types.js";

export interface SimulationOptions {
  seed: number;
  cluster?: string;
  config?: Partial<MembershipConfig>;
  /** Probability that one message (a request or a reply) is lost. */
  lossRate?: number;
  /** One-way delay, uniform in [minDelayMs, maxDelayMs]. */
  minDelayMs?: number;
  maxDelayMs?: number;
  /** A node that is not joined retries its join this often. */
  joinRetryMs?: number;
  /** How many running members a joining node is given as seeds (like a DNS answer). */
  seedCount?: number;
}

export interface SimNode {
  readonly nodeId: string;
  readonly address: string;
  core: MembershipCore;
  running: boolean;
  /** Process generation: a restart is a new process; answers to an old one are dropped. */
  generation: number;
  /** Highest incarnation any earlier process of this node used. */
  pastIncarnation: bigint;
  /** Time the current process started. */
  startedAt: number;
  tickToken: number;
  tickAt: number;
}

export type ChangeListener = (observer: string, change: MembershipChange, at: number) => void;
export type LifecycleListener = (event: { kind: "start" | "crash" | "leave" | "stop"; nodeId: string; at: number; pastIncarnation: bigint }) => void;

interface Relay {
  caller: SimNode;
  generation: number;
  callId: number;
}

export class MembershipSimulation {
  readonly cluster: string;
  readonly config: Partial<MembershipConfig>;
  readonly random: Random;
  private readonly queue = new EventQueue();
  private readonly nodes = new Map<string, SimNode>();
  private readonly byAddress = new Map<string, SimNode>();
  private readonly relays = new Map<string, Relay>();
  private readonly blocked = new Set<string>();
  private readonly changeListeners: ChangeListener[] = [];
  private readonly lifecycleListeners: LifecycleListener[] = [];
  private readonly lossRate: number;
  private readonly minDelay: number;
  private readonly maxDelay: number;
  private readonly joinRetryMs: number;
  private readonly seedCount: number;
  private clock = 0;
  private counter = 0;
  private coreSeed: number;
  readonly traffic = { messages: 0, lost: 0, pingReqs: 0, joins: 0 };

  constructor(options: SimulationOptions) {
    this.cluster = options.cluster ?? "sim";
    this.config = options.config ?? {};
    this.random = seededRandom(options.seed);
    this.coreSeed = (options.seed * 7919 + 17) >>> 0;
    this.lossRate = options.lossRate ?? 0;
    this.minDelay = options.minDelayMs ?? 1;
    this.maxDelay = options.maxDelayMs ?? 10;
    this.joinRetryMs = options.joinRetryMs ?? 2000;
    this.seedCount = options.seedCount ?? 3;
  }

  get now(): number {
    return this.clock;
  }

  onChange(listener: ChangeListener): void {
    this.changeListeners.push(listener);
  }

  onLifecycle(listener: LifecycleListener): void {
    this.lifecycleListeners.push(listener);
  }

  // ---- nodes --------------------------------------------------------------------------------

  /**
   * Start a new node. It joins through `seeds` (addresses) or, by default, through up to
   * seedCount random running members; the very first node starts alone.
   */
  addNode(options: { nodeId?: string; incarnation?: bigint; seeds?: string[] } = {}): string {
    const index = this.counter++;
    const nodeId = options.nodeId ?? `node-${String(index).padStart(3, "0")}`;
    if (this.nodes.has(nodeId)) throw new Error(`node ${nodeId} exists`);
    const address = `10.${(index >> 16) & 255}.${(index >> 8) & 255}.${index & 255}:7000`;
    const node: SimNode = {
      nodeId, address, core: undefined as unknown as MembershipCore, running: false, generation: 0,
      pastIncarnation: -1n, startedAt: 0, tickToken: 0, tickAt: Infinity,
    };
    this.nodes.set(nodeId, node);
    this.byAddress.set(address, node);
    this.startProcess(node, options.incarnation ?? 0n, options.seeds);
    return nodeId;
  }

  /** Stop a node silently (a crash: no leave). */
  crash(nodeId: string): void {
    const node = this.node(nodeId);
    if (!node.running) return;
    this.stopProcess(node, "crash");
  }

  /** Leave gracefully, keep answering for lingerMs (the leave calls get out), then stop. */
  leave(nodeId: string, lingerMs = 500): void {
    const node = this.node(nodeId);
    if (!node.running || node.core.left) return;
    node.core.leave(this.clock);
    for (const listener of this.lifecycleListeners) {
      listener({ kind: "leave", nodeId, at: this.clock, pastIncarnation: node.pastIncarnation });
    }
    this.dispatch(node);
    const generation = node.generation;
    this.queue.push(this.clock + lingerMs, () => {
      if (node.running && node.generation === generation) this.stopProcess(node, "stop");
    });
  }

  /**
   * Start a stopped node again under the same id and address. By default it starts one above the
   * highest incarnation it used before (as if persisted); `fresh` starts at 0 (nothing persisted).
   */
  restart(nodeId: string, options: { incarnation?: "persisted" | "fresh" | bigint; seeds?: string[] } = {}): void {
    const node = this.node(nodeId);
    if (node.running) throw new Error(`node ${nodeId} is running`);
    const wanted = options.incarnation ?? "persisted";
    const incarnation = wanted === "fresh" ? 0n : wanted === "persisted" ? node.pastIncarnation + 1n : wanted;
    this.startProcess(node, incarnation, options.seeds);
  }

  node(nodeId: string): SimNode {
    const node = this.nodes.get(nodeId);
    if (!node) throw new Error(`no node ${nodeId}`);
    return node;
  }

  core(nodeId: string): MembershipCore {
    return this.node(nodeId).core;
  }

  isRunning(nodeId: string): boolean {
    return this.nodes.get(nodeId)?.running ?? false;
  }

  runningIds(): string[] {
    return [...this.nodes.values()].filter((n) => n.running).map((n) => n.nodeId);
  }

  stoppedIds(): string[] {
    return [...this.nodes.values()].filter((n) => !n.running).map((n) => n.nodeId);
  }

  allIds(): string[] {
    return [...this.nodes.keys()];
  }

  view(nodeId: string, includeDeparted = false): MemberInfo[] {
    return this.node(nodeId).core.members({ includeDeparted });
  }

  /** Block (or unblock) all messages between two nodes, both ways. */
  setLink(a: string, b: string, up: boolean): void {
    for (const key of [`${a}>${b}`, `${b}>${a}`]) {
      if (up) this.blocked.delete(key);
      else this.blocked.add(key);
    }
  }

  /** True when every running, non-leaving node sees exactly the running nodes as live. */
  viewsAgree(): boolean {
    const running = this.runningIds().filter((id) => !this.node(id).core.left);
    const truth = new Set(running);
    for (const id of running) {
      const live = this.node(id).core.members().filter((m) => isLive(m.state));
      if (live.length !== truth.size) return false;
      for (const member of live) if (!truth.has(member.nodeId)) return false;
    }
    return true;
  }

  // ---- time ---------------------------------------------------------------------------------

  /** Run an action at a virtual time (at least now). */
  at(time: number, action: () => void): void {
    this.queue.push(Math.max(time, this.clock), action);
  }

  /** Run every periodMs from now until the simulation stops being driven. */
  every(periodMs: number, action: () => void): void {
    const step = () => {
      action();
      this.queue.push(this.clock + periodMs, step);
    };
    this.queue.push(this.clock + periodMs, step);
  }

  /** Advance virtual time by ms. */
  run(ms: number): void {
    this.runUntil(this.clock + ms);
  }

  /** Advance to `time`, or until `done` returns true (checked after each event). Returns done's value. */
  runUntil(time: number, done?: () => boolean): boolean {
    while (this.queue.peekTime() <= time) {
      const item = this.queue.pop()!;
      this.clock = Math.max(this.clock, item.at);
      item.run();
      if (done?.()) return true;
    }
    this.clock = Math.max(this.clock, time);
    return done?.() ?? false;
  }

  /**
   * Advance until viewsAgree() holds at a check (every checkEveryMs) or `time` is reached.
   * Returns the time agreement was first seen, or undefined.
   */
  runUntilAgreement(time: number, checkEveryMs = 250): number | undefined {
    while (this.clock < time) {
      if (this.viewsAgree()) return this.clock;
      this.runUntil(Math.min(time, this.clock + checkEveryMs));
    }
    return this.viewsAgree() ? this.clock : undefined;
  }

  // ---- processes ----------------------------------------------------------------------------

  private startProcess(node: SimNode, incarnation: bigint, seeds?: string[]): void {
    node.generation++;
    node.running = true;
    node.startedAt = this.clock;
    node.tickAt = Infinity;
    this.coreSeed = (this.coreSeed + 0x9e3779b9) >>> 0;
    node.core = new MembershipCore({
      cluster: this.cluster, self: { nodeId: node.nodeId, address: node.address }, incarnation,
      config: this.config, random: seededRandom(this.coreSeed), now: this.clock,
    });
    for (const listener of this.lifecycleListeners) {
      listener({ kind: "start", nodeId: node.nodeId, at: this.clock, pastIncarnation: node.pastIncarnation });
    }
    this.tryJoin(node, seeds, node.generation);
    this.dispatch(node);
  }

  private tryJoin(node: SimNode, seeds: string[] | undefined, generation: number): void {
    if (!node.running || node.generation !== generation || node.core.joined || node.core.left) return;
    const addresses = seeds ?? this.seedAddresses(node.nodeId);
    if (addresses.length === 0 && seeds === undefined && this.runningIds().length === 1) return; // first node
    node.core.join(addresses, this.clock);
    this.dispatch(node);
    this.queue.push(this.clock + this.joinRetryMs, () => this.tryJoin(node, seeds, generation));
  }

  /** Up to seedCount running members, preferring ones already in a cluster (like ready pods in DNS). */
  private seedAddresses(exclude: string): string[] {
    const others = this.runningIds().filter((id) => id !== exclude && !this.node(id).core.left);
    const joined = others.filter((id) => this.node(id).core.joined);
    return sample(joined.length > 0 ? joined : others, this.seedCount, this.random).map((id) => this.node(id).address);
  }

  private stopProcess(node: SimNode, kind: "crash" | "stop"): void {
    const incarnation = node.core.incarnation;
    if (incarnation > node.pastIncarnation) node.pastIncarnation = incarnation;
    node.running = false;
    node.generation++;
    node.tickToken++;
    for (const listener of this.lifecycleListeners) {
      listener({ kind, nodeId: node.nodeId, at: this.clock, pastIncarnation: node.pastIncarnation });
    }
  }

  // ---- network ------------------------------------------------------------------------------

  private dispatch(node: SimNode): void {
    if (!node.running) return;
    const out = node.core.drain();
    for (const change of out.events) {
      for (const listener of this.changeListeners) listener(node.nodeId, change, this.clock);
    }
    for (const call of out.calls) this.sendCall(node, call);
    for (const deferred of out.replies) {
      const key = `${node.nodeId}/${node.generation}/${deferred.requestId}`;
      const relay = this.relays.get(key);
      if (!relay) continue;
      this.relays.delete(key);
      this.sendBack(node, relay.caller, relay.generation, (caller) => caller.core.receivePingReply(relay.callId, deferred.reply, this.clock));
    }
    this.scheduleTick(node);
  }

  private scheduleTick(node: SimNode): void {
    const at = Math.max(this.clock, node.core.nextDeadline());
    if (!Number.isFinite(at) || at >= node.tickAt) return;
    node.tickAt = at;
    const token = ++node.tickToken;
    this.queue.push(at, () => {
      if (!node.running || node.tickToken !== token) return;
      node.tickAt = Infinity;
      node.core.tick(this.clock);
      this.dispatch(node);
    });
  }

  private delay(): number {
    return this.minDelay + this.random() * (this.maxDelay - this.minDelay);
  }

  private lost(from: SimNode, to: SimNode | undefined): boolean {
    this.traffic.messages++;
    const dropped = (to !== undefined && this.blocked.has(`${from.nodeId}>${to.nodeId}`)) || this.random() < this.lossRate;
    if (dropped) this.traffic.lost++;
    return dropped;
  }

  private sendCall(caller: SimNode, call: OutboundCall): void {
    const target = this.byAddress.get(call.address);
    if (call.kind === "pingReq") this.traffic.pingReqs++;
    if (call.kind === "join") this.traffic.joins++;
    if (this.lost(caller, target)) return;
    const generation = caller.generation;
    this.queue.push(this.clock + this.delay(), () => {
      // Nobody listening: the caller's own deadline turns this into a timeout.
      if (!target || !target.running) return;
      this.deliver(caller, generation, target, call);
    });
  }

  private deliver(caller: SimNode, generation: number, target: SimNode, call: OutboundCall): void {
    const now = this.clock;
    const core = target.core;
    switch (call.kind) {
      case "ping": {
        const answer = core.handlePing(call.request, now);
        this.dispatch(target);
        this.sendBack(target, caller, generation, (c) =>
          answer.ok ? c.core.receivePingReply(call.id, answer.reply, this.clock) : c.core.callFailed(call.id, this.clock));
        return;
      }
      case "pingReq": {
        const answer = core.handlePingReq(call.request, now);
        if (answer.ok && answer.pending !== undefined) {
          this.relays.set(`${target.nodeId}/${target.generation}/${answer.pending}`, { caller, generation, callId: call.id });
        } else {
          this.sendBack(target, caller, generation, (c) =>
            answer.ok ? c.core.receivePingReply(call.id, answer.reply!, this.clock) : c.core.callFailed(call.id, this.clock));
        }
        this.dispatch(target);
        return;
      }
      case "join": {
        const answer = core.handleJoin(call.request, now);
        this.dispatch(target);
        this.sendBack(target, caller, generation, (c) =>
          answer.ok ? c.core.receiveJoinReply(call.id, answer.reply, this.clock) : c.core.callFailed(call.id, this.clock));
        return;
      }
      case "leave": {
        const answer = core.handleLeave(call.request, now);
        this.dispatch(target);
        this.sendBack(target, caller, generation, (c) =>
          answer.ok ? c.core.receiveLeaveReply(call.id, answer.reply, this.clock) : c.core.callFailed(call.id, this.clock));
        return;
      }
    }
  }

  private sendBack(from: SimNode, to: SimNode, generation: number, receive: (node: SimNode) => void): void {
    if (this.lost(from, to)) return;
    this.queue.push(this.clock + this.delay(), () => {
      if (!to.running || to.generation !== generation) return;
      receive(to);
      this.dispatch(to);
    });
  }
}
