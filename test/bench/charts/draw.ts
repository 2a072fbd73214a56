// Draws the SVG chart of a result file next to it (x.json → x.svg), choosing the chart by the
// file's name. The benchmarks call it on the file they have just written, and `npm run plots`
// on the committed files, so a chart always shows exactly what its JSON holds.
import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import type { ChartSpec } from "../lib/plot.js";
import { renderSvg } from "../lib/plot.js";
import type { ResultDoc } from "../lib/results.js";
import { addStreamRoutingChart } from "./add-stream-routing.js";
import { catchUpChart } from "./catch-up.js";
import { chaosRunChart } from "./chaos-run.js";
import { chaosSummaryChart } from "./chaos-summary.js";
import { countersChart } from "./counters.js";
import { crashLoopChart } from "./crash-loop.js";
import { filtersClusterChart } from "./filters-cluster.js";
import { filterWritesChart } from "./filter-writes.js";
import { crdtChart } from "./crdt.js";
import { evalChart } from "./eval.js";
import { evalTypesChart } from "./eval-types.js";
import { gossipTransportChart } from "./gossip-transport.js";
import { http2GcChart } from "./http2-gc.js";
import { scaleChart } from "./scale.js";
import { membershipChart } from "./membership.js";
import { probClusterChart } from "./prob-cluster.js";
import { probSettleChart } from "./prob-settle.js";
import { replicaChart } from "./replica.js";
import { syncChart } from "./sync.js";
import { writeCopiesChart } from "./write-copies.js";

const BY_NAME: Record<string, (doc: ResultDoc) => ChartSpec> = {
  "crdt.json": crdtChart,
  "replica.json": replicaChart,
  "sync.json": syncChart,
  "membership.json": membershipChart,
  "crash-loop.json": crashLoopChart,
  "summary.json": chaosSummaryChart,
  "eval.json": evalChart,
  "eval-types.json": evalTypesChart,
  "scale.json": scaleChart,
  "counters.json": countersChart,
  "filters-cluster.json": filtersClusterChart,
  "filter-writes.json": filterWritesChart,
  "prob-cluster.json": probClusterChart,
  "prob-settle.json": probSettleChart,
  "gossip-transport.json": gossipTransportChart,
  "add-stream-routing.json": addStreamRoutingChart,
  "catch-up.json": catchUpChart,
  "http2-gc.json": http2GcChart,
  "write-copies.json": writeCopiesChart,
};

/** A chaos run's file: <scenario>-<nodes>n.json. */
const CHAOS_RUN = /^[a-z0-9-]+-\d+n\.json$/;

/** The chart for a result file, or undefined for files that have none (e.g. fuzz.json). */
export function chartOf(path: string): ((doc: ResultDoc) => ChartSpec) | undefined {
  const name = basename(path);
  return BY_NAME[name] ?? (CHAOS_RUN.test(name) ? chaosRunChart : undefined);
}

/** Read `path` (a .json result file), draw its chart and write it beside it; returns the SVG path. */
export async function drawChart(path: string): Promise<string> {
  const chart = chartOf(path);
  if (chart === undefined) throw new Error(`no chart is defined for ${basename(path)}`);
  const doc = JSON.parse(readFileSync(path, "utf8")) as ResultDoc;
  const svgPath = path.replace(/\.json$/, ".svg");
  writeFileSync(svgPath, await renderSvg(chart(doc)));
  return svgPath;
}
