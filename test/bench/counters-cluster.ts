// The cluster experiments of bench:counters: three real node processes, each reached by the client
// only through its own fault proxy (services/chaos/proxy, the Toxiproxy API). Short random windows
// delay a proxy's answers past the client's deadline (the increment is applied, the client times
// out and retries, with the same request id, to a node picked at random); one node is killed with
// SIGKILL in the middle and restarted on its data directory. The same client runs once with
// request ids and once without; the counter's error is read on every node after convergence.
// Also the write latency of Increment with and without a request id, interleaved, on one node.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Proxy, Toxiproxy } from "toxiproxy-node-client";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type Random, seededRandom } from "../../services/common/prng.ts";
import { startToxiproxyServer } from "../../services/chaos/proxy/index.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { eventually } from "../helpers/eventually.ts";

const ADDRS = ["127.0.3.101:7991", "127.0.3.102:7992", "127.0.3.103:7993"];
const DEADLINE_MS = 300;
const SLOW_MS = 600;
const PAUSE_MS = 300;
const ATTEMPTS = 20;
/** A steady client: one increment started every INTERVAL_MS (so fault windows meet a share of them). */
const INTERVAL_MS = 50;

export interface RetryRun {
  withIds: boolean;
  increments: number;
  attempts: number;
  timeouts: number;
  /** Failed attempts by gRPC status code. */
  failures: Record<string, number>;
  duplicatesAnswered: number;
  unacknowledged: number;
  /** The counter's value on every node after convergence (all equal). */
  value: number;
  /** (value - increments) / increments. */
  error: number;
}

export interface ClusterResult {
  runs: RetryRun[];
  crash: { atIncrement: number; node: number; downMs: number };
  faultWindows: number;
  latency: { withIdP50: number; withoutIdP50: number; withIdP99: number; withoutIdP99: number; ratioP50: number; samples: number };
}

type Client = ReturnType<typeof replicaClient>;

/** Toggle a latency toxic on a random proxy in windows of 0.5-0.9 s, 0.3-1 s apart, until stopped (at most maxWindows). */
function faultWindows(proxies: Proxy[], random: Random, maxWindows: number): { stop: () => Promise<number> } {
  let stopped = false;
  let windows = 0;
  const loop = (async () => {
    while (!stopped && windows < maxWindows) {
      await new Promise((r) => setTimeout(r, 300 + random() * 700));
      if (stopped) break;
      const p = proxies[Math.floor(random() * proxies.length)]!;
      windows++;
      const toxic = await p.addToxic({ name: "slow", type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: SLOW_MS, jitter: 0 } as never });
      // Removing the toxic releases what it holds at once: a window must outlast the client's
      // deadline for the answers inside it to come too late.
      await new Promise((r) => setTimeout(r, 500 + random() * 400));
      await toxic.remove();
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return windows;
    },
  };
}

async function incrementOnce(clients: Client[], key: string, requestId: string, random: Random, tally: { attempts: number; timeouts: number; duplicates: number; codes: Record<string, number> }): Promise<boolean> {
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const cl = clients[Math.floor(random() * clients.length)]!;
    tally.attempts++;
    try {
      const r = await call(cl, cl.increment, { key, amount: 1n, requestId }, { timeoutMs: DEADLINE_MS });
      if (r.duplicate) tally.duplicates++;
      return true;
    } catch (err) {
      tally.timeouts++;
      const code = String((err as { code?: number }).code ?? "?");
      tally.codes[code] = (tally.codes[code] ?? 0) + 1;
      await new Promise((r) => setTimeout(r, PAUSE_MS));
    }
  }
  return false;
}

async function settled(c: TestCluster, key: string): Promise<number> {
  const read = () => Promise.all([0, 1, 2].map((i) => c.replica(i, async (r) => Number((await call(r, r.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 3000 })).counterValue))));
  const values = await eventually(`every node reads the same ${key}`, read, (v) => v.every((x) => x === v[0]), 60_000);
  return values[0]!;
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

export async function runCounterCluster(increments: number, latencySamples: number, seed: number): Promise<ClusterResult> {
  const dir = mkdtempSync(join(tmpdir(), "deltaset-bench-counters-"));
  const c = new TestCluster(dir, ADDRS, ["--gossip-interval-ms", "50", "--probe-interval-ms", "300", "--probe-timeout-ms", "200"], "bc");
  const server = await startToxiproxyServer({ host: "127.0.3.100", port: 0 });
  const clients: Client[] = [];
  try {
    await c.startAll();
    const tp = new Toxiproxy(server.url);
    const proxies: Proxy[] = [];
    for (const [i, a] of ADDRS.entries()) proxies.push(await tp.createProxy({ name: `client-to-${i}`, listen: "127.0.3.100:0", upstream: a }));
    for (const p of proxies) clients.push(replicaClient(p.listen));
    const crash = { atIncrement: Math.floor(increments / 2), node: 2, downMs: 2000 };
    const runs: RetryRun[] = [];
    let faultWindowCount = 0;
    for (const withIds of [true, false]) {
      const random = seededRandom(seed);
      const key = withIds ? "with-ids" : "without-ids";
      const tally = { attempts: 0, timeouts: 0, duplicates: 0, codes: {} as Record<string, number> };
      let unacknowledged = 0;
      const faults = faultWindows(proxies, seededRandom(seed + 1), 10_000);
      for (let k = 0; k < increments; k++) {
        if (k === crash.atIncrement) {
          await c.kill(crash.node);
          setTimeout(() => void c.start(crash.node), crash.downMs);
        }
        const next = performance.now() + INTERVAL_MS;
        if (!(await incrementOnce(clients, key, withIds ? `bench-client:${k}` : "", random, tally))) unacknowledged++;
        const wait = next - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      faultWindowCount += await faults.stop();
      await eventually("the crashed node is back", async () => c.nodes.has(crash.node), (x) => x, 30_000);
      const value = await settled(c, key);
      runs.push({ withIds, increments, attempts: tally.attempts, timeouts: tally.timeouts, failures: tally.codes, duplicatesAnswered: tally.duplicates, unacknowledged, value, error: (value - increments) / increments });
    }
    // Latency: one client straight to node 0 (no proxy), Increments with and without an id alternating.
    const direct = replicaClient(ADDRS[0]!);
    clients.push(direct);
    const withId: number[] = [];
    const without: number[] = [];
    for (let i = 0; i < latencySamples; i++) {
      for (const useId of i % 2 === 0 ? [true, false] : [false, true]) {
        const t = performance.now();
        await call(direct, direct.increment, { key: "latency", amount: 1n, requestId: useId ? `lat:${i}` : "" }, { timeoutMs: 5000 });
        (useId ? withId : without).push(performance.now() - t);
      }
    }
    const latency = { withIdP50: pct(withId, 50), withoutIdP50: pct(without, 50), withIdP99: pct(withId, 99), withoutIdP99: pct(without, 99), ratioP50: pct(withId, 50) / pct(without, 50), samples: latencySamples };
    return { runs, crash, faultWindows: faultWindowCount, latency };
  } finally {
    for (const cl of clients) cl.close();
    await server.close();
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
