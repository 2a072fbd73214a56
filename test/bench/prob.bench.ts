// npm run bench:prob [-- --quick] [-- --jobs N]
// Reproduction of seed 000's evaluation (§5.2-§5.3; shared/notes/seed-000.md section 6): the
// probabilistic add-wins set (APBF tombstones) against a deterministic shadow (exact AWSet) in the
// seed's simulator setup (prob-sim.ts), the probabilistic half under the seed's own rules
// (prob-seed-rules.ts; the AWSetProb type as implemented is measured alongside on the uniform
// table, for information): 16 replicas, full-state unidirectional pull over a complete
// graph, intermediate churn 1% (replaced by new identities), 20 000 iterations, 3 rounds, uniform
// and Zipf 1.03 origins, APBF error 2 and 5 (capacity 4096, level 5), sync shares 80% and 40%, for
// each union strategy. Metric: % of syncs creating new inconsistencies, split into false-positive
// (classic exclusive) and forgotten-dot (probabilistic exclusive) causes.
// Also: APBF byte sizes and the crossover against version-vector contexts (prob-memory.ts), and
// the trends of §5.3.3 for Current Generation, error 2: dynamicity, churn rate, load, fixed number
// of syncs (2 000).
//
// Full run: writes docs/results/prob.json and docs/results/prob-{table,causes,memory,trends}.svg.
// --quick (5 000 iterations, 1 round, 3 sync shares in the trends; a smoke run): writes the same
// files under $TMPDIR/deltaset-prob-quick/ only, so the committed results stay those of a full run
// (the crash-loop bench's convention: quick never overwrites docs/results).
// Runs are spread over child processes (--jobs, default min(2, CPUs)); every run is bounded by
// its iteration count.
import { type ChildProcess, fork } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { barChart, lineChart, panels, renderSvg } from "./lib/plot.js";
import { type Target, commandLine, isQuick, printTargets, repoRoot, resultsDir, target } from "./lib/results.js";
import { writeResultFile } from "../../services/common/result-file.js";
import { type Dynamicity, type Load, SEED_SETUP, type SimConfig, type SimResult, UnionStrategy, runSim, strategyName } from "./prob-sim.js";
import { mapBytes, memoryFigures, vectorBytes } from "./prob-memory.js";
import { REMAINING_MISSES } from "./prob-notes.js";

// ------------------------------------------------------------------ paper figures

const SOURCE = "P. Fernandes, Probabilistic Data Types (MSc dissertation, Universidade do Minho, 2021), §5.3.2 text and Figs 5.3 (80% syncs), 5.4 (40% syncs)";
const STRATEGIES = [UnionStrategy.WholeFilter, UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration] as const;
const LABEL: Record<number, string> = { 0: "Whole Filter", 1: "Active Slices", 2: "Current Generation" };
/** % of syncs creating new inconsistencies, uniform load: PAPER[syncShare%][error][strategy]. */
const PAPER: Record<number, Record<number, [number, number, number]>> = {
  80: { 2: [2.1, 2.4, 1.9], 5: [2, 3, 2.3] },
  40: { 2: [58, 18.2, 19.3], 5: [37.5, 18.4, 18.7] },
};
/** Share of Whole Filter's bad syncs caused by false positives at 40% syncs (same source). */
const PAPER_WF_FP_SHARE: Record<number, number> = { 2: 0.92, 5: 0.61 };
const TOLERANCE = 0.25;

// ------------------------------------------------------------------ jobs

interface Job {
  id: number;
  group: string;
  config: SimConfig;
}

function seedFor(round: number, syncShare: number, load: Load, salt: number): number {
  // Same seed for every strategy and error of a cell: the operation sequence is then identical
  // (common random numbers), only the probabilistic halves differ.
  return (0x5eed + round * 1_000_003 + Math.round(syncShare * 1000) * 7 + (load === "zipf" ? 50_021 : 0) + salt * 91_019) >>> 0;
}

/** The main table's rules ("seed"), the type as implemented ("type"), the main table's rules read as the text words them ("text"). */
type TableRules = "seed" | "type" | "text";
const TABLE_PREFIX: Record<TableRules, string> = { seed: "table", type: "typeTable", text: "text" };

function tableGroup(strategy: number, share: number, error: number, load: Load, rules: TableRules = "seed"): string {
  return `${TABLE_PREFIX[rules]}|${load}|${share}|${error}|${strategy}`;
}

/**
 * A full run trimmed to fit a loaded machine: --trend-rounds N (rounds of the trends, the
 * sensitivity runs and the type's table; the main table keeps its rounds), --trend-shares a,b,...
 * (sync shares of the trends), --no-type (skip the type's table). Recorded in params.
 */
interface Trim {
  trendRounds?: number;
  trendShares?: number[];
  noType: boolean;
}

function trimFromArgs(): Trim {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const rounds = arg("--trend-rounds");
  const shares = arg("--trend-shares");
  return {
    trendRounds: rounds === undefined ? undefined : Math.max(1, Number(rounds) || 1),
    trendShares: shares === undefined ? undefined : shares.split(",").map(Number).filter((x) => x > 0 && x < 1),
    noType: process.argv.includes("--no-type"),
  };
}

function buildJobs(quick: boolean, trim: Trim): { jobs: Job[]; rounds: number; trendRounds: number; iterations: number; trendShares: number[] } {
  const rounds = quick ? 1 : 3;
  const trendRounds = Math.min(rounds, trim.trendRounds ?? rounds);
  const iterations = quick ? 5_000 : SEED_SETUP.iterations;
  const trendShares = trim.trendShares ?? (quick ? [0.2, 0.4, 0.8] : [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]);
  const jobs: Job[] = [];
  const add = (group: string, config: SimConfig) => jobs.push({ id: jobs.length, group, config });
  const base = { ...SEED_SETUP, iterations };
  for (let round = 0; round < rounds; round++) {
    for (const load of ["uniform", "zipf"] as const) {
      for (const share of [0.8, 0.4]) {
        for (const error of [2, 5]) {
          for (const strategy of STRATEGIES) {
            const same = { ...base, syncShare: share, error, strategy, load, seed: seedFor(round, share, load, 0) };
            add(tableGroup(strategy, share, error, load), same);
            // The whole table again under the text's readings (fill ratio limit, every bit into the
            // copy, a union leaving the local copy alone), every round: the earlier main table.
            add(tableGroup(strategy, share, error, load, "text"), { ...same, fillRule: "fill", shadowRule: "all", copyUnion: "local" });
            // The cited APBF as published (its transitive copy line off), Current Generation only
            // (no other strategy keeps a copy), both loads, every round.
            if (strategy === UnionStrategy.CurrentGeneration) add(`copy|local|${load}|${share}|${error}`, { ...same, copyUnion: "local" });
            if (load !== "uniform" || round >= trendRounds) continue;
            // The type as implemented (services/crdt), same operation sequence, for information.
            if (!trim.noType) add(tableGroup(strategy, share, error, load, "type"), { ...same, rules: "type" });
            // Sensitivity to the other readings, one at a time.
            add(`sens|alg3|${share}|${error}|${strategy}`, { ...same, seedJoin: "alg3" });
            add(`sens|fillRatio|${share}|${error}|${strategy}`, { ...same, fillRule: "fill" });
          }
        }
      }
    }
    // Trends (§5.3.3): Current Generation, error 2.
    if (round >= trendRounds) continue;
    const cg = { ...base, error: 2, strategy: UnionStrategy.CurrentGeneration };
    const dyns: Array<[string, Dynamicity]> = [
      ["static", { kind: "static" }],
      ["churn 0.1%", { kind: "intermediate", churn: 0.001 }],
      ["churn 1%", { kind: "intermediate", churn: 0.01 }],
      ["churn 10%", { kind: "intermediate", churn: 0.1 }],
      ["dynamic 10/80/10", { kind: "dynamic", leave: 0.1, join: 0.1 }],
    ];
    for (const share of trendShares) {
      for (const [name, dynamicity] of dyns) {
        add(`dyn|${name}|${share}`, { ...cg, syncShare: share, load: "uniform", dynamicity, seed: seedFor(round, share, "uniform", 1) });
      }
      add(`dyn|zipf churn 1%|${share}`, { ...cg, syncShare: share, load: "zipf", seed: seedFor(round, share, "zipf", 1) });
      // Fixed number of syncs (Fig 5.9): stop after SYNC_COUNT syncs; the cap leaves room for
      // the sync draws to fall short of their expectation.
      const syncCount = quick ? 500 : 2_000;
      add(`fixed|${share}`, { ...cg, syncShare: share, load: "uniform", syncCount, iterations: Math.ceil((2 * syncCount) / share), seed: seedFor(round, share, "uniform", 2) });
    }
  }
  return { jobs, rounds, trendRounds, iterations, trendShares };
}

// ------------------------------------------------------------------ pool

async function runJobs(jobs: Job[], workers: number): Promise<Map<number, SimResult>> {
  const results = new Map<number, SimResult>();
  const queue = [...jobs].sort((a, b) => cost(b.config) - cost(a.config)); // longest first
  const self = fileURLToPath(import.meta.url);
  const children: ChildProcess[] = [];
  const t0 = Date.now();
  try {
    await Promise.all(
      Array.from({ length: Math.max(1, Math.min(workers, queue.length)) }, () =>
        new Promise<void>((resolve, reject) => {
          const child = fork(self, ["--child"], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
          children.push(child);
          const next = () => {
            const job = queue.shift();
            if (job === undefined) {
              resolve();
              return;
            }
            child.send({ id: job.id, config: job.config });
          };
          child.on("message", (msg: { id: number; result?: SimResult; error?: string }) => {
            if (msg.error !== undefined) {
              reject(new Error(`job ${msg.id}: ${msg.error}`));
              return;
            }
            results.set(msg.id, msg.result!);
            if (results.size % 10 === 0 || results.size === jobs.length) {
              console.log(`  ${results.size}/${jobs.length} runs done (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
            }
            next();
          });
          child.on("error", reject);
          child.on("exit", (code) => {
            if (queue.length > 0 || code !== 0) reject(new Error(`simulation child exited with code ${code}`));
          });
          next();
        }),
      ),
    );
  } finally {
    for (const c of children) if (c.connected) c.disconnect();
  }
  return results;
}

/** Rough relative cost of a run (for scheduling only): iterations, more for lower sync shares. */
function cost(c: SimConfig): number {
  return c.iterations * (1.5 - c.syncShare) * (c.rules === "type" ? 8 : 1);
}

// ------------------------------------------------------------------ aggregation

interface Cell {
  rounds: number;
  syncs: number;
  badSyncPct: number;
  fpSyncPct: number;
  forgottenSyncPct: number;
  /** Share of bad syncs with a new classic exclusive (false-positive cause). */
  fpShareOfBad: number;
  /**
   * The false-positive share of the causes: syncs with a new classic exclusive over those plus the
   * syncs with a new probabilistic exclusive (a sync that created both counts once on each side).
   * The split the cited simulator prints (its counters of operations that grew the classic- and
   * the probabilistic-exclusive sets), and so the likely source of §5.3.2's "92% / 61% of them".
   */
  fpShareOfCauses: number;
  badSyncPctPerRound: number[];
  newInconsistencies: number;
  newOutsideSyncs: number;
  probExclusiveStatePct: number;
  classicExclusiveStatePct: number;
  meanStoreSize: number;
  meanEstimatedFp: number;
  dotRedraws: number;
  identities: number;
  iterations: number;
  seconds: number;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const round4 = (x: number) => (Number.isFinite(x) ? Number(x.toPrecision(4)) : x);

function aggregate(rs: SimResult[]): Cell {
  const bad = rs.reduce((a, r) => a + r.badSyncs, 0);
  const fp = rs.reduce((a, r) => a + r.fpSyncs, 0);
  const forgotten = rs.reduce((a, r) => a + r.forgottenSyncs, 0);
  return {
    rounds: rs.length,
    syncs: round4(mean(rs.map((r) => r.syncs))),
    badSyncPct: round4(mean(rs.map((r) => r.badSyncPct))),
    fpSyncPct: round4(mean(rs.map((r) => r.fpSyncPct))),
    forgottenSyncPct: round4(mean(rs.map((r) => r.forgottenSyncPct))),
    fpShareOfBad: round4(bad > 0 ? fp / bad : 0),
    fpShareOfCauses: round4(fp + forgotten > 0 ? fp / (fp + forgotten) : 0),
    badSyncPctPerRound: rs.map((r) => round4(r.badSyncPct)),
    newInconsistencies: round4(mean(rs.map((r) => r.newClassicExclusives + r.newProbExclusives))),
    newOutsideSyncs: rs.reduce((a, r) => a + r.newOutsideSyncs, 0),
    probExclusiveStatePct: round4(mean(rs.map((r) => r.probExclusiveStatePct))),
    classicExclusiveStatePct: round4(mean(rs.map((r) => r.classicExclusiveStatePct))),
    meanStoreSize: round4(mean(rs.map((r) => r.meanStoreSize))),
    meanEstimatedFp: round4(mean(rs.map((r) => r.meanEstimatedFp))),
    dotRedraws: rs.reduce((a, r) => a + r.dotRedraws, 0),
    identities: round4(mean(rs.map((r) => r.identities))),
    iterations: round4(mean(rs.map((r) => r.iterations))),
    seconds: round4(rs.reduce((a, r) => a + r.seconds, 0)),
  };
}

// ------------------------------------------------------------------ main

async function main(): Promise<void> {
  const quick = isQuick();
  const command = commandLine("bench:prob", quick);
  const jobsArg = process.argv.indexOf("--jobs");
  const workers = jobsArg > 0 ? Math.max(1, Number(process.argv[jobsArg + 1]) || 1) : Math.max(1, Math.min(2, os.cpus().length));
  const t0 = Date.now();
  const trim = trimFromArgs();
  const { jobs, rounds, trendRounds, iterations, trendShares } = buildJobs(quick, trim);
  console.log(`bench:prob${quick ? " --quick" : ""}: ${jobs.length} simulation runs on ${workers} processes`);
  const byId = await runJobs(jobs, workers);
  const groups = new Map<string, SimResult[]>();
  for (const j of jobs) {
    const list = groups.get(j.group) ?? [];
    list.push(byId.get(j.id)!);
    groups.set(j.group, list);
  }
  const cell = (g: string) => aggregate(groups.get(g)!);
  const typeCell = (c: Cell) => ({ badSyncPct: c.badSyncPct, fpSyncPct: c.fpSyncPct, forgottenSyncPct: c.forgottenSyncPct, fpShareOfBad: c.fpShareOfBad, probExclusiveStatePct: c.probExclusiveStatePct, dotRedraws: c.dotRedraws, seconds: c.seconds });

  // The tables.
  const table: Array<Record<string, unknown>> = [];
  // The whole table under the text's readings (what the main table held before).
  const thesisTextTable: Array<Record<string, unknown>> = [];
  for (const load of ["uniform", "zipf"] as const) {
    for (const share of [0.8, 0.4]) {
      for (const error of [2, 5]) {
        for (const strategy of STRATEGIES) {
          const pct = Math.round(share * 100);
          table.push({
            load, syncSharePct: pct, error, strategy: strategyName(strategy),
            paperBadSyncPct: load === "uniform" ? PAPER[pct]![error]![strategy] : null,
            ...cell(tableGroup(strategy, share, error, load)),
            typeAsImplemented: load === "uniform" && !trim.noType ? typeCell(cell(tableGroup(strategy, share, error, load, "type"))) : null,
          });
          const t = cell(tableGroup(strategy, share, error, load, "text"));
          thesisTextTable.push({
            load, syncSharePct: pct, error, strategy: strategyName(strategy),
            paperBadSyncPct: load === "uniform" ? PAPER[pct]![error]![strategy] : null,
            badSyncPct: t.badSyncPct, badSyncPctPerRound: t.badSyncPctPerRound, fpShareOfBad: t.fpShareOfBad, fpShareOfCauses: t.fpShareOfCauses, probExclusiveStatePct: t.probExclusiveStatePct,
          });
        }
      }
    }
  }
  const rowOf = (t: Array<Record<string, unknown>>, load: Load, pct: number, error: number, strategy: number) =>
    t.find((r) => r.load === load && r.syncSharePct === pct && r.error === error && r.strategy === strategyName(strategy as UnionStrategy)) as unknown as Cell & { paperBadSyncPct: number | null };
  const row = (load: Load, pct: number, error: number, strategy: number) => rowOf(table, load, pct, error, strategy);

  // Trends.
  const dynNames = ["static", "churn 0.1%", "churn 1%", "churn 10%", "dynamic 10/80/10", "zipf churn 1%"];
  const trends = {
    note: "Current Generation, error 2, capacity 4096, level 5; uniform load unless named; paper values are plot-only (seed Figs 5.7-5.11), trends only",
    syncSharesPct: trendShares.map((s) => Math.round(s * 100)),
    byDynamicity: Object.fromEntries(dynNames.map((n) => [n, trendShares.map((s) => ({ syncSharePct: Math.round(s * 100), ...cell(`dyn|${n}|${s}`) }))])),
    fixedSyncCount: { syncs: quick ? 500 : 2_000, points: trendShares.map((s) => ({ syncSharePct: Math.round(s * 100), ...cell(`fixed|${s}`) })) },
  };

  // Sensitivity (uniform table, seed rules with one reading changed).
  const sensitivity = {
    note: "% of syncs creating new inconsistencies, uniform load, the main table's rules with one reading changed: join step (a) testing d ∉ m' first (Alg. 3) instead of the cited simulator's tombstone method; the fill check against the fill ratio of §4.5.2 instead of the cited APBF's insertion-count limit",
    rows: [0.8, 0.4].flatMap((share) => [2, 5].flatMap((error) => STRATEGIES.map((strategy) => ({
      syncSharePct: Math.round(share * 100), error, strategy: strategyName(strategy),
      main: cell(tableGroup(strategy, share, error, "uniform")).badSyncPct,
      alg3Join: cell(`sens|alg3|${share}|${error}|${strategy}`).badSyncPct,
      fillRatioLimit: cell(`sens|fillRatio|${share}|${error}|${strategy}`).badSyncPct,
    })))),
  };

  // The current-generation copy: the main table's reading against the cited APBF as published and
  // the text's reading (Current Generation, both loads, every round).
  const copySensitivity = {
    note: "Current Generation under three readings of its current-generation copy (prob-seed-rules.ts ShadowRule, CopyUnionRule): main = an insertion writes the bits it newly sets, a union passes the remote's copy on (the cited APBF with its transitive line on); publishedCode = the same without passing on (the cited APBF as published, the line commented out); thesisText = an insertion writes every bit it maps to, a union leaves the local copy alone, with the fill-ratio limit (the text's wording; metrics.thesisTextTable); same operation sequences and rounds as the table; whole filter and active slices keep no copy and are taken from the same rules' table for the ranking",
    rows: (["uniform", "zipf"] as const).flatMap((load) => [0.8, 0.4].flatMap((share) => [2, 5].map((error) => {
      const pct = Math.round(share * 100);
      const published = cell(`copy|local|${load}|${share}|${error}`);
      const text = (s: number) => rowOf(thesisTextTable, load, pct, error, s);
      const main = row(load, pct, error, UnionStrategy.CurrentGeneration);
      const wf = row(load, pct, error, UnionStrategy.WholeFilter).badSyncPct;
      const as = row(load, pct, error, UnionStrategy.ActiveSlices).badSyncPct;
      return {
        load, syncSharePct: pct, error,
        paperBadSyncPct: load === "uniform" ? PAPER[pct]![error]![UnionStrategy.CurrentGeneration] : null,
        main: main.badSyncPct,
        mainProbExclusiveStatePct: main.probExclusiveStatePct,
        mainFewest: main.badSyncPct <= Math.min(wf, as),
        publishedCode: published.badSyncPct,
        publishedCodePerRound: published.badSyncPctPerRound,
        publishedCodeProbExclusiveStatePct: published.probExclusiveStatePct,
        publishedCodeFewest: published.badSyncPct <= Math.min(wf, as),
        thesisText: text(UnionStrategy.CurrentGeneration).badSyncPct,
        thesisTextPerRound: text(UnionStrategy.CurrentGeneration).badSyncPctPerRound,
        thesisTextFewest: text(UnionStrategy.CurrentGeneration).badSyncPct <= Math.min(text(UnionStrategy.WholeFilter).badSyncPct, text(UnionStrategy.ActiveSlices).badSyncPct),
        wholeFilter: wf,
        activeSlices: as,
      };
    }))),
  };

  // Memory.
  const memory = memoryFigures();

  // Targets.
  const targets: Target[] = [];
  const within = (paper: number) => (m: number) => Math.abs(m - paper) <= TOLERANCE * paper;
  const band = (paper: number) => `${paper} ±25% (${(paper * (1 - TOLERANCE)).toPrecision(3)}–${(paper * (1 + TOLERANCE)).toPrecision(3)})`;
  for (const pct of [80, 40]) {
    for (const error of [2, 5]) {
      for (const strategy of STRATEGIES) {
        const r = row("uniform", pct, error, strategy);
        const paper = PAPER[pct]![error]![strategy]!;
        targets.push(target(`uniform, ${pct}% syncs, error ${error}, ${LABEL[strategy]}: % of syncs creating new inconsistencies`, `${band(paper)} % (paper)`, r.badSyncPct, within(paper), command));
      }
    }
  }
  for (const error of [2, 5]) {
    const r = row("uniform", 40, error, UnionStrategy.WholeFilter);
    const paper = PAPER_WF_FP_SHARE[error]!;
    // Read as the cited simulator splits causes (Cell.fpShareOfCauses); fpShareOfBad beside it in the table.
    targets.push(target(`uniform, 40% syncs, error ${error}, Whole Filter: false positives' share of the causes of bad syncs (syncs with a new classic exclusive / those + syncs with a new probabilistic exclusive)`, band(paper), r.fpShareOfCauses, within(paper), command));
  }
  for (const error of [2, 5]) {
    for (const strategy of [UnionStrategy.ActiveSlices, UnionStrategy.CurrentGeneration]) {
      const r = row("uniform", 40, error, strategy);
      targets.push(target(`uniform, 40% syncs, error ${error}, ${LABEL[strategy]}: probabilistic-exclusive entries, % of store (mean of probes)`, "< 1 % (seed §5.3.2)", r.probExclusiveStatePct, (m) => m < 1, command));
    }
  }
  for (const pct of [80, 40]) {
    for (const error of [2, 5]) {
      const cg = row("zipf", pct, error, UnionStrategy.CurrentGeneration).badSyncPct;
      const others = [row("zipf", pct, error, UnionStrategy.WholeFilter).badSyncPct, row("zipf", pct, error, UnionStrategy.ActiveSlices).badSyncPct];
      targets.push(target(`Zipf 1.03, ${pct}% syncs, error ${error}: Current Generation has the fewest bad syncs`, "true (seed Figs 5.5/5.6, plot only)", cg <= Math.min(...others), (m) => m === true, command));
    }
  }
  const expectedBytes: Record<string, number> = {
    "error 2, capacity 4096, level 5, Current Generation": 11_648,
    "error 3, capacity 4096, level 5, no shadows": 13_528,
    "error 5, capacity 4096, level 5, no shadows": 20_592,
  };
  for (const c of memory.configs) {
    const exp = expectedBytes[c.name];
    if (exp === undefined) continue;
    targets.push(target(`APBF bytes, ${c.name} (measured allocation)`, `= ${exp} B (seed §5.3.2)`, c.measuredBytes, (m) => m === exp && c.formulaBytes === exp, command));
  }
  const x4096 = memory.crossovers.find((c) => c.capacity === 4096)!;
  const x2048 = memory.crossovers.find((c) => c.capacity === 2048)!;
  targets.push(target("crossover vs vector of u64 counters, capacity 4096 (replica ids)", "about 1,400 (seed: >1,400) ±25%", x4096.vectorCrossover, (m) => m !== null && within(1400)(m) && m >= 1400, command));
  targets.push(target("crossover vs UUID→u64 hash map, capacity 4096 (replica ids)", "about 250 ±25%", x4096.mapCrossover, (m) => m !== null && within(250)(m), command));
  targets.push(target("crossover vs vector of u64 counters, capacity 2048 (replica ids)", "about 750 ±25%", x2048.vectorCrossover, (m) => m !== null && within(750)(m), command));
  targets.push(target("crossover vs UUID→u64 hash map, capacity 2048 (replica ids)", "about 125 ±25%", x2048.mapCrossover, (m) => m !== null && within(125)(m), command));
  const outside = table.reduce((a, r) => a + (r.newOutsideSyncs as number), 0);
  targets.push(target("new inconsistencies created by adds or removes (seed: only syncs create them)", "= 0", outside, (m) => m === 0, command));

  const wallSeconds = Math.round((Date.now() - t0) / 1000);
  const results = {
    params: {
      quick,
      quickNote: quick ? "smoke run: 5 000 iterations, 1 round, trends at 20/40/80% syncs and 500 fixed syncs; not comparable with the paper; not written to docs/results" : undefined,
      replicas: SEED_SETUP.replicas,
      iterations,
      rounds,
      trendRounds,
      trimmed: trim.trendRounds !== undefined || trim.trendShares !== undefined || trim.noType
        ? `trimmed full run (the machine was shared and loaded): main table ${rounds} rounds; trends, sensitivity${trim.noType ? "" : " and the type's table"} ${trendRounds} round(s); trend sync shares ${trendShares.map((x) => Math.round(x * 100)).join("/")}%${trim.noType ? "; the type as implemented not run (its table: git history of this file, the previous full run)" : ""}`
        : undefined,
      topology: "complete graph, full-state unidirectional pull (origin joins a uniformly drawn other active replica)",
      dynamicity: "intermediate, churn 1% per iteration (a uniformly drawn replica leaves for good, a new empty replica with a new identity takes its place)",
      loads: ["uniform", "zipf 1.03 (over the positions of the active list; a replica that joins takes a uniformly drawn position)"],
      syncSharesPct: [80, 40],
      opMix: "each iteration one operation, drawn by weight: sync X%, add and remove (100-X)/2% each; a remove on an empty set and a sync with fewer than 2 replicas fail (the iteration ends)",
      apbf: { capacity: SEED_SETUP.capacity, level: SEED_SETUP.level, errors: [2, 5], strategies: STRATEGIES.map((s) => strategyName(s)) },
      removeFrom: SEED_SETUP.removeFrom,
      values: "random 64-bit values (a new value per add, so adds retire no dots); probabilistic dots random 64-bit, used as drawn",
      probeEvery: SEED_SETUP.probeEvery,
      metric: "% of syncs after which the origin has a value in its classic-exclusive (false positive) or probabilistic-exclusive (forgotten dot) set that was not in that set after its previous operation; per round, then the mean over rounds",
      tolerance: "±25% relative to the paper's figure",
      paperSource: SOURCE,
      rules: "seed: the probabilistic half follows the thesis and, where the text leaves a rule open, the simulator and APBF it cites (test/bench/prob-seed-rules.ts): generations driven by fill (after every insert and union the active slices are checked and the filter shifts until each respects its limit, §4.5.2; the limit read as the cited APBF reads it, set bits against the insertion count ln(1-(i+1)/2k)/ln(1-1/m)); Whole Filter ORs every slot, Active Slices the k active slices, Current Generation the remote's current-generation copy into the local active slices; an insertion writes the bits it newly sets into the copy and a union passes the remote's copy on into the local copy (the cited APBF's code, with its line for transitive propagations on: the one reading of the copy that reproduces the thesis' Current Generation figures, metrics.sensitivity.currentGenerationCopy); no special case for an empty local filter; join by the tombstone method (§4.5.3): a local dot the remote's tombstones report is dropped and inserted into the local tombstones, a remote dot the local store lacks is adopted unless the local tombstones report it, then the filters are unioned. metrics.thesisTextTable repeats the table under the text's wording (fill-ratio limit, every bit into the copy, no passing on)",
      implementation: "test/bench/prob-seed-rules.ts on the filter of services/crdt/apbf.ts (layout, hashing, query, shift); shadow services/crdt/awset.ts. typeAsImplemented: services/crdt/awset-prob-state.ts (AWSetProb.joinInPlace), apbf.ts, apbf-union.ts, same operation sequences",
      readingsWhereTheThesisIsSilent: [
        "join step (a) drops a local dot the remote's tombstones report even when the remote store holds it live, as the cited simulator does; Alg. 3 (§4.4.2) first tests d ∉ m' (metrics.sensitivity.alg3Join)",
        "fill limit: the cited APBF compares set bits with the insertion count ln(1-(i+1)/2k)/ln(1-1/m); §4.5.2 states a fill ratio, m(i+1)/2k set bits, tighter for i > 0 (metrics.sensitivity.fillRatioLimit)",
        "a remove draws its value from the exact half (the cited simulator); §5.2.2 says the probabilistic one",
        "Current Generation, what an insertion writes into the current-generation copy: the bits it newly sets in the slice (the cited APBF's code), so a bit an older generation or a union already set is not passed on by it; §4.5.2 ('insertions affect both the slice itself and the respective current generation slice') can be read as every bit the item maps to (metrics.sensitivity.currentGenerationCopy thesisText)",
        "Current Generation, whether a union also writes the remote's copy into the local copy: yes, as the cited APBF's line marked experimental 'for transitive propagations' does (commented out in its published version: metrics.sensitivity.currentGenerationCopy publishedCode); the text never says a union touches the copy. Chosen because it is the one combination of the two copy readings that reproduces the thesis' Current Generation figures at both sync shares and both errors; the runs cannot tell whether the thesis' runs had the line on",
        "Zipf ranks: positions of the active list; a new replica takes a uniformly drawn position (the cited simulator ranks a hash set of ids, where a new id lands at a hash-determined place)",
      ],
      knownDifferences: [
        "hashing: element-hash.ts hash32 per slice hash index (the thesis: t1ha)",
        "the exclusive-share probe averages over all active replicas every 100 iterations, as §5.3.2 words it ('for all replicas'); the cited simulator samples the origin only",
        "the type as implemented (typeAsImplemented, uniform table only) differs from the seed's rules on purpose: it keeps a dot both stores hold, adopts a remote filter whole into an empty one, writes every bit of an insertion into the current-generation copy (and ORs a union into it), shifts after g = floor(m ln2/k) insertions and redraws a dot the local filter reports; it forgets less and loses fewer adds to false positives, so its rates are lower",
      ],
      remainingMisses: REMAINING_MISSES,
      workers,
    },
    metrics: { table, thesisTextTable, sensitivity: { ...sensitivity, currentGenerationCopy: copySensitivity }, trends, memory, wallSeconds },
    targets,
  };

  const outDir = quick ? join(os.tmpdir(), "deltaset-prob-quick") : resultsDir;
  mkdirSync(outDir, { recursive: true });
  const jsonPath = writeResultFile(join(outDir, "prob.json"), results);
  const svgs = await drawCharts(outDir, table, trends, memory, quick);

  // Console summary.
  console.log("\n% of syncs creating new inconsistencies (FP-caused / forgotten-caused), mean of rounds; paper in []");
  for (const load of ["uniform", "zipf"] as const) {
    for (const pct of [80, 40]) {
      for (const error of [2, 5]) {
        const cells = STRATEGIES.map((s) => {
          const r = row(load, pct, error, s);
          return `${LABEL[s]} ${r.badSyncPct.toFixed(2)} (${r.fpSyncPct.toFixed(2)}/${r.forgottenSyncPct.toFixed(2)})${r.paperBadSyncPct === null ? "" : ` [${r.paperBadSyncPct}]`}`;
        });
        console.log(`  ${load.padEnd(7)} ${pct}% e${error}: ${cells.join("  ")}`);
      }
    }
  }
  printTargets(targets);
  console.log(`wall time ${wallSeconds} s`);
  console.log(`wrote ${[jsonPath, ...svgs].map((p) => (quick ? p : relative(repoRoot, p))).join(", ")}`);
}

// ------------------------------------------------------------------ charts

async function drawCharts(
  dir: string,
  table: Array<Record<string, unknown>>,
  trends: { byDynamicity: Record<string, Array<Cell & { syncSharePct: number }>>; fixedSyncCount: { syncs: number; points: Array<Cell & { syncSharePct: number }> } },
  memory: ReturnType<typeof memoryFigures>,
  quick: boolean,
): Promise<string[]> {
  const suffix = quick ? " (QUICK smoke run)" : "";
  const rows = table as unknown as Array<Cell & { load: string; syncSharePct: number; error: number; strategy: string; paperBadSyncPct: number | null; typeAsImplemented: { badSyncPct: number } | null }>;
  const names = STRATEGIES.map((s) => LABEL[s]!);
  const pick = (load: string, pct: number, error: number) => STRATEGIES.map((s) => rows.find((r) => r.load === load && r.syncSharePct === pct && r.error === error && r.strategy === strategyName(s))!);
  const tableCharts = [];
  for (const load of ["uniform", "zipf"]) {
    for (const pct of [80, 40]) {
      for (const error of [2, 5]) {
        const cells = pick(load, pct, error);
        const series = [{ name: "measured (seed rules)", values: cells.map((c) => c.badSyncPct) }];
        if (load === "uniform") {
          series.push({ name: "paper (Figs 5.3/5.4)", values: cells.map((c) => c.paperBadSyncPct) as number[] });
          if (cells.every((c) => c.typeAsImplemented !== null)) series.push({ name: "type as implemented", values: cells.map((c) => c.typeAsImplemented!.badSyncPct) });
        }
        tableCharts.push(barChart({ title: `${load === "uniform" ? "Uniform" : "Zipf 1.03"}, ${pct}% syncs, error ${error}`, categories: names, series, yLabel: "% of syncs with new inconsistencies", width: 360, height: 220 }));
      }
    }
  }
  const causeCats: string[] = [];
  const fpVals: number[] = [];
  const fgVals: number[] = [];
  for (const pct of [80, 40]) {
    for (const error of [2, 5]) {
      for (const c of pick("uniform", pct, error)) {
        causeCats.push(`${c.strategy.replace(/[a-z]/g, "")} ${pct}% e${error}`);
        fpVals.push(c.fpSyncPct);
        fgVals.push(c.forgottenSyncPct);
      }
    }
  }
  const causes = barChart({
    title: `Causes, uniform load: % of syncs creating a new classic exclusive (false positive) or probabilistic exclusive (forgotten dot)${suffix}`,
    categories: causeCats,
    series: [{ name: "false positive", values: fpVals }, { name: "forgotten dot", values: fgVals }],
    yLabel: "% of syncs",
    width: 900,
  });
  const ns = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
  const apbf = (cap: number) => memory.crossovers.find((c) => c.capacity === cap)!.apbfBytes;
  const mem = lineChart({
    title: `Causal context bytes vs replica ids (APBF error 2, level 5, Current Generation)${suffix}`,
    xLabel: "replica ids (log)",
    yLabel: "bytes (log)",
    logX: true,
    logY: true,
    series: [
      { name: "APBF capacity 4096", points: ns.map((n) => [n, apbf(4096)]) },
      { name: "APBF capacity 2048", points: ns.map((n) => [n, apbf(2048)]) },
      { name: "vector of u64", points: ns.map((n) => [n, vectorBytes(n)]) },
      { name: "map UUID→u64 (hashbrown)", points: ns.map((n) => [n, mapBytes(n)]) },
    ],
  });
  const line = (title: string, names: string[], y: (c: Cell) => number, yLabel: string) =>
    lineChart({
      title: title + suffix,
      xLabel: "sync share (%)",
      yLabel,
      series: names.map((n) => ({ name: n, points: trends.byDynamicity[n]!.map((p) => [p.syncSharePct, y(p)] as [number, number]) })),
      width: 420,
    });
  const trendCharts = [
    line("Dynamicity (Fig 5.7)", ["static", "churn 1%", "dynamic 10/80/10"], (c) => c.badSyncPct, "% of syncs with new inconsistencies"),
    line("Churn rate (Fig 5.8)", ["static", "churn 0.1%", "churn 1%", "churn 10%"], (c) => c.badSyncPct, "% of syncs with new inconsistencies"),
    lineChart({
      title: `Fixed number of syncs, ${trends.fixedSyncCount.syncs} (Fig 5.9)${suffix}`,
      xLabel: "sync share (%)",
      yLabel: "% of syncs with new inconsistencies",
      series: [{ name: "churn 1%, uniform", points: trends.fixedSyncCount.points.map((p) => [p.syncSharePct, p.badSyncPct]) }],
      width: 420,
    }),
    line("Load, churn 1% (Fig 5.10)", ["churn 1%", "zipf churn 1%"], (c) => c.badSyncPct, "% of syncs with new inconsistencies"),
    line("Load, churn 1%: total new inconsistencies (Fig 5.11)", ["churn 1%", "zipf churn 1%"], (c) => c.newInconsistencies, "new inconsistent values per run"),
    line("Mean store size", ["static", "churn 1%", "churn 10%", "dynamic 10/80/10"], (c) => c.meanStoreSize, "values per replica"),
  ];
  const files: Array<[string, Record<string, unknown>]> = [
    ["prob-table.svg", panels(tableCharts, { columns: 2, title: `% of syncs creating new inconsistencies: 16 replicas, churn 1%, capacity 4096, level 5${suffix}` })],
    ["prob-causes.svg", causes],
    ["prob-memory.svg", mem],
    ["prob-trends.svg", panels(trendCharts, { columns: 2, title: `Network trends, Current Generation, error 2${suffix}` })],
  ];
  const out: string[] = [];
  for (const [name, chart] of files) {
    const p = join(dir, name);
    writeFileSync(p, await renderSvg(chart));
    out.push(p);
  }
  return out;
}

// ------------------------------------------------------------------ entry (child mode: run the configurations the parent sends)

if (process.argv.includes("--child")) {
  process.on("message", (msg: { id: number; config: SimConfig }) => {
    try {
      process.send!({ id: msg.id, result: runSim(msg.config) });
    } catch (e) {
      process.send!({ id: msg.id, error: String(e instanceof Error ? e.stack : e) });
    }
  });
  process.on("disconnect", () => process.exit(0));
} else {
  await main();
}
