// npm run bench:sync [-- --quick]
// Sync benchmark, both halves in one run: the simulated replay of the Enes et al. (ICDE 2019)
// micro-benchmark (sync-sim.ts) and a real 3-node cluster of node processes (sync-real.ts).
// Writes docs/results/sync.json and sync.svg.
import { drawChart } from "./charts/draw.js";
import { commandLine, isQuick, printTargets, writeResults } from "./lib/results.js";
import { runSyncSim, syncSimTargets } from "./sync-sim.js";
import { runRealClusterSync } from "./sync-real.js";
import { target } from "./lib/results.js";

/** Published ratios to state-based sync (Enes et al., recomputed in shared/notes/anchors.md section 8). */
const PUBLISHED = {
  source: "Enes, Almeida, Baquero, Leitao, ICDE 2019; vitorenesduarte/exp evaluation/icde19.tar.gz (GSet, 15 nodes)",
  partialmesh: { delta: 0.975, "delta+bp": 0.962, "delta+rr": 0.025, "delta+bp+rr": 0.021 },
  tree: { delta: 0.986, "delta+bp": 0.015, "delta+rr": 0.026, "delta+bp+rr": 0.015 },
};

async function main(): Promise<void> {
  const quick = isQuick();
  const command = commandLine("bench:sync", quick);
  const sim = await runSyncSim({ quick });
  const real = await runRealClusterSync({ quick });
  const targets = [
    ...syncSimTargets(sim, command),
    target(
      `real 3-node cluster, ${real.params.rounds} rounds: bytes of delta+BP+RR relative to full-state sync`,
      "<= 0.05",
      real.ratios["delta+bp+rr"]!,
      (m) => m <= 0.05,
      command,
    ),
  ];
  const path = writeResults("sync", {
    params: { quick, simulated: sim.params },
    metrics: {
      simulated: {
        ratios: sim.ratios,
        outOfStepTree:
          sim.outOfStep === undefined
            ? undefined
            : { maxDelayPeriods: sim.outOfStep.maxDelayPeriods, deltaVsState: sim.outOfStep.ratio, runs: [sim.outOfStep.state, sim.outOfStep.delta] },
        runs: sim.runs,
        published: PUBLISHED,
      },
      real,
    },
    targets,
  });
  await drawChart(path);
  for (const r of real.runs) {
    console.log(`real 3 nodes ${r.protocol.padEnd(12)} ${String(r.bytes.total).padStart(11)} B ratio ${real.ratios[r.protocol]!.toFixed(4)}  lag p50/p99 ${r.lagMs.p50.toFixed(0)}/${r.lagMs.p99.toFixed(0)} ms`);
  }
  for (const r of sim.runs) {
    console.log(
      `${r.overlay.padEnd(11)} ${r.protocol.padEnd(12)} ${String(r.bytes.total).padStart(11)} B ` +
        `ratio ${(sim.ratios[r.overlay]?.[r.protocol] ?? NaN).toFixed(4)}  lag p50/p99 ${r.lag.p50}/${r.lag.p99} periods`,
    );
  }
  if (sim.outOfStep !== undefined) {
    console.log(`tree, messages delayed 0-${sim.outOfStep.maxDelayPeriods} periods: classic delta / state = ${sim.outOfStep.ratio.toFixed(4)}`);
  }
  printTargets(targets);
  console.log("wrote docs/results/sync.json and docs/results/sync.svg");
}

await main();
