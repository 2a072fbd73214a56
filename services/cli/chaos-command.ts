// `deltaset chaos`: fault experiments.
//
//   deltaset chaos run SCENARIO [--nodes N] [--duration S] [--clients C] [--seed X] [--out DIR]
//   deltaset chaos run SCENARIO --external --nodes-addrs A,B,C --toxiproxy URL[,URL...]
//   deltaset chaos proxy [--listen HOST:PORT]      (a Toxiproxy-compatible server)
import { parseArgs } from "node:util";
import { UsageError, wantsHelp } from "./client-commands.js";
import { bar } from "./output.js";

export const CHAOS_USAGE = `usage:
  deltaset chaos run SCENARIO [options]     run one fault scenario and check the history
  deltaset chaos proxy [--listen HOST:PORT] run a Toxiproxy-compatible fault proxy
  deltaset chaos eval-cell ...              one evaluation cell against running nodes (see eval-cell --help)
  deltaset chaos eval-env MODE              the node environment of a sync mode

scenarios: partition-halves isolate-one asymmetric-cut latency bandwidth reset-storm
           kill-restart pause-resume churn mix slicer

run options:
  --nodes N            nodes of the local cluster (default 3)
  --duration S         seconds of the fault phase (default 20)
  --clients C          concurrent clients (default 4)
  --seed X             seed of the fault plan and the workload (default: random, printed)
  --out DIR            where results go (default docs/results/chaos) and, under it, the node data
  --first-host H       first loopback host 127.0.0.H of the local nodes (default 111)
  --port P             node port (default 7070; metrics on P+1)
  --toxiproxy URL      use this Toxiproxy API (local run: instead of one started here;
                       --external: one per node, in --nodes-addrs order, or one for all)
  --external           run against running nodes whose peer links go through Toxiproxy
  --nodes-addrs LIST   their client addresses (comma-separated; --nodes LIST works too)
  --post-heal-ms MS    workload after the heal (default 2000)
  --keep-data          keep node data and logs (they are kept anyway when the check fails)
  --no-remove-retry    do not repeat a Remove that answered removed = 0 at the read's node
  -- NODE-FLAGS...     node flags instead of the default chaos timings
Exit status: 0 when the run checks out (nothing lost, nothing resurrected, no remove ignored, no
stale or phantom read, identical reads and states, every final Query agreeing with the Scan, and
traffic through every link's proxy), 1 otherwise.
`;

export async function chaosCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub === "proxy") {
    const { runProxyServerCli } = await import("../chaos/proxy/index.js");
    await runProxyServerCli(rest);
    return;
  }
  if (sub === "run") {
    if (wantsHelp(rest)) {
      process.stdout.write(CHAOS_USAGE);
      return;
    }
    await chaosRun(rest);
    return;
  }
  if (sub === "eval-cell" || sub === "eval-env") {
    const { evalCellCommand, evalEnvCommand } = await import("./eval-command.js");
    await (sub === "eval-cell" ? evalCellCommand(rest) : evalEnvCommand(rest));
    return;
  }
  if (sub === undefined || sub === "help" || sub === "--help" || sub === "-h") {
    process.stdout.write(CHAOS_USAGE);
    return;
  }
  throw new UsageError(`unknown subcommand "${sub}"\n${CHAOS_USAGE}`);
}

function positiveInt(raw: string | undefined, flag: string, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`${flag} must be a non-negative integer, not "${raw}"`);
  return n;
}

async function chaosRun(args: string[]): Promise<void> {
  const dash = args.indexOf("--");
  const own = dash >= 0 ? args.slice(0, dash) : args;
  const nodeFlags = dash >= 0 ? args.slice(dash + 1) : undefined;
  const { values, positionals } = parseArgs({
    args: own,
    options: {
      nodes: { type: "string" },
      duration: { type: "string" },
      clients: { type: "string" },
      seed: { type: "string" },
      out: { type: "string" },
      "first-host": { type: "string" },
      port: { type: "string" },
      toxiproxy: { type: "string" },
      external: { type: "boolean", default: false },
      "nodes-addrs": { type: "string" },
      "post-heal-ms": { type: "string" },
      "keep-data": { type: "boolean", default: false },
      "no-remove-retry": { type: "boolean", default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const { resolveScenario, PROCESS_SCENARIOS } = await import("../chaos/plan.js");
  if (positionals.length !== 1) throw new UsageError(`chaos run takes one scenario\n${CHAOS_USAGE}`);
  const scenario = resolveScenario(positionals[0]!);
  if (scenario === undefined) throw new UsageError(`unknown scenario "${positionals[0]}"\n${CHAOS_USAGE}`);

  const external = values.external === true;
  let addresses: string[] | undefined;
  let nodeCount = 3;
  const list = (s: string) => s.split(",").map((x) => x.trim()).filter((x) => x !== "");
  if (external) {
    const raw = values["nodes-addrs"] ?? values.nodes;
    if (raw === undefined || !raw.includes(":")) throw new UsageError("--external needs --nodes-addrs HOST:PORT,... (the nodes' client addresses)");
    if (values.toxiproxy === undefined) throw new UsageError("--external needs --toxiproxy URL[,URL...] (the Toxiproxy API of the nodes' peer links)");
    addresses = list(raw);
    nodeCount = addresses.length;
    if (nodeCount < 2) throw new UsageError("--nodes-addrs needs at least 2 nodes");
    if (PROCESS_SCENARIOS.has(scenario)) throw new UsageError(`scenario "${scenario}" kills, pauses or restarts node processes, which --external cannot do; network scenarios and mix work`);
  } else {
    nodeCount = positiveInt(values.nodes, "--nodes", 3);
    if (nodeCount < 2) throw new UsageError("--nodes must be at least 2");
  }
  const seed = values.seed !== undefined ? positiveInt(values.seed, "--seed", 0) : Math.floor(Math.random() * 2 ** 31);
  const durationS = Number(values.duration ?? "20");
  if (!(durationS >= 2 && durationS <= 3600)) throw new UsageError("--duration must be 2..3600 seconds");

  const { runScenario } = await import("../chaos/run.js");
  const { writeRunResults, DEFAULT_RESULTS_DIR } = await import("../chaos/report.js");
  const outDir = values.out ?? DEFAULT_RESULTS_DIR;
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const tty = process.stderr.isTTY === true;
  const progress = (f: number, phase: string) => {
    if (tty) process.stderr.write(`\r\x1b[2K${bar(f, 1)} ${scenario} ${nodeCount}n: ${phase}`);
  };
  process.stdout.write(`chaos run ${scenario}: ${nodeCount} nodes, ${durationS} s of faults, seed ${seed}\n`);
  try {
    const result = await runScenario({
      scenario,
      nodes: nodeCount,
      faultMs: Math.round(durationS * 1000),
      clients: positiveInt(values.clients, "--clients", 4),
      seed,
      workDir: values.out,
      keepData: values["keep-data"] === true,
      firstHost: positiveInt(values["first-host"], "--first-host", 111),
      port: positiveInt(values.port, "--port", 7070),
      nodeArgs: nodeFlags,
      toxiproxy: external ? undefined : values.toxiproxy,
      external: external ? { addresses: addresses!, toxiproxy: list(values.toxiproxy!) } : undefined,
      retryRemoveAtReadNode: values["no-remove-retry"] !== true,
      postHealMs: values["post-heal-ms"] === undefined ? undefined : positiveInt(values["post-heal-ms"], "--post-heal-ms", 2000),
      signal: controller.signal,
      onProgress: progress,
      log: (line) => {
        if (tty) process.stderr.write("\r\x1b[2K");
        process.stderr.write(`${line}\n`);
      },
    });
    if (tty) process.stderr.write("\r\x1b[2K");
    const path = writeRunResults(result, outDir);
    process.stdout.write(`${summaryText(result)}\nresults: ${path}\n`);
    if (!result.valid) process.exitCode = 1;
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    if (tty) process.stderr.write("\r\x1b[2K");
    process.stderr.write("chaos run interrupted; nodes and proxies stopped\n");
    process.exitCode = 130;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

function summaryText(r: import("../chaos/run.js").RunResult): string {
  const c = r.check;
  return [
    `${r.valid ? "OK" : "FAILED"}  ${r.scenario} on ${r.nodes} nodes`,
    ...r.problems.map((p) => `  FAILED: ${p}`),
    `  acknowledged adds lost:        ${c.lostCount}`,
    `  removed elements come back:    ${c.resurrectedCount}`,
    `  nodes with differing reads:    ${c.divergence.nodes.length}${c.divergence.nodes.length ? ` (${c.divergence.nodes.join(", ")})` : ""}`,
    `  identical reads after heal:    ${r.convergenceFromHealMs === null ? "never (within the bound)" : `${r.convergenceFromHealMs} ms`}`,
    `  identical states after heal:   ${r.statesFromHealMs === null ? "never (within the bound)" : r.statesFromHealMs === "unknown" ? "not measured (the nodes list no state digests)" : `${r.statesFromHealMs} ms`}`,
    `  operations: add ${fmt(c.ops.add)}, remove ${fmt(c.ops.remove)}, read ${fmt(c.ops.read)}; ${c.ackedOpsPerSec.toFixed(0)} acked/s`,
    `  removes without effect:        ${c.removesWithoutEffect} (answered removed = 0; element their context covered still there: ${c.ignoredRemoveCount})`,
    `  reads during the run:          ${c.readAnswersChecked} answers checked; stale at the node that took the add: ${c.staleReadCount}; phantom: ${c.phantomReads.length}`,
    `  final Query vs Scan:           ${r.finalQueries.checked} answers, ${r.finalQueries.mismatchCount} disagree`,
    `  links without proxy traffic:   ${r.linkTraffic.measured ? (r.linkTraffic.silentLinks.length === 0 ? "0" : r.linkTraffic.silentLinks.join(", ")) : "not measured (the Toxiproxy API serves no /metrics)"}`,
    `  gossip bytes:                  ${r.gossipBytes ?? "not measured"}`,
    ...(r.dataDir ? [`  node data and logs kept in ${r.dataDir}`] : []),
  ].join("\n");
}

function fmt(c: { ok: number; fail: number; info: number }): string {
  return `${c.ok} ok/${c.info} indeterminate/${c.fail} failed`;
}
