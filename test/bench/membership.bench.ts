// Benchmark of the SWIM membership layer in the deterministic simulator (the real core, a virtual
// clock, a simulated network with seeded per-message loss and 1-10 ms delay):
//  1. 100 nodes under the three churn models of seed 000 (static; intermediate: a node replaced
//     with 1% probability per step; dynamic: 10% leave / 80% nothing / 10% join or rejoin), 10%
//     message loss, steps of 100 ms: false suspicions, false deaths, time to detect a crash (first
//     SUSPECT anywhere), time until it is DEAD in every view, time for a graceful leave to be LEFT
//     everywhere, and time for all views to agree once churn stops;
//  2. detection time of a silent node vs cluster size (5..100) with default settings, at 0% and
//     10% loss (crash trials; the node restarts between trials).
// Writes docs/results/membership.json and membership.svg.
//
//   npm run bench:membership
//   npm run bench:membership -- --quick
import { scheduleChurn, type ChurnModel } from "../../services/membership/churn.js";
import { DEFAULT_MEMBERSHIP_CONFIG, detectionBoundMs, resolveConfig, suspicionTimeoutMs } from "../../services/membership/config.js";
import { seededRandom } from "../../services/common/prng.ts";
import { SimulationObserver, quantile } from "../../services/membership/sim-observer.js";
import { MembershipSimulation } from "../../services/membership/simulator.js";
import { drawChart } from "./charts/draw.js";
import { commandLine, isQuick, printTargets, target, writeResults } from "./lib/results.js";

const quick = isQuick();
const COMMAND = commandLine("bench:membership", quick);
const NODES = 100;
const LOSS = 0.1;
const STEP_MS = 100;
const CHURN_STEPS = quick ? 600 : 3000; // 1 min or 5 min of churn
const RUNS_PER_MODEL = quick ? 1 : 3; // seeds per churn model
const AGREEMENT_LIMIT_MS = 120_000;
const SIZES = [5, 10, 25, 50, 100];
const TRIALS: Record<number, number> = quick ? { 5: 500, 10: 500, 25: 40, 50: 15, 100: 6 } : { 5: 1000, 10: 1000, 25: 300, 50: 150, 100: 100 };
const LOSSES = [0, 0.1];
const MODELS: ChurnModel[] = ["static", "intermediate", "dynamic"];

const round = (x: number) => (Number.isFinite(x) ? Math.round(x) : null);
const stats = (values: number[]) => ({
  count: values.length,
  p50: round(quantile(values, 0.5)),
  p99: round(quantile(values, 0.99)),
  max: values.length > 0 ? round(Math.max(...values)) : null,
});

/** A formed cluster: nodes join one at a time, 50 ms apart; returns it and the formation time. */
function formCluster(n: number, seed: number, lossRate: number) {
  const sim = new MembershipSimulation({ seed, lossRate });
  for (let i = 0; i < n; i++) {
    sim.addNode();
    sim.run(50);
  }
  const lastJoin = sim.now;
  const agreedAt = sim.runUntilAgreement(lastJoin + AGREEMENT_LIMIT_MS, 100);
  if (agreedAt === undefined) throw new Error(`${n} nodes did not form one cluster`);
  return { sim, formationMs: agreedAt - lastJoin };
}

interface ModelRun {
  formationMs: number;
  counts: ReturnType<typeof scheduleChurn>;
  crashDetect: number[];
  crashDead: number[];
  leaveSettle: number[];
  falseSuspicions: number;
  falseSuspicionEvents: number;
  falseDeaths: number;
  falseLefts: number;
  unsettled: number;
  agreementMs: number | null;
  messagesPerNodePerSecond: number;
  refutationsByRunningProcesses: number;
  wallSeconds: number;
}

function runModel(model: ChurnModel, seed: number): ModelRun {
  const wall0 = Date.now();
  const { sim, formationMs } = formCluster(NODES, seed, LOSS);
  const observer = new SimulationObserver(sim);
  const traffic0 = sim.traffic.messages;
  const start = sim.now;
  const counts = scheduleChurn(sim, { model, stepMs: STEP_MS, steps: CHURN_STEPS, churnRate: 0.01, leaveProbability: 0.1, joinProbability: 0.1, crashFraction: 0.5 }, seededRandom(seed * 31 + 7));
  sim.run(CHURN_STEPS * STEP_MS);
  const churnEnd = sim.now;
  const agreedAt = sim.runUntilAgreement(churnEnd + AGREEMENT_LIMIT_MS, 100);
  // Let the last departures settle in the record (views agreeing implies it, but the sampler runs every 100 ms).
  sim.run(200);
  const crashes = observer.departures.filter((d) => d.kind === "crash" && !d.censored);
  const refutations = sim.runningIds().reduce((sum, id) => sum + sim.core(id).stats().refutations, 0);
  return {
    formationMs,
    counts,
    crashDetect: crashes.filter((d) => d.detectedAt !== undefined).map((d) => d.detectedAt! - d.at),
    crashDead: observer.settled("crash").map((d) => d.settledAt! - d.at),
    leaveSettle: observer.settled("leave").map((d) => d.settledAt! - d.at),
    falseSuspicions: observer.distinct("suspect"),
    falseSuspicionEvents: observer.count("suspect"),
    falseDeaths: observer.count("dead"),
    falseLefts: observer.count("left"),
    unsettled: observer.unsettled().length,
    agreementMs: agreedAt === undefined ? null : agreedAt - churnEnd,
    messagesPerNodePerSecond: (sim.traffic.messages - traffic0) / NODES / ((sim.now - start) / 1000),
    refutationsByRunningProcesses: refutations,
    wallSeconds: (Date.now() - wall0) / 1000,
  };
}

/** Crash trials at one size: crash a random node, wait until it is DEAD everywhere, restart it. */
function detectionTrials(n: number, lossRate: number, trials: number, seed: number) {
  const { sim } = formCluster(n, seed, lossRate);
  const observer = new SimulationObserver(sim);
  const firstDead = new Map<string, number>();
  sim.onChange((_observer, change, at) => {
    const key = `${change.member.nodeId}@${change.member.incarnation}`;
    if (change.kind === "dead" && !firstDead.has(key)) firstDead.set(key, at);
  });
  const detect: number[] = [];
  const firstDeath: number[] = [];
  const deadEverywhere: number[] = [];
  for (let trial = 0; trial < trials; trial++) {
    sim.run(2000 + sim.random() * 3000);
    const ids = sim.runningIds();
    const victim = ids[Math.floor(sim.random() * ids.length)]!;
    const incarnation = sim.core(victim).incarnation;
    sim.crash(victim);
    const record = observer.departures.at(-1)!;
    if (!sim.runUntil(sim.now + 120_000, () => record.settledAt !== undefined)) throw new Error(`crash of ${victim} never settled`);
    detect.push(record.detectedAt! - record.at);
    deadEverywhere.push(record.settledAt! - record.at);
    const died = firstDead.get(`${victim}@${incarnation}`);
    if (died !== undefined) firstDeath.push(died - record.at);
    sim.restart(victim);
    if (sim.runUntilAgreement(sim.now + 60_000, 100) === undefined) throw new Error(`${victim} did not rejoin`);
  }
  return {
    nodes: n,
    lossRate,
    trials,
    detectMs: stats(detect),
    firstDeathMs: stats(firstDeath),
    deadEverywhereMs: stats(deadEverywhere),
    falseDeaths: observer.count("dead"),
    detectionBoundMs: detectionBoundMs(resolveConfig(), n),
    suspicionTimeoutMs: suspicionTimeoutMs(resolveConfig(), n),
  };
}

// ---- run -------------------------------------------------------------------------------------

const wall0 = Date.now();
const models: Record<string, ReturnType<typeof summarize>> = {};

function summarize(runs: ModelRun[]) {
  const all = <K extends keyof ModelRun>(key: K) => runs.map((r) => r[key]);
  const flat = (key: "crashDetect" | "crashDead" | "leaveSettle") => runs.flatMap((r) => r[key]);
  const sum = (key: "falseSuspicions" | "falseSuspicionEvents" | "falseDeaths" | "falseLefts" | "unsettled" | "refutationsByRunningProcesses") =>
    runs.reduce((s, r) => s + r[key], 0);
  const agreements = all("agreementMs");
  return {
    runs: runs.length,
    churn: runs.map((r) => r.counts),
    formationMs: stats(all("formationMs")),
    crashDetectMs: stats(flat("crashDetect")),
    crashDeadEverywhereMs: stats(flat("crashDead")),
    leaveLeftEverywhereMs: stats(flat("leaveSettle")),
    falseSuspicions: sum("falseSuspicions"),
    falseSuspicionEvents: sum("falseSuspicionEvents"),
    falseDeaths: sum("falseDeaths"),
    falseLefts: sum("falseLefts"),
    unsettledDepartures: sum("unsettled"),
    refutationsByRunningProcesses: sum("refutationsByRunningProcesses"),
    agreementAfterChurnMs: agreements.every((a) => a !== null) ? stats(agreements as number[]) : null,
    messagesPerNodePerSecond: Number((all("messagesPerNodePerSecond").reduce((a, b) => a + b, 0) / runs.length).toFixed(2)),
    wallSeconds: Number(all("wallSeconds").reduce((a, b) => a + b, 0).toFixed(1)),
  };
}

for (const model of MODELS) {
  const runs: ModelRun[] = [];
  for (let r = 0; r < RUNS_PER_MODEL; r++) runs.push(runModel(model, 100 + r));
  models[model] = summarize(runs);
  const m = models[model]!;
  console.log(`${model}: false suspicions ${m.falseSuspicions}, false deaths ${m.falseDeaths}, detect p50/p99 ${m.crashDetectMs.p50}/${m.crashDetectMs.p99} ms, ` +
    `dead everywhere p50/p99 ${m.crashDeadEverywhereMs.p50}/${m.crashDeadEverywhereMs.p99} ms, agree after churn ${JSON.stringify(m.agreementAfterChurnMs)} (${m.wallSeconds} s)`);
}

const detection: ReturnType<typeof detectionTrials>[] = [];
for (const lossRate of LOSSES) {
  for (const n of SIZES) {
    const t0 = Date.now();
    const row = detectionTrials(n, lossRate, TRIALS[n]!, 1000 + n);
    detection.push(row);
    console.log(`detection n=${n} loss=${lossRate}: p50 ${row.detectMs.p50} p99 ${row.detectMs.p99} ms; dead everywhere p50 ${row.deadEverywhereMs.p50} p99 ${row.deadEverywhereMs.p99} ms (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
}

// ---- results ---------------------------------------------------------------------------------

const smallP99 = Math.max(...detection.filter((d) => d.nodes <= 10).map((d) => d.detectMs.p99 ?? Infinity));
const staticFalseDeaths = models.static!.falseDeaths;
const churnFalseDeaths = models.intermediate!.falseDeaths + models.dynamic!.falseDeaths;
const agreementWorst = Math.max(...MODELS.map((m) => models[m]!.agreementAfterChurnMs?.max ?? Infinity));
const leaveP99 = Math.max(...MODELS.filter((m) => m !== "static").map((m) => models[m]!.leaveLeftEverywhereMs.p99 ?? 0));

const targets = [
  target("silent node detected (first SUSPECT) at 5 and 10 nodes, default settings, p99 over 0% and 10% loss", "<= 5 s", smallP99 / 1000, (s) => s <= 5, COMMAND),
  target("live nodes declared dead, static model, 100 nodes, 10% loss", "0", staticFalseDeaths, (x) => x === 0, COMMAND),
  target("live nodes declared dead, intermediate + dynamic churn, 100 nodes, 10% loss", "0", churnFalseDeaths, (x) => x === 0, COMMAND),
  target("all views agree after churn stops (worst run, 100 nodes, 10% loss)", "<= 60 s", agreementWorst / 1000, (s) => s <= 60, COMMAND),
  target("graceful leave LEFT in every view, p99", "<= 5 s", leaveP99 / 1000, (s) => s <= 5, COMMAND),
];

const resultsPath = writeResults("membership", {
  params: {
    quick,
    nodes: NODES,
    lossRate: LOSS,
    delayMs: [1, 10],
    stepMs: STEP_MS,
    churnSteps: CHURN_STEPS,
    runsPerModel: RUNS_PER_MODEL,
    churn: { intermediate: { replaceProbability: 0.01 }, dynamic: { leave: 0.1, nothing: 0.8, joinOrRejoin: 0.1 }, crashShareOfDepartures: 0.5 },
    sizes: SIZES,
    trials: TRIALS,
    config: DEFAULT_MEMBERSHIP_CONFIG,
    definitions: {
      detect: "crash to the first SUSPECT (or DEAD) of it in any running view",
      deadEverywhere: "crash to the time every running view holds it DEAD (or has reaped it)",
      falseSuspicion: "a SUSPECT of a running process (distinct member@incarnation)",
      falseDeath: "a DEAD event about a running process, counted per observing node",
      agreement: "every running view's live set (ALIVE or SUSPECT) equals the set of running nodes",
    },
  },
  metrics: { models, detection, wallSeconds: Math.round((Date.now() - wall0) / 1000) },
  targets,
});

await drawChart(resultsPath);
printTargets(targets);
console.log(`wall time ${((Date.now() - wall0) / 1000).toFixed(1)} s`);
