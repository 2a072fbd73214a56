// Chart builders for benchmark results: each returns a Vega-Lite specification with its data
// inline, and renderSvg() turns one into an SVG document offline (vega's headless view, no
// canvas, no network: the view's loader refuses every URL).
//
//   import { barChart, lineChart, panels, renderSvg } from "./lib/plot.js";
//
//   const bars = barChart({
//     title: "Throughput", yLabel: "ops/s", logY: true,
//     categories: ["add", "remove"],                       // groups along the x axis
//     series: [{ name: "1k", values: [5e5, 7e5] }, { name: "1M", values: [4e5, null] }],  // null = missing
//   });
//   const lines = lineChart({
//     title: "Latency", xLabel: "clients", yLabel: "ms", logY: true,
//     series: [{ name: "p50", points: [[1, 0.4], [8, 0.9]] }],
//     bands: [{ label: "fault", from: 2, to: 6 }],          // shaded x intervals (optional)
//   });
//   const svg = await renderSvg(panels([bars, lines], { columns: 2, title: "..." }));
//
// Tick labels use k/M/G suffixes; log axes have their ticks at powers of ten (plus 2x and 5x
// when the range spans at most two decades). width and height are those of the plotting area.
import type { TopLevelSpec } from "vega-lite";
import { compile } from "vega-lite";
import { View, loader, parse } from "vega";

/** A Vega-Lite view specification (unit, layer or concat), without top-level config. */
export type ChartSpec = Record<string, unknown>;

export interface BarSeries {
  name: string;
  /** One value per category; null leaves a gap. */
  values: Array<number | null | undefined>;
}

export interface BarChartOptions {
  title: string;
  categories: string[];
  series: BarSeries[];
  yLabel: string;
  xLabel?: string;
  logY?: boolean;
  /** Print each bar's value above it (default true). */
  valueLabels?: boolean;
  width?: number;
  height?: number;
}

export interface LineSeries {
  name: string;
  points: Array<[number, number]>;
}

export interface LineChartOptions {
  title: string;
  series: LineSeries[];
  xLabel: string;
  yLabel: string;
  logX?: boolean;
  logY?: boolean;
  /** Shaded intervals along x, each labelled at the top. */
  bands?: Array<{ label: string; from: number; to: number }>;
  width?: number;
  height?: number;
}

const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

/** Vega expression: 1234 → "1.23k", 2500000 → "2.5M", 0.05 → "0.05". */
const SI_LABEL =
  "abs(datum.value) >= 1e9 ? format(datum.value / 1e9, '.3~r') + 'G' : abs(datum.value) >= 1e6 ? format(datum.value / 1e6, '.3~r') + 'M' : " +
  "abs(datum.value) >= 1e3 ? format(datum.value / 1e3, '.3~r') + 'k' : format(datum.value, '.3~r')";
const SI_TEXT = SI_LABEL.replaceAll("datum.value", "datum.v");

const CONFIG = {
  background: "white",
  font: "Helvetica, Arial, sans-serif",
  title: { fontSize: 15, anchor: "middle" },
  axis: { labelFontSize: 11, titleFontSize: 12, gridColor: "#e3e3e3" },
  legend: { orient: "top", labelFontSize: 11, title: null, labelLimit: 320 },
  view: { stroke: null },
};

/** Powers of ten around the positive values (plus 2x and 5x over at most two decades): domain and ticks. */
function logAxis(values: number[]): { domain: [number, number]; ticks: number[] } | undefined {
  const pos = values.filter((v) => v > 0 && Number.isFinite(v));
  if (pos.length === 0) return undefined;
  const lo = Math.floor(Math.log10(Math.min(...pos)));
  let hi = Math.ceil(Math.log10(Math.max(...pos)));
  if (hi === lo) hi = lo + 1;
  const ticks: number[] = [];
  for (let e = lo; e <= hi; e++) {
    ticks.push(10 ** e);
    if (hi - lo <= 2 && e < hi) ticks.push(2 * 10 ** e, 5 * 10 ** e);
  }
  return { domain: [10 ** lo, 10 ** hi], ticks: ticks.map((t) => Number(t.toPrecision(12))) };
}

/** A quantitative position channel: field, title, scale (log or linear) and axis. */
function quantitative(field: string, title: string, values: number[], log: boolean, zero: boolean): ChartSpec {
  const axis: Record<string, unknown> = { labelExpr: SI_LABEL, title };
  const l = log ? logAxis(values) : undefined;
  if (l !== undefined) axis.values = l.ticks;
  const scale = l !== undefined ? { type: "log", domain: l.domain } : { zero, nice: true };
  return { field, type: "quantitative", title, scale, axis };
}

/** Series colours, with a legend above the plot in as many columns as fit its width. */
function colors(names: string[], width: number): ChartSpec {
  const widest = Math.max(1, ...names.map((n) => 28 + n.length * 6.5));
  const columns = Math.max(1, Math.min(names.length, Math.floor(width / widest)));
  return { field: "series", type: "nominal", sort: names, scale: { domain: names, range: PALETTE }, legend: { symbolType: "square", columns } };
}

/** Break a label at spaces into lines of at most about `chars` characters, joined by "\n". */
function wrap(label: string, chars: number): string {
  const lines: string[] = [];
  for (const word of label.split(" ")) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last]!.length + 1 + word.length <= chars) lines[last] += ` ${word}`;
    else lines.push(word);
  }
  return lines.join("\n");
}

/** Bars grouped by category, one bar per series within a group. */
export function barChart(o: BarChartOptions): ChartSpec {
  const names = o.series.map((s) => s.name);
  const width = o.width ?? 560;
  const fit = Math.max(8, Math.floor(width / Math.max(1, o.categories.length) / 6.5));
  const categories = o.categories.map((c) => wrap(c, fit));
  const rows = categories.flatMap((category, ci) =>
    o.series.flatMap((s) => {
      const v = s.values[ci];
      return v === null || v === undefined || !Number.isFinite(v) ? [] : [{ category, series: s.name, v }];
    }),
  );
  // Grouped, not stacked: each bar grows from the axis (the bottom of a log axis).
  const y = { ...quantitative("v", o.yLabel, rows.map((r) => r.v), o.logY === true, true), stack: null };
  const encoding = {
    x: { field: "category", type: "nominal", sort: categories, title: o.xLabel ?? null, axis: { labelAngle: 0, labelLimit: 0, labelExpr: "split(datum.label, '\\n')" } },
    xOffset: { field: "series", type: "nominal", sort: names, scale: { domain: names } },
    y,
    color: colors(names, width),
    tooltip: [{ field: "series" }, { field: "category" }, { field: "v", title: "value", format: ".4~r" }],
  };
  const layer: ChartSpec[] = [{ mark: { type: "bar" } }];
  if (o.valueLabels ?? true) {
    layer.push({
      mark: { type: "text", baseline: "bottom", dy: -2, fontSize: 9, color: "#333" },
      encoding: { text: { field: "t" } },
      transform: [{ calculate: SI_TEXT, as: "t" }],
    });
  }
  return {
    title: o.title,
    width,
    height: o.height ?? 260,
    data: { values: rows },
    encoding,
    layer,
  };
}

/** Lines with a point at every measurement, one line per series. */
export function lineChart(o: LineChartOptions): ChartSpec {
  const names = o.series.map((s) => s.name);
  const width = o.width ?? 560;
  const rows = o.series.flatMap((s) => s.points.filter(([a, b]) => Number.isFinite(a) && Number.isFinite(b)).map(([x, y]) => ({ series: s.name, x, y })));
  const bands = o.bands ?? [];
  const xs = [...rows.map((r) => r.x), ...bands.flatMap((b) => [b.from, b.to])];
  const x = quantitative("x", o.xLabel, xs, o.logX === true, false);
  const y = quantitative("y", o.yLabel, rows.map((r) => r.y), o.logY === true, true);
  const layer: ChartSpec[] = [];
  if (bands.length > 0) {
    layer.push({
      data: { values: bands },
      mark: { type: "rect", color: "#999", opacity: 0.15 },
      encoding: { x: { ...x, field: "from" }, x2: { field: "to" } },
    });
    layer.push({
      data: { values: bands },
      mark: { type: "text", align: "left", baseline: "top", dx: 4, y: 4, fontSize: 11, color: "#555" },
      encoding: { x: { ...x, field: "from" }, text: { field: "label" } },
    });
  }
  const encoding = { x, y, color: colors(names, width), tooltip: [{ field: "series" }, { field: "x", format: ".4~r" }, { field: "y", format: ".4~r" }] };
  layer.push({ data: { values: rows }, mark: { type: "line", strokeWidth: 2 }, encoding });
  layer.push({ data: { values: rows }, mark: { type: "point", filled: true, size: 30 }, encoding });
  return { title: o.title, width, height: o.height ?? 260, layer };
}

/** Several charts in a grid, with an optional overall title. */
export function panels(charts: ChartSpec[], opts: { columns?: number; title?: string } = {}): ChartSpec {
  return {
    ...(opts.title === undefined ? {} : { title: { text: opts.title, fontSize: 17 } }),
    columns: Math.max(1, Math.min(opts.columns ?? 2, charts.length)),
    concat: charts,
    spacing: { row: 30, column: 40 },
    resolve: { scale: { color: "independent", xOffset: "independent" }, legend: { color: "independent" } },
  };
}

/** Any URL a specification names is refused and noted, so rendering never touches the network or the disk. */
function offlineLoader(refused: string[]) {
  const refuse = async (uri: string): Promise<never> => {
    refused.push(uri);
    throw new Error(`refused to load ${uri}`);
  };
  return Object.assign(loader(), { load: refuse, sanitize: refuse, http: refuse, file: refuse });
}

/** Compile a chart to Vega and render it to an SVG document; any Vega-Lite warning is an error. */
export async function renderSvg(chart: ChartSpec): Promise<string> {
  const warnings: string[] = [];
  const log = (...args: unknown[]) => warnings.push(args.map(String).join(" "));
  const logger = { level: () => logger, error: log, warn: log, info: () => logger, debug: () => logger };
  const spec = { ...chart, config: CONFIG } as TopLevelSpec;
  const compiled = compile(spec, { logger: logger as never }).spec;
  if (warnings.length > 0) throw new Error(`chart "${titleOf(chart)}": ${warnings.join("; ")}`);
  const refused: string[] = [];
  const view = new View(parse(compiled), { renderer: "none", loader: offlineLoader(refused) });
  try {
    const svg = await view.toSVG();
    if (refused.length > 0) throw new Error(`chart "${titleOf(chart)}" tried to load ${refused.join(", ")}; charts carry their data inline`);
    return `${svg}\n`;
  } finally {
    view.finalize();
  }
}

function titleOf(chart: ChartSpec): string {
  const t = chart.title;
  return typeof t === "string" ? t : typeof t === "object" && t !== null ? String((t as { text?: unknown }).text) : "untitled";
}
