// npm run plots [-- FILE.json ...]
// Redraws the SVG chart of every result file that has one (docs/results/*.json and
// docs/results/chaos/*.json, or the files given) from the JSON alone: no measurement is repeated.
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { chartOf, drawChart } from "./charts/draw.js";
import { repoRoot, resultsDir } from "./lib/results.js";

function committedResults(): string[] {
  const dirs = [resultsDir, join(resultsDir, "chaos")];
  return dirs.flatMap((d) => readdirSync(d).filter((f) => f.endsWith(".json")).sort().map((f) => join(d, f)));
}

const args = process.argv.slice(2);
const files = args.length > 0 ? args : committedResults();
for (const f of files) {
  if (chartOf(f) === undefined) {
    console.log(`skip ${relative(repoRoot, f)} (no chart)`);
    continue;
  }
  console.log(`drew ${relative(repoRoot, await drawChart(f))}`);
}
