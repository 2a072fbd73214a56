// npm run bench:gossip-transport [-- --quick]
// What a gossip frame costs the nodes with one Exchange call per frame against one long-lived
// ExchangeStream per neighbour, measured in the same run: 3 real node processes (Algorithm 2 + BP +
// RR, local changes pushed after 5 ms, so nearly every Add becomes frames of its own), single-
// element Adds into the first node at a fixed rate, and the CPU (user + system, from /proc) each
// process used per second while they ran, after the same load ran unmeasured for a while (fresh
// processes compile their hot paths first). Writes docs/results/gossip-transport.json and its chart.
// A comparison, not a target: the machine's other load moves both sides alike.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, replicaClient } from "../../services/client/rpc.js";
import { cpuSecondsOf } from "../../services/chaos/eval/counters.js";
import { startNodeProcess, type NodeProcess } from "../helpers/node-process.js";
import { drawChart } from "./charts/draw.js";
import { isQuick, resultsDir } from "./lib/results.js";
import { writeResultFile } from "../../services/common/result-file.js";

const quick = isQuick();
const rates = quick ? [95] : [95, 190];
const seconds = quick ? 5 : 10;
/** Unmeasured load before each measurement (see measure). */
const warmUpSeconds = quick ? 5 : 15;
const transports = [
  { name: "calls", flags: ["--gossip-exchange-stream", "false"] },
  { name: "stream", flags: ["--gossip-exchange-stream", "true"] },
];

/** CPU time (ms) a process has used, from /proc (user + system). */
async function cpuMs(pid: number | undefined): Promise<number> {
  const s = await cpuSecondsOf(pid);
  if (s === null) throw new Error(`no CPU time for process ${pid}`);
  return s * 1000;
}

interface Run {
  transport: string;
  addsPerSecond: number;
  acked: number;
  /** CPU ms per second of the node taking the Adds, and the mean of the two receiving it by gossip. */
  originCpuMsPerSecond: number;
  receiverCpuMsPerSecond: number;
  /** Receivers' CPU per acknowledged Add (each Add reaches each receiver once). */
  receiverCpuMsPerAdd: number;
}

/**
 * `rate` single-element Adds a second into 16 keys named from `prefix` for `seconds` (bounded),
 * then every answer awaited; returns how many were acknowledged.
 */
async function load(c: ReturnType<typeof replicaClient>, rate: number, seconds: number, prefix: string): Promise<number> {
  const start = performance.now();
  let sent = 0;
  let acked = 0;
  const calls: Promise<void>[] = [];
  while (performance.now() - start < seconds * 1000) {
    const due = Math.floor(((performance.now() - start) / 1000) * rate);
    while (sent < due) {
      calls.push(call(c, c.add, { key: `${prefix}${sent % 16}`, elements: [Buffer.from(`e${sent}`)], texts: [] }).then(() => void acked++, () => {}));
      sent++;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  await Promise.all(calls);
  return acked;
}

async function measure(transport: (typeof transports)[number], rate: number, round: number): Promise<Run> {
  const root = mkdtempSync(join(tmpdir(), "deltaset-gossip-transport-"));
  const addrs = [1, 2, 3].map((i) => `127.0.0.${60 + i}:${7900 + round}`);
  const nodes: NodeProcess[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await startNodeProcess([
          "--listen", addrs[i]!, "--node-id", `g${i}`, "--data-dir", join(root, `g${i}`), "--seeds", addrs.filter((_, j) => j !== i).join(","),
          "--log-level", "warn", "--gossip-interval-ms", "200", "--gossip-algorithm", "alg2", "--gossip-bp", "true", "--gossip-rr", "true", "--gossip-push-local-ms", "5",
          ...transport.flags,
        ]),
      );
    }
    // Membership and the first full-state transfers settle, then the same load runs unmeasured
    // on keys of its own: fresh processes compile their hot paths during their first tens of
    // seconds of load (a receiving node's CPU per delta was about twice as high then), which would
    // otherwise be counted for whichever transport ran.
    await new Promise((r) => setTimeout(r, 3000));
    const c = replicaClient(addrs[0]!);
    await load(c, rate, warmUpSeconds, "warm");
    await new Promise((r) => setTimeout(r, 1000));
    const before = await Promise.all(nodes.map((n) => cpuMs(n.child.pid)));
    const start = performance.now();
    const acked = await load(c, rate, seconds, "k");
    const elapsed = (performance.now() - start) / 1000;
    const after = await Promise.all(nodes.map((n) => cpuMs(n.child.pid)));
    c.close();
    const perSecond = after.map((a, i) => (a - before[i]!) / elapsed);
    const receiver = (perSecond[1]! + perSecond[2]!) / 2;
    return { transport: transport.name, addsPerSecond: rate, acked, originCpuMsPerSecond: perSecond[0]!, receiverCpuMsPerSecond: receiver, receiverCpuMsPerAdd: (receiver * elapsed) / Math.max(1, acked) };
  } finally {
    for (const n of nodes) await n.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

const runs: Run[] = [];
let round = 0;
for (const rate of rates) {
  for (const t of transports) {
    const r = await measure(t, rate, round++);
    runs.push(r);
    console.log(`${t.name.padEnd(6)} ${rate} Adds/s: origin ${r.originCpuMsPerSecond.toFixed(0)} ms/s, receivers ${r.receiverCpuMsPerSecond.toFixed(0)} ms/s (${r.receiverCpuMsPerAdd.toFixed(2)} ms per Add)`);
  }
}
const ratios = rates.map((rate) => {
  const of = (name: string) => runs.find((r) => r.transport === name && r.addsPerSecond === rate)!;
  return { addsPerSecond: rate, receiverStreamOverCalls: of("stream").receiverCpuMsPerSecond / of("calls").receiverCpuMsPerSecond, originStreamOverCalls: of("stream").originCpuMsPerSecond / of("calls").originCpuMsPerSecond };
});
for (const r of ratios) console.log(`${r.addsPerSecond} Adds/s: stream/calls CPU, receivers ${r.receiverStreamOverCalls.toFixed(2)}x, origin ${r.originStreamOverCalls.toFixed(2)}x`);
const dir = quick ? mkdtempSync(join(tmpdir(), "deltaset-gossip-transport-quick-")) : resultsDir;
const path = writeResultFile(join(dir, "gossip-transport.json"), {
  params: { quick, nodes: 3, seconds, warmUpSeconds, rates, gossip: "alg2 + BP + RR, 200 ms periods, push after 5 ms", workload: "single-element unary Adds into the first node, 16 keys" },
  metrics: { runs, ratios },
  targets: [],
});
await drawChart(path);
console.log(`results: ${path}`);
