// Replication lag during steady writes: every probeEveryMs one Add of a fresh element goes to a
// random node; from its acknowledgement, every node is asked (Query with that element) until all
// report it present. The lag is acknowledgement → present on every node. Probes that never become
// visible within boundMs are counted, not dropped. Bounded in count by the run's length.
import * as grpc from "@grpc/grpc-js";
import { ReplicaClient } from "../../gen/deltaset/v1/replica.js";
import { call } from "../../client/rpc.js";
import { type Random, pick } from "../../common/prng.js";
import type { WorkloadNode } from "../workload.js";

export interface LagReport {
  samples: number[];
  /** Probes acknowledged but not visible everywhere within the bound. */
  unseen: number;
  /** Probe adds that failed (not acknowledged). */
  failed: number;
}

export class LagProbe {
  private readonly clients = new Map<string, ReplicaClient>();
  private timer: NodeJS.Timeout | undefined;
  private readonly running = new Set<Promise<void>>();
  private readonly samples: number[] = [];
  private unseen = 0;
  private failed = 0;
  private seq = 0;

  constructor(
    private readonly o: { nodes: readonly WorkloadNode[]; key: string; random: Random; probeEveryMs: number; pollMs?: number; boundMs?: number; tag: string },
  ) {
    for (const n of o.nodes) this.clients.set(n.nodeId, new ReplicaClient(n.address, grpc.credentials.createInsecure()));
  }

  start(): void {
    this.timer = setInterval(() => {
      const p = this.probe().finally(() => this.running.delete(p));
      this.running.add(p);
    }, this.o.probeEveryMs);
  }

  /** Stop sending probes and wait for the running ones to finish (each is bounded). */
  async stop(): Promise<LagReport> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all([...this.running]);
    return { samples: [...this.samples], unseen: this.unseen, failed: this.failed };
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
  }

  private async probe(): Promise<void> {
    const element = Buffer.from(`${this.o.tag}-${++this.seq}`);
    const node = pick(this.o.random, this.o.nodes);
    const c = this.clients.get(node.nodeId)!;
    try {
      await call(c, c.add, { key: this.o.key, elements: [element], texts: [] }, { timeoutMs: 2000 });
    } catch {
      this.failed++;
      return;
    }
    const acked = performance.now();
    const until = acked + (this.o.boundMs ?? 15_000);
    const waiting = new Set(this.o.nodes.map((n) => n.nodeId));
    waiting.delete(node.nodeId); // the node that acknowledged it holds it
    while (waiting.size > 0) {
      if (performance.now() > until) {
        this.unseen++;
        return;
      }
      await Promise.all(
        [...waiting].map(async (id) => {
          const q = this.clients.get(id)!;
          try {
            const r = await call(q, q.query, { key: this.o.key, elements: [element], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 1000 });
            if (r.presence[0]?.present) waiting.delete(id);
          } catch {
            // a slow or unreachable node: asked again next poll
          }
        }),
      );
      if (waiting.size > 0) await new Promise((r) => setTimeout(r, this.o.pollMs ?? 10));
    }
    this.samples.push(performance.now() - acked);
  }
}
