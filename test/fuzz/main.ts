// npm run fuzz [-- --quick] [--frames N] [--max-seconds S] [--seed N] [--concurrency N]
//
// Sends frames (default 1 000 000; --quick: 20 000) to a real node across Replica, Gossip and
// Membership (runner.ts) and writes docs/results/fuzz.json: frames sent, status counts overall and
// per method, crashes, corruptions of the control set and counter, unhealthy checks, INTERNAL or
// UNKNOWN answers and calls that hung (each listed with method, seed, frame index and hex prefix).
import { commandLine, isQuick, printTargets, target, writeResults } from "../bench/lib/results.ts";
import { DEFAULTS, runFuzz } from "./runner.ts";

function numberArg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}

const quick = isQuick();
const frames = numberArg("frames", quick ? 20_000 : 1_000_000);
const maxSeconds = numberArg("max-seconds", quick ? 120 : 1800);
const seed = numberArg("seed", DEFAULTS.seed);
const concurrency = numberArg("concurrency", DEFAULTS.concurrency);
const CMD = commandLine("fuzz", quick);

const r = await runFuzz({ frames, maxSeconds, seed, concurrency, progress: (l) => console.log(l) });
const { findings, corruptionDetails, ...counts } = r;
const targets = [
  target(`frames sent (asked for ${frames})`, `>= ${frames}`, r.framesSent, (m) => m >= frames, CMD),
  target("node crashes", "0", r.crashes, (m) => m === 0, CMD),
  target("control set or counter changed", "0", r.corruptions, (m) => m === 0, CMD),
  target("failed health checks after a batch", "0", r.unhealthyChecks, (m) => m === 0, CMD),
  target("INTERNAL or UNKNOWN answers", "0", r.internalOrUnknown, (m) => m === 0, CMD),
  target("calls that hung to their deadline (Watch excluded)", "0", r.deadlineExceeded, (m) => m === 0, CMD),
];
const path = writeResults("fuzz", {
  params: { quick, frames, maxSeconds, seed, concurrency, batch: DEFAULTS.batch, clusterKey: DEFAULTS.clusterKey, signedShare: DEFAULTS.signedShare, randomShare: DEFAULTS.randomShare },
  metrics: { ...counts, findings, corruptionDetails },
  targets,
});
printTargets(targets);
console.log(`wrote ${path}`);
process.exit(targets.every((t) => t.met) ? 0 : 1);
