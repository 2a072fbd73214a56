// The acknowledged-write crash loop shared by the integration test (20 loops) and
// `npm run chaos:crash-loop` (200 and more): on a running TestCluster, each loop writes to a fresh
// key on one node (every fourth loop a 200-element batch), SIGKILLs that node as soon as the
// write is acknowledged, restarts it, and waits until every node reads exactly what was written.
import type { TestCluster } from "./test-cluster.ts";

export interface CrashLoopResult {
  loops: number;
  /** Loops whose write every node read before the deadline. */
  replicated: number;
  /** Milliseconds from the restarted node listening to identical reads on every node, per loop. */
  replicateMs: number[];
  /** Loops that failed, with why. */
  failures: Array<{ loop: number; error: string }>;
}

export async function runCrashLoops(
  c: TestCluster,
  opts: { loops: number; nodes: number; timeoutMs?: number; keyPrefix?: string; onLoop?: (loop: number, ms: number) => void; stopOnFailure?: boolean },
): Promise<CrashLoopResult> {
  const out: CrashLoopResult = { loops: 0, replicated: 0, replicateMs: [], failures: [] };
  const all = Array.from({ length: opts.nodes }, (_, i) => i);
  for (let loop = 0; loop < opts.loops; loop++) {
    const victim = loop % opts.nodes;
    const key = `${opts.keyPrefix ?? "acked"}-${loop}`;
    const batch = loop % 4 === 3 ? Array.from({ length: 200 }, (_, j) => `v${loop}-${j}`) : [`v${loop}`];
    out.loops++;
    try {
      await c.add(victim, key, batch);
      await c.kill(victim);
      await c.start(victim);
      const started = Date.now();
      await c.converged(key, all, batch, opts.timeoutMs ?? 20_000);
      const ms = Date.now() - started;
      out.replicated++;
      out.replicateMs.push(ms);
      opts.onLoop?.(loop, ms);
    } catch (err) {
      out.failures.push({ loop, error: (err as Error).message.slice(0, 300) });
      if (opts.stopOnFailure ?? false) throw err;
      if (!c.nodes.has(victim)) await c.start(victim);
    }
  }
  return out;
}
