// npm run bench:sync [-- --quick]
// Sync benchmark. Part 1 (this file, for now): the simulated replay of the Enes et al.
// (ICDE 2019) micro-benchmark, see sync-sim.ts. Writes docs/results/sync.json and sync.svg.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { PROTOCOLS, type SyncSimResult, runSyncSim, syncSimTargets } from "./sync-sim.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const quick = process.argv.includes("--quick");
const command = `npm run bench:sync${quick ? " -- --quick" : ""}`;

/** Published ratios to state-based sync (Enes et al., recomputed in shared/notes/anchors.md section 8). */
const PUBLISHED = {
  source: "Enes, Almeida, Baquero, Leitao, ICDE 2019; vitorenesduarte/exp evaluation/icde19.tar.gz (GSet, 15 nodes)",
  partialmesh: { delta: 0.975, "delta+bp": 0.962, "delta+rr": 0.025, "delta+bp+rr": 0.021 },
  tree: { delta: 0.986, "delta+bp": 0.015, "delta+rr": 0.026, "delta+bp+rr": 0.015 },
};

function main(): void {
  const sim = runSyncSim({ quick });
  const report = {
    machine: { cpus: cpus().length, memory: totalmem(), node: process.version },
    params: { quick, simulated: sim.params },
    metrics: {
      simulated: { ratios: sim.ratios, runs: sim.runs, published: PUBLISHED },
    },
    targets: syncSimTargets(sim, command),
  };
  const out = join(root, "docs", "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "sync.json"), JSON.stringify(report, null, 2) + "\n");
  writeFileSync(join(out, "sync.svg"), ratioChart(sim));
  for (const r of sim.runs) {
    console.log(
      `${r.overlay.padEnd(11)} ${r.protocol.padEnd(12)} ${String(r.bytes.total).padStart(11)} B ` +
        `ratio ${(sim.ratios[r.overlay]?.[r.protocol] ?? NaN).toFixed(4)}  lag p50/p99 ${r.lag.p50}/${r.lag.p99} periods`,
    );
  }
  for (const t of report.targets) console.log(`${t.met ? "MET " : "MISS"} ${t.name}: ${t.measured} (target ${t.target})`);
  console.log(`wrote docs/results/sync.json and docs/results/sync.svg`);
}

/** Grouped bars, log scale: bytes sent relative to state-based sync, per overlay and protocol. */
function ratioChart(sim: SyncSimResult): string {
  const overlays = Object.keys(sim.ratios);
  const W = 760;
  const H = 380;
  const left = 70;
  const top = 50;
  const plotW = W - left - 30;
  const plotH = H - top - 80;
  const lo = Math.log10(0.005);
  const hi = Math.log10(2);
  const y = (v: number) => top + plotH - ((Math.log10(Math.max(v, 0.005)) - lo) / (hi - lo)) * plotH;
  const colors = ["#555555", "#d95f02", "#e6ab02", "#7570b3", "#1b9e77"];
  const groupW = plotW / Math.max(overlays.length, 1);
  const barW = (groupW * 0.8) / PROTOCOLS.length;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">Bytes sent relative to full-state sync (simulated, 15 nodes, ${sim.params.updatePeriods} updates/node)</text>`,
  );
  for (const v of [0.01, 0.05, 0.1, 0.5, 1]) {
    parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    parts.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v}</text>`);
  }
  parts.push(`<line x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}" stroke="#333"/>`);
  parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${top + plotH}" y2="${top + plotH}" stroke="#333"/>`);
  overlays.forEach((overlay, g) => {
    const x0 = left + g * groupW + groupW * 0.1;
    PROTOCOLS.forEach((p, i) => {
      const v = sim.ratios[overlay]![p];
      if (v === undefined) return;
      const x = x0 + i * barW;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y(v).toFixed(1)}" width="${(barW - 4).toFixed(1)}" height="${(top + plotH - y(v)).toFixed(1)}" fill="${colors[i]}"/>`,
      );
      parts.push(`<text x="${(x + barW / 2 - 2).toFixed(1)}" y="${(y(v) - 4).toFixed(1)}" text-anchor="middle" font-size="10">${v.toFixed(3)}</text>`);
    });
    parts.push(`<text x="${x0 + (groupW * 0.8) / 2}" y="${top + plotH + 18}" text-anchor="middle">${overlay}</text>`);
  });
  PROTOCOLS.forEach((p, i) => {
    const x = left + i * 130;
    parts.push(`<rect x="${x}" y="${H - 30}" width="12" height="12" fill="${colors[i]}"/>`);
    parts.push(`<text x="${x + 16}" y="${H - 20}">${p === "state" ? "full state" : p}</text>`);
  });
  parts.push(`<text transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle">ratio (log scale)</text>`);
  parts.push("</svg>");
  return parts.join("\n") + "\n";
}

main();
