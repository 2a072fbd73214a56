// The client workload of a chaos run: C concurrent clients, each sending every operation to a
// random node, like clients behind a load balancer. A client adds unique elements (its id plus
// a counter) and now and then removes some of its own elements the safe way: it reads them
// (Query with the elements, which returns the node's context), then removes each present one
// with that context. Calls have deadlines and are retried on another node like a real client's
// (a retried add of the same element is harmless: adds are idempotent). A Remove sent to a node
// lagging behind the one that served the read is deferred there (pending = 1) and counts as done;
// one that reports neither removed nor pending is repeated at the read's node. Every attempt goes into the history, failed or timed-out ones
// marked indeterminate. Loops end when told to stop or at their operation budget.
import * as grpc from "@grpc/grpc-js";
import { contextFromProto } from "../crdt/index.js";
import type { CausalContext as CausalContextMsg } from "../gen/deltaset/v1/types.js";
import { ReplicaClient } from "../gen/deltaset/v1/replica.js";
import { call } from "../client/rpc.js";
import { pick, randomInt, type Random } from "../common/prng.js";
import type { ContextRanges, HistoryRecorder, Outcome } from "./history.js";

export interface WorkloadNode {
  nodeId: string;
  address: string;
}

export interface WorkloadOptions {
  nodes: readonly WorkloadNode[];
  clients: number;
  keys: readonly string[];
  history: HistoryRecorder;
  random: Random;
  /** Deadline of one call (ms). */
  opTimeoutMs?: number;
  /** Attempts per logical operation (the first plus retries on other nodes). */
  attempts?: number;
  /** Fraction of iterations that remove instead of add (when there is something to remove). */
  removeRatio?: number;
  /** Pause between a client's operations (ms), to leave CPU to the nodes. */
  thinkMs?: number;
  /** Hard cap on operations per client. */
  maxOpsPerClient?: number;
  /** Repeat a Remove that answered removed = 0 at the node that served the read (default true). */
  retryRemoveAtReadNode?: boolean;
  now?: () => number;
}

/** Codes that mean the node refused the call before doing anything. */
const DEFINITE_FAILURES = new Set([grpc.status.INVALID_ARGUMENT, grpc.status.FAILED_PRECONDITION, grpc.status.RESOURCE_EXHAUSTED, grpc.status.PERMISSION_DENIED, grpc.status.UNAUTHENTICATED]);

function outcomeOf(err: unknown): Outcome {
  const code = (err as { code?: number }).code;
  return typeof code === "number" && DEFINITE_FAILURES.has(code) ? "fail" : "info";
}

function errorText(err: unknown): string {
  const e = err as { code?: number; details?: string; message?: string };
  return e.details !== undefined && e.code !== undefined ? `${grpc.status[e.code] ?? e.code}: ${e.details}` : String(e.message ?? err);
}

export function contextRanges(msg: CausalContextMsg | undefined): ContextRanges {
  const ctx = contextFromProto(msg);
  const out: ContextRanges = {};
  for (const r of ctx.replicas()) out[r] = ctx.rangesOf(r);
  return out;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Workload {
  private readonly clients = new Map<string, ReplicaClient>();
  private stopping = false;
  private running: Promise<void>[] = [];
  private readonly now: () => number;
  /** Acknowledged operations so far (for progress display). */
  acked = 0;

  constructor(private readonly o: WorkloadOptions) {
    this.now = o.now ?? Date.now;
  }

  private client(node: WorkloadNode): ReplicaClient {
    let c = this.clients.get(node.address);
    if (c === undefined) {
      c = new ReplicaClient(node.address, grpc.credentials.createInsecure(), {
        "grpc.initial_reconnect_backoff_ms": 100,
        "grpc.max_reconnect_backoff_ms": 1000,
        "grpc.max_receive_message_length": 64 * 1024 * 1024,
      });
      this.clients.set(node.address, c);
    }
    return c;
  }

  start(): void {
    for (let i = 1; i <= this.o.clients; i++) this.running.push(this.runClient(`c${i}`));
  }

  /** Stop every client after its current call (each call has a deadline) and wait for them. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  private pickNode(except?: string): WorkloadNode {
    const others = this.o.nodes.filter((n) => n.nodeId !== except);
    return pick(this.o.random, others.length > 0 ? others : this.o.nodes);
  }

  private async runClient(client: string): Promise<void> {
    const mine = new Map<string, string[]>(); // key → acknowledged, not yet removed elements
    let counter = 0;
    const budget = this.o.maxOpsPerClient ?? 1_000_000;
    for (let ops = 0; ops < budget && !this.stopping; ops++) {
      const removable = [...mine.entries()].filter(([, l]) => l.length > 0);
      if (removable.length > 0 && this.o.random() < (this.o.removeRatio ?? 0.25)) {
        const [key, list] = pick(this.o.random, removable);
        const chosen = new Set<string>();
        for (let i = 0; i < 3 && i < list.length; i++) chosen.add(list[randomInt(this.o.random, list.length)]!);
        const removed = await this.removeCycle(client, key, [...chosen]);
        mine.set(key, list.filter((e) => !removed.has(e)));
      } else {
        const key = pick(this.o.random, this.o.keys);
        const element = `${client}-${++counter}`;
        if (await this.add(client, key, element)) mine.set(key, [...(mine.get(key) ?? []), element]);
      }
      if ((this.o.thinkMs ?? 0) > 0) await sleep(this.o.thinkMs!);
    }
  }

  /** Add with retries on other nodes; true once acknowledged. */
  private async add(client: string, key: string, element: string): Promise<boolean> {
    let last: string | undefined;
    for (let attempt = 0; attempt < (this.o.attempts ?? 3); attempt++) {
      const node = this.pickNode(last);
      last = node.nodeId;
      const index = this.o.history.invoke();
      const start = this.now();
      try {
        const c = this.client(node);
        const res = await call(c, c.add, { key, elements: [], texts: [element] }, { timeoutMs: this.o.opTimeoutMs ?? 1000 });
        this.o.history.record({ kind: "add", index, client, node: node.nodeId, key, element, start, end: this.now(), outcome: "ok", dots: res.counters.map((c) => `${res.replica}:${c}`) });
        this.acked++;
        return true;
      } catch (err) {
        const outcome = outcomeOf(err);
        this.o.history.record({ kind: "add", index, client, node: node.nodeId, key, element, start, end: this.now(), outcome, dots: [], error: errorText(err) });
        if (outcome === "fail" || this.stopping) return false;
        await sleep(50 + randomInt(this.o.random, 150));
      }
    }
    return false;
  }

  /** Read the elements, remove the present ones with the read's context; returns those removed. */
  private async removeCycle(client: string, key: string, elements: string[]): Promise<Set<string>> {
    const done = new Set<string>();
    const readNode = this.pickNode();
    const index = this.o.history.invoke();
    const start = this.now();
    let present: boolean[];
    let context: CausalContextMsg | undefined;
    try {
      const c = this.client(readNode);
      const res = await call(c, c.query, { key, elements: [], texts: elements, pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: this.o.opTimeoutMs ?? 1000 });
      present = elements.map((_, i) => res.presence[i]?.present === true);
      context = res.context;
      this.o.history.record({ kind: "read", index, client, node: readNode.nodeId, key, start, end: this.now(), outcome: "ok", elements, present });
    } catch (err) {
      this.o.history.record({ kind: "read", index, client, node: readNode.nodeId, key, start, end: this.now(), outcome: outcomeOf(err), elements, present: [], error: errorText(err) });
      return done;
    }
    const ranges = contextRanges(context);
    for (let i = 0; i < elements.length && !this.stopping; i++) {
      if (!present[i]) continue;
      const element = elements[i]!;
      // First a random node; after a removed = 0 answer or a failure, the read's node (which
      // holds every dot the context covers), then any other.
      const targets = [this.pickNode(), readNode];
      for (let attempt = 0; attempt < (this.o.attempts ?? 3); attempt++) {
        const node = targets[attempt] ?? this.pickNode();
        const rIndex = this.o.history.invoke();
        const rStart = this.now();
        try {
          const c = this.client(node);
          const res = await call(c, c.remove, { key, elements: [], texts: [element], context }, { timeoutMs: this.o.opTimeoutMs ?? 1000 });
          this.o.history.record({ kind: "remove", index: rIndex, client, node: node.nodeId, key, element, start: rStart, end: this.now(), outcome: "ok", context: ranges, removed: res.removed, pending: res.pending, readNode: readNode.nodeId });
          this.acked++;
          // Deferred (pending) at a lagging node counts as done: it is applied when the add arrives.
          if (res.removed >= 1 || res.pending >= 1) {
            done.add(element);
            break;
          }
          if (this.o.retryRemoveAtReadNode === false) break;
        } catch (err) {
          const outcome = outcomeOf(err);
          this.o.history.record({ kind: "remove", index: rIndex, client, node: node.nodeId, key, element, start: rStart, end: this.now(), outcome, context: ranges, removed: null, pending: null, readNode: readNode.nodeId, error: errorText(err) });
          if (outcome === "fail" || this.stopping) break;
          await sleep(50 + randomInt(this.o.random, 150));
        }
      }
    }
    return done;
  }
}
