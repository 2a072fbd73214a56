// The benchmark charts: Vega-Lite specifications rendered offline to SVG with title, axes, legend
// and marks; log axes ticked at powers of ten; no URL is ever loaded; and every committed result
// file with a chart still draws from its JSON alone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chartOf } from "../bench/charts/draw.ts";
import { barChart, lineChart, panels, renderSvg } from "../bench/lib/plot.ts";
import { resultsDir, type ResultDoc } from "../bench/lib/results.ts";

test("a panel of a log-scale bar chart and a line chart renders to SVG with titles, axes and marks", async () => {
  const svg = await renderSvg(
    panels(
      [
        barChart({ title: "Throughput", yLabel: "ops/s", logY: true, categories: ["add one", "remove"], series: [{ name: "1k", values: [5e5, 7e5] }, { name: "1M", values: [4e5, null] }] }),
        lineChart({ title: "Latency", xLabel: "clients", yLabel: "ms", series: [{ name: "p50", points: [[1, 0.4], [8, 0.9]] }], bands: [{ label: "fault", from: 2, to: 6 }] }),
      ],
      { columns: 2, title: "Both panels" },
    ),
  );
  assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  for (const text of ["Both panels", "Throughput", "Latency", "ops/s", "clients", "p50", "fault", "1M", "add one"]) assert.ok(svg.includes(`>${text}<`), `missing text ${text}`);
  // Three bars (the missing value leaves a gap), one line, two points; log ticks at powers of ten.
  assert.equal((svg.match(/aria-roledescription="bar"/g) ?? []).length, 3);
  assert.equal((svg.match(/aria-roledescription="line mark"/g) ?? []).length, 1);
  assert.equal((svg.match(/aria-roledescription="point"/g) ?? []).length, 2);
  for (const tick of ["100k", "1M"]) assert.ok(svg.includes(`>${tick}<`), `missing log tick ${tick}`);
});

test("a specification that names a URL is refused instead of loaded", async () => {
  const spec = { data: { url: "http://example.invalid/data.json" }, mark: "point", encoding: { x: { field: "a", type: "quantitative" } } };
  await assert.rejects(renderSvg(spec), /tried to load|charts carry their data inline/);
});

test("every committed result file with a chart draws from its JSON alone", async () => {
  const files = [resultsDir, join(resultsDir, "chaos")].flatMap((d) => readdirSync(d).filter((f) => f.endsWith(".json")).map((f) => join(d, f)));
  const drawn = files.filter((f) => chartOf(f) !== undefined);
  assert.ok(drawn.length >= 6, `only ${drawn.length} charts`);
  assert.equal(chartOf(join(resultsDir, "fuzz.json")), undefined);
  for (const f of drawn) {
    const doc = JSON.parse(readFileSync(f, "utf8")) as ResultDoc;
    const svg = await renderSvg(chartOf(f)!(doc));
    assert.ok(svg.length > 2000 && svg.includes("<path") && svg.includes("role-axis"), `${f}: no axes or marks`);
  }
});
