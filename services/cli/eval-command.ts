// `deltaset chaos eval-cell` and `deltaset chaos eval-env`: one cell of the evaluation sweep
// (services/chaos/eval/) against running nodes whose peer links go through Toxiproxy (a kind
// cluster with Toxiproxy sidecars), and the environment that puts nodes in a sync mode. The local
// sweep (`npm run eval`) runs the same cell code on node processes it starts itself.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { UsageError } from "./client-commands.js";

export const EVAL_USAGE = `usage:
  deltaset chaos eval-env MODE [--latency-ms N [--jitter-ms N]]
                                            print the node environment of a sync mode (NAME=VALUE
                                            lines); with the largest link latency the cells will
                                            set, also membership probe timing above its round trip
  deltaset chaos eval-cell --nodes-addrs A,B,C --toxiproxy URL[,URL...] --metrics M1,M2,M3 [options]
                                            run one sweep cell against running nodes

modes: full-state alg1 alg2 alg2+bp+rr alg2+bp+rr+push

eval-cell options:
  --mode MODE            the sync mode the nodes run (a label of the result; default alg2+bp+rr)
  --latency-ms N         one-way latency added to every peer link, each direction (default 0)
  --jitter-ms N          its jitter (default 0)
  --loss-share F         share of link time under reset windows, 0..0.5 (default 0)
  --rounds N             write-then-settle rounds (default 3)
  --write-ms N           length of each round's writes (default 2500)
  --prefill N            elements per key before the rounds (default 2000)
  --gossip-interval-ms N the nodes' gossip period, for the physical limit (default 100)
  --seed X               seed of the workload and the loss windows (default 1)
  --warm-up-ms N         before the cell, run its workload unmeasured on keys of its own for N
                         ms, then delete them (default 0; give it to the first cell after nodes
                         start: cold processes compile their hot paths during the first load)
  --out FILE             write the cell's result as JSON (default: print it)
Peer proxies must report bytes (Toxiproxy started with -proxy-metrics); every node needs a
metrics endpoint (--metrics-listen) reachable at the --metrics addresses, in --nodes-addrs order.
`;

const list = (s: string) => s.split(",").map((x) => x.trim()).filter((x) => x !== "");

function num(raw: string | undefined, flag: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`${flag} must be a number in ${min}..${max}, not "${raw}"`);
  return n;
}

export async function evalEnvCommand(args: string[]): Promise<void> {
  const { MODES } = await import("../chaos/eval/grid.js");
  const { modeEnv, membershipEnv } = await import("../chaos/eval/mode-env.js");
  const mode = args[0];
  if (mode === undefined || !(MODES as string[]).includes(mode)) throw new UsageError(`eval-env takes one mode of: ${MODES.join(" ")}\n${EVAL_USAGE}`);
  const { values } = parseArgs({ args: args.slice(1), options: { "latency-ms": { type: "string" }, "jitter-ms": { type: "string" } } });
  const env = modeEnv(mode as (typeof MODES)[number]);
  if (values["latency-ms"] !== undefined) {
    const latencyMs = num(values["latency-ms"], "--latency-ms", 0, 0, 10_000);
    const jitterMs = num(values["jitter-ms"], "--jitter-ms", 0, 0, 10_000);
    Object.assign(env, membershipEnv({ latencyMs, jitterMs }));
  }
  for (const [k, v] of Object.entries(env)) process.stdout.write(`${k}=${v}\n`);
}

export async function evalCellCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      "nodes-addrs": { type: "string" },
      toxiproxy: { type: "string" },
      metrics: { type: "string" },
      mode: { type: "string", default: "alg2+bp+rr" },
      "latency-ms": { type: "string" },
      "jitter-ms": { type: "string" },
      "loss-share": { type: "string" },
      rounds: { type: "string" },
      "write-ms": { type: "string" },
      prefill: { type: "string" },
      "gossip-interval-ms": { type: "string" },
      seed: { type: "string" },
      "warm-up-ms": { type: "string" },
      out: { type: "string" },
    },
  });
  const { MODES, evalGrid } = await import("../chaos/eval/grid.js");
  if (values["nodes-addrs"] === undefined) throw new UsageError(`eval-cell needs --nodes-addrs\n${EVAL_USAGE}`);
  if (values.toxiproxy === undefined) throw new UsageError(`eval-cell needs --toxiproxy\n${EVAL_USAGE}`);
  if (values.metrics === undefined) throw new UsageError(`eval-cell needs --metrics (each node's metrics endpoint)\n${EVAL_USAGE}`);
  const addresses = list(values["nodes-addrs"]);
  const apis = list(values.toxiproxy);
  const metrics = list(values.metrics);
  if (addresses.length < 2) throw new UsageError("--nodes-addrs needs at least 2 nodes");
  if (apis.length !== 1 && apis.length !== addresses.length) throw new UsageError(`--toxiproxy: give one API or one per node (${addresses.length})`);
  if (metrics.length !== addresses.length) throw new UsageError(`--metrics: give one endpoint per node (${addresses.length}), in --nodes-addrs order`);
  const mode = values.mode!;
  if (!(MODES as string[]).includes(mode)) throw new UsageError(`--mode must be one of ${MODES.join(" ")}`);
  const latencyMs = num(values["latency-ms"], "--latency-ms", 0, 0, 10_000);
  const jitterMs = num(values["jitter-ms"], "--jitter-ms", 0, 0, 10_000);
  const share = num(values["loss-share"], "--loss-share", 0, 0, 0.5);
  const base = evalGrid(false);
  const grid = {
    ...base,
    rounds: num(values.rounds, "--rounds", 3, 1, 100),
    writeMs: num(values["write-ms"], "--write-ms", 2500, 100, 600_000),
    prefill: num(values.prefill, "--prefill", 2000, 0, 1_000_000),
    gossipIntervalMs: num(values["gossip-interval-ms"], "--gossip-interval-ms", 100, 1, 600_000),
    warmUpMs: num(values["warm-up-ms"], "--warm-up-ms", 0, 0, 600_000),
  };

  const { discoverNodes } = await import("../chaos/run.js");
  const { LinkTable } = await import("../chaos/links.js");
  const { runCell } = await import("../chaos/eval/cell.js");
  const nodes = await discoverNodes(addresses);
  // Clients dial the addresses given (port-forwards), not the advertised ones; links are found by id.
  const dial = nodes.map((n, i) => ({ nodeId: n.nodeId, address: addresses[i]! }));
  const linkNodes = nodes.map((n, i) => ({ ...n, toxiproxy: apis.length === 1 ? apis[0]! : apis[i]! }));
  const byId = new Map(nodes.map((n, i) => [n.nodeId, metrics[i]!]));
  if (grid.warmUpMs > 0) {
    const { warmUp } = await import("../chaos/eval/warm-up.js");
    const w = await warmUp(dial, grid, `cell-${values.seed ?? "1"}`);
    process.stderr.write(`warm-up: ${w.operations} operations, ${w.probes} lag probes, settled ${w.settledMs} ms after\n`);
  }
  const result = await runCell(
    { nodes: dial, links: new LinkTable(linkNodes), proxyApis: apis, metricsAddress: (id) => byId.get(id), pid: () => undefined },
    {
      mode: mode as (typeof MODES)[number],
      latency: { name: latencyMs === 0 ? "none" : `${latencyMs}±${jitterMs} ms`, latencyMs, jitterMs },
      loss: { name: `${(share * 100).toFixed(0)}%`, windowShare: share },
      grid,
      seed: Number(values.seed ?? "1"),
    },
    (line) => process.stderr.write(`${line}\n`),
  );
  const text = `${JSON.stringify(result, null, 2)}\n`;
  if (values.out !== undefined) writeFileSync(values.out, text);
  else process.stdout.write(text);
  if (!result.valid) process.exitCode = 1;
}
