// npm run bench:sync [-- --quick]
// Sync benchmark. Part 1 (this file, for now): the simulated replay of the Enes et al.
// (ICDE 2019) micro-benchmark, see sync-sim.ts. Writes docs/results/sync.json and sync.svg.
import { commandLine, isQuick, printTargets, writeChart, writeResults } from "./lib/results.js";
import { barChart, panels } from "./lib/svg-plot.js";
import { PROTOCOLS, type SyncSimResult, runSyncSim, syncSimTargets } from "./sync-sim.js";

/** Published ratios to state-based sync (Enes et al., recomputed in shared/notes/anchors.md section 8). */
const PUBLISHED = {
  source: "Enes, Almeida, Baquero, Leitao, ICDE 2019; vitorenesduarte/exp evaluation/icde19.tar.gz (GSet, 15 nodes)",
  partialmesh: { delta: 0.975, "delta+bp": 0.962, "delta+rr": 0.025, "delta+bp+rr": 0.021 },
  tree: { delta: 0.986, "delta+bp": 0.015, "delta+rr": 0.026, "delta+bp+rr": 0.015 },
};

function main(): void {
  const quick = isQuick();
  const command = commandLine("bench:sync", quick);
  const sim = runSyncSim({ quick });
  const targets = syncSimTargets(sim, command);
  writeResults("sync", {
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
    },
    targets,
  });
  writeChart("sync", chart(sim));
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

function chart(sim: SyncSimResult) {
  const overlays = Object.keys(sim.ratios);
  const label = (p: string) => (p === "state" ? "full state" : p);
  const byProtocol = (value: (overlay: string, protocol: string) => number | undefined) =>
    PROTOCOLS.map((p) => ({ name: label(p), values: overlays.map((o) => value(o, p) ?? null) }));
  const ratio = barChart({
    title: "Bytes sent relative to full-state sync",
    categories: overlays,
    series: byProtocol((o, p) => sim.ratios[o]?.[p]),
    yLabel: "ratio (log)",
    logY: true,
  });
  const perUpdate = barChart({
    title: "Bytes sent per update",
    categories: overlays,
    series: byProtocol((o, p) => sim.runs.find((r) => r.overlay === o && r.protocol === p)?.bytesPerUpdate),
    yLabel: "bytes (log)",
    logY: true,
  });
  return panels([ratio, perUpdate], {
    columns: 2,
    title: `Simulated sync, 15 nodes, ${sim.params.updatePeriods} updates/node (Enes et al. ICDE 2019 setup)`,
  });
}

main();
