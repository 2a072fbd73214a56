// The real-cluster half of the sync benchmark: a 3-node cluster of real processes on loopback,
// one per protocol (full-state Algorithm 1, classic delta Algorithm 2, delta+BP+RR), the same
// workload on each: every node adds one unique element to one shared set per round. Bytes sent
// come from each node's own gossip counters (logged at shutdown); convergence lag is the time from
// an acknowledged add until every other node answers that the element is present.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

export const REAL_PROTOCOLS = {
  state: ["--gossip-algorithm", "alg1", "--gossip-choose", "state"],
  delta: ["--gossip-algorithm", "alg2", "--gossip-bp", "false", "--gossip-rr", "false"],
  "delta+bp+rr": ["--gossip-algorithm", "alg2", "--gossip-bp", "true", "--gossip-rr", "true"],
} as const;
export type RealProtocol = keyof typeof REAL_PROTOCOLS;

export interface RealRun {
  protocol: RealProtocol;
  updates: number;
  bytes: { delta: number; state: number; ack: number; total: number };
  bytesPerUpdate: number;
  lagMs: { p50: number; p99: number; samples: number };
}

const INTERVAL_MS = 100;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function waitFor(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      if (await fn()) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what} within ${timeoutMs} ms`);
}

async function runOne(protocol: RealProtocol, rounds: number, port: number, root: string): Promise<RealRun> {
  const addrs = [71, 72, 73].map((h) => `127.0.0.${h}:${port}`);
  const nodes: NodeProcess[] = [];
  try {
    for (const [i, a] of addrs.entries()) {
      nodes.push(
        await startNodeProcess([
          "--listen", a, "--node-id", `s${i + 1}`, "--data-dir", join(root, `${protocol}-${i}`),
          "--seeds", addrs.filter((x) => x !== a).join(","), "--gossip-interval-ms", String(INTERVAL_MS),
          "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--sync", "buffered", "--log-level", "info",
          ...REAL_PROTOCOLS[protocol],
        ]),
      );
    }
    const m = membershipClient(addrs[0]!);
    await waitFor(async () => (await call(m, m.members, { includeDeparted: false })).members.filter((x) => x.state === MemberState.ALIVE).length === 3, 15_000, "membership did not form");
    m.close();
    const clients = addrs.map((a) => replicaClient(a));
    const lags: number[] = [];
    const probes: Promise<void>[] = [];
    let updates = 0;
    for (let r = 0; r < rounds; r++) {
      await Promise.all(
        clients.map(async (c, i) => {
          const el = Buffer.from(`r${String(r).padStart(5, "0")}-n${i}`);
          await call(c, c.add, { key: "bench", elements: [el], texts: [] });
          updates++;
          if (r % 5 === 0) {
            const t0 = performance.now();
            const others = clients.filter((_, j) => j !== i);
            probes.push(
              waitFor(
                async () => (await Promise.all(others.map((o) => call(o, o.query, { key: "bench", elements: [el], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false })))).every((q) => q.presence[0]!.present),
                30_000,
                `element ${el} did not reach every node`,
              ).then(() => void lags.push(performance.now() - t0)),
            );
          }
        }),
      );
      await new Promise((res) => setTimeout(res, INTERVAL_MS));
    }
    await Promise.all(probes);
    for (const c of clients) c.close();
    const bytes = { delta: 0, state: 0, ack: 0, total: 0 };
    for (const n of nodes) {
      await n.stop();
      const line = n.logs().split("\n").find((l) => l.includes('"msg":"gossip totals"'));
      if (line === undefined) throw new Error("a node did not report its gossip totals");
      const sent = (JSON.parse(line) as { engine: { bytesSent: { delta: number; state: number; ack: number } } }).engine.bytesSent;
      bytes.delta += sent.delta;
      bytes.state += sent.state;
      bytes.ack += sent.ack;
    }
    bytes.total = bytes.delta + bytes.state + bytes.ack;
    return { protocol, updates, bytes, bytesPerUpdate: bytes.total / updates, lagMs: { p50: pct(lags, 50), p99: pct(lags, 99), samples: lags.length } };
  } catch (err) {
    for (const n of nodes) process.stderr.write(`--- ${n.nodeId} log tail:\n${n.logs().split("\n").slice(-40).join("\n")}\n`);
    throw err;
  } finally {
    await Promise.all(nodes.map((n) => n.kill()));
  }
}

export async function runRealClusterSync(opts: { quick: boolean }): Promise<{ params: Record<string, unknown>; runs: RealRun[]; ratios: Record<string, number> }> {
  const rounds = opts.quick ? 30 : 150;
  const root = mkdtempSync(join(tmpdir(), "deltaset-sync-real-"));
  const runs: RealRun[] = [];
  try {
    let port = 7481;
    for (const p of Object.keys(REAL_PROTOCOLS) as RealProtocol[]) runs.push(await runOne(p, rounds, port++, root));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const state = runs.find((r) => r.protocol === "state")!.bytes.total;
  const ratios = Object.fromEntries(runs.map((r) => [r.protocol, r.bytes.total / state]));
  return { params: { nodes: 3, rounds, updatesPerRound: 3, gossipIntervalMs: INTERVAL_MS, key: "one shared AWSET", topology: "full mesh (membership)" }, runs, ratios };
}
