// Replication lag during steady writes: every probeEveryMs one Add of a fresh element goes to a
// random node; the lag is acknowledgement → present on every other node. Each node is followed by
// one Watch stream on the probe key (services/client/watch.ts keeps its copy), so a node reports
// the element when its change is durable there, to the millisecond. An earlier version asked
// every node by Query every 10 ms: at 9 nodes that was some 800 Queries a second into the nodes it
// measured, half the calls they served, and each sample carried up to a poll interval more.
// start() opens the watches and waits until every one of them reports a marker element, so no
// probe runs before all nodes are followed; the watches stay open across stop() and begin(), so
// one probe serves every round of a cell. A watch that ends is opened again from the context of
// its last event (its catch-up carries what changed meanwhile). A node that has the element before
// the Add is acknowledged counts 0. Probes not visible everywhere within boundMs are counted as
// unseen, not dropped. Bounded in count by the run's length.
import * as grpc from "@grpc/grpc-js";
import { type ElementKey, elementKey } from "../../crdt/index.js";
import { type KeyEvent, ReplicaClient } from "../../gen/deltaset/v1/replica.js";
import { call } from "../../client/rpc.js";
import { WatchedSet } from "../../client/watch.js";
import { type Random, pick } from "../../common/prng.js";
import type { WorkloadNode } from "../workload.js";

export interface LagReport {
  samples: number[];
  /** Probes acknowledged but not visible everywhere within the bound. */
  unseen: number;
  /** Probe adds that failed (not acknowledged). */
  failed: number;
}

export interface LagProbeOptions {
  nodes: readonly WorkloadNode[];
  key: string;
  random: Random;
  probeEveryMs: number;
  /** Longest wait for one probe to be visible everywhere (ms; default 15 s). */
  boundMs?: number;
  /** Longest wait in start() for every watch to report the marker (ms; default 30 s). */
  readyBoundMs?: number;
  tag: string;
}

/** One element on its way: the nodes that have not reported it yet. */
interface InFlight {
  element: ElementKey;
  waiting: Set<string>;
  /** When the last waiting node reported it. */
  lastSeenAt: number;
  settled: () => void;
}

interface Followed {
  copy: WatchedSet;
  stream?: grpc.ClientReadableStream<KeyEvent>;
}

export class LagProbe {
  private readonly clients = new Map<string, ReplicaClient>();
  private readonly followed = new Map<string, Followed>();
  private readonly inFlight = new Set<InFlight>();
  private timer: NodeJS.Timeout | undefined;
  private readonly running = new Set<Promise<void>>();
  private readonly samples: number[] = [];
  private unseen = 0;
  private failed = 0;
  private seq = 0;
  private closed = false;
  /** Watches opened again after their stream ended. */
  reopened = 0;

  constructor(private readonly o: LagProbeOptions) {
    for (const n of o.nodes) this.clients.set(n.nodeId, new ReplicaClient(n.address, grpc.credentials.createInsecure()));
  }

  /** Follow every node and wait until each reports a marker element; then begin() probes. */
  async start(): Promise<void> {
    for (const n of this.o.nodes) {
      this.followed.set(n.nodeId, { copy: new WatchedSet() });
      this.follow(n.nodeId);
    }
    const marker = Buffer.from(`${this.o.tag}-ready`);
    const node = this.o.nodes[0]!;
    await this.addAt(node.nodeId, marker, 5000);
    const ready = await this.visible(elementKey(marker), this.o.nodes.map((n) => n.nodeId), this.o.readyBoundMs ?? 30_000).seen;
    if (ready === undefined) throw new Error(`lag probe: not every node's watch of "${this.o.key}" reported the marker`);
  }

  /** Probe every probeEveryMs until stop (again after a stop: the watches stay open). */
  begin(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setInterval(() => {
      const p = this.probe().finally(() => this.running.delete(p));
      this.running.add(p);
    }, this.o.probeEveryMs);
  }

  /** Stop sending probes, wait for the running ones to finish (each is bounded), and report the probes since the last stop. */
  async stop(): Promise<LagReport> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all([...this.running]);
    const report = { samples: this.samples.splice(0), unseen: this.unseen, failed: this.failed };
    this.unseen = 0;
    this.failed = 0;
    return report;
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    for (const f of this.followed.values()) f.stream?.cancel();
    for (const c of this.clients.values()) c.close();
  }

  private follow(nodeId: string): void {
    const f = this.followed.get(nodeId)!;
    const c = this.clients.get(nodeId)!;
    const stream = c.watch({ key: this.o.key, prefix: "", since: undefined });
    f.stream = stream;
    // A reopened watch catches up on the whole (small) probe key: a copy that joins it is
    // unchanged by what it already had, and learns what it missed.
    stream.on("data", (e: KeyEvent) => {
      f.copy.apply(e);
      this.noticeAt(nodeId, f.copy);
    });
    const again = () => {
      if (this.closed || f.stream !== stream) return;
      f.stream = undefined;
      this.reopened++;
      setTimeout(() => !this.closed && this.follow(nodeId), 50);
    };
    stream.on("error", again);
    stream.on("end", again);
  }

  /** A node's copy changed: the elements in flight it now holds are seen there. */
  private noticeAt(nodeId: string, copy: WatchedSet): void {
    const now = performance.now();
    for (const f of this.inFlight) {
      if (!f.waiting.has(nodeId) || !copy.state.entries.has(f.element)) continue;
      f.waiting.delete(nodeId);
      f.lastSeenAt = now;
      if (f.waiting.size === 0) f.settled();
    }
  }

  /**
   * `seen` resolves with the time the last of `nodes` reported the element (already-present
   * included), or undefined past boundMs or once cancelled.
   */
  private visible(element: ElementKey, nodes: string[], boundMs: number): { seen: Promise<number | undefined>; cancel: () => void } {
    let cancel = () => {};
    const seen = new Promise<number | undefined>((resolve) => {
      const f: InFlight = { element, waiting: new Set(nodes), lastSeenAt: performance.now(), settled: () => {} };
      const end = (at: number | undefined) => {
        clearTimeout(timer);
        this.inFlight.delete(f);
        resolve(at);
      };
      const timer = setTimeout(() => end(undefined), boundMs);
      f.settled = () => end(f.lastSeenAt);
      cancel = () => end(undefined);
      this.inFlight.add(f);
      for (const [id, fl] of this.followed) if (f.waiting.has(id)) this.noticeAt(id, fl.copy);
    });
    return { seen, cancel };
  }

  private async addAt(nodeId: string, element: Buffer, timeoutMs: number): Promise<void> {
    const c = this.clients.get(nodeId)!;
    await call(c, c.add, { key: this.o.key, elements: [element], texts: [] }, { timeoutMs });
  }

  private async probe(): Promise<void> {
    const element = Buffer.from(`${this.o.tag}-${++this.seq}`);
    const node = pick(this.o.random, this.o.nodes);
    const others = this.o.nodes.map((n) => n.nodeId).filter((id) => id !== node.nodeId);
    const bound = this.o.boundMs ?? 15_000;
    // Followed from before the Add: a node may report it before the acknowledgement arrives.
    const tracked = this.visible(elementKey(element), others, bound + 2000);
    let acked: number;
    try {
      await this.addAt(node.nodeId, element, 2000);
      acked = performance.now();
    } catch {
      this.failed++;
      tracked.cancel();
      return;
    }
    const last = await tracked.seen;
    if (last === undefined || last - acked > bound) {
      this.unseen++;
      return;
    }
    this.samples.push(Math.max(0, last - acked));
  }
}
