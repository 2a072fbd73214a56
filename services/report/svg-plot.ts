// A small, dependency-free SVG chart writer for benchmark results.
//
//   import { barChart, lineChart, panels } from "./lib/svg-plot.js";
//
//   const bars = barChart({
//     title: "Throughput", yLabel: "ops/s", logY: true,
//     categories: ["add", "remove"],                       // groups along the x axis
//     series: [{ name: "1k", values: [5e5, 7e5] }, { name: "1M", values: [4e5, null] }],  // null = missing
//   });
//   const lines = lineChart({
//     title: "Latency", xLabel: "clients", yLabel: "ms", logX: false, logY: true,
//     series: [{ name: "p50", points: [[1, 0.4], [8, 0.9]] }],
//   });
//   writeChart("name", panels([bars, lines], { columns: 2, title: "..." }));   // see results.ts
//
// Every chart has a title, axis labels, grid lines, a legend and tick labels with k/M/G
// suffixes. Log scales put ticks at powers of ten (plus 2x and 5x when the range is narrow).
// A Chart is { width, height, body, svg }: `svg` is a complete document, `body` the inner markup
// that panels() places into a grid.

export interface Chart {
  readonly width: number;
  readonly height: number;
  /** Markup without the outer <svg> element. */
  readonly body: string;
  /** A complete SVG document. */
  readonly svg: string;
}

export interface BarSeries {
  name: string;
  /** One value per category; null leaves a gap. */
  values: Array<number | null>;
}

export interface BarChartOptions {
  title: string;
  categories: string[];
  series: BarSeries[];
  yLabel: string;
  xLabel?: string;
  logY?: boolean;
  /** Print each bar's value above it (default true; skipped when bars are too narrow). */
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
  width?: number;
  height?: number;
}

export const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

const FONT = 'font-family="Helvetica, Arial, sans-serif"';
const CHAR_W = 6.6; // rough width of one 11px character, for layout

// ---------------------------------------------------------------- formatting

export function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** 1234 → "1.23k", 2500000 → "2.5M", 0.05 → "0.05". */
export function formatNumber(v: number): string {
  const a = Math.abs(v);
  const trim = (x: number) => String(Number(x.toPrecision(3)));
  if (a >= 1e9) return `${trim(v / 1e9)}G`;
  if (a >= 1e6) return `${trim(v / 1e6)}M`;
  if (a >= 1e3) return `${trim(v / 1e3)}k`;
  return trim(v);
}

const r1 = (x: number) => Math.round(x * 10) / 10;

// ---------------------------------------------------------------- scales

interface Scale {
  ticks: number[];
  /** Position of v in [0, 1] along the axis. */
  frac(v: number): number;
  /** The value bars grow from. */
  base: number;
}

function niceStep(raw: number): number {
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
}

function linearScale(values: number[], fromZero: boolean): Scale {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (fromZero) {
    lo = Math.min(0, lo);
    hi = Math.max(0, hi);
  }
  if (hi === lo) hi = lo + (lo === 0 ? 1 : Math.abs(lo));
  const step = niceStep((hi - lo) / 5);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const ticks: number[] = [];
  for (let t = lo; t <= hi + step / 2; t += step) ticks.push(Number(t.toPrecision(12)));
  return { ticks, frac: (v) => (v - lo) / (hi - lo), base: fromZero ? 0 : lo };
}

function logScale(values: number[]): Scale {
  const pos = values.filter((v) => v > 0);
  if (pos.length === 0) return linearScale(values, true);
  let lo = Math.floor(Math.log10(Math.min(...pos)));
  let hi = Math.ceil(Math.log10(Math.max(...pos)));
  if (hi === lo) hi = lo + 1;
  const ticks: number[] = [];
  for (let e = lo; e <= hi; e++) {
    ticks.push(10 ** e);
    if (hi - lo <= 2 && e < hi) ticks.push(2 * 10 ** e, 5 * 10 ** e);
  }
  const [l, h] = [lo, hi];
  return {
    ticks: ticks.sort((a, b) => a - b),
    frac: (v) => (Math.log10(Math.max(v, 10 ** l)) - l) / (h - l),
    base: 10 ** l,
  };
}

// ---------------------------------------------------------------- frame

interface Frame {
  width: number;
  height: number;
  left: number;
  top: number;
  plotW: number;
  plotH: number;
  parts: string[];
}

function legendRows(names: string[], width: number): string[][] {
  const rows: string[][] = [[]];
  let x = 0;
  for (const n of names) {
    const w = 22 + n.length * CHAR_W + 14;
    if (x + w > width - 20 && rows[rows.length - 1]!.length > 0) {
      rows.push([]);
      x = 0;
    }
    rows[rows.length - 1]!.push(n);
    x += w;
  }
  return rows;
}

/** Title, legend, axes, grid and labels; returns the frame to draw the data into. */
function frame(o: {
  title: string;
  width: number;
  height: number;
  names: string[];
  xLabel?: string;
  yLabel: string;
  y: Scale;
  bottomExtra: number;
}): Frame {
  const rows = legendRows(o.names, o.width);
  const top = 34 + rows.length * 18 + 8;
  const left = 74;
  const right = 18;
  const bottom = 28 + o.bottomExtra + (o.xLabel ? 18 : 0);
  const plotW = o.width - left - right;
  const plotH = o.height - top - bottom;
  const p: string[] = [];
  p.push(`<rect x="0" y="0" width="${o.width}" height="${o.height}" fill="white"/>`);
  p.push(`<text x="${o.width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold" ${FONT}>${escapeXml(o.title)}</text>`);
  // Legend.
  let idx = 0;
  rows.forEach((row, ri) => {
    const rowW = row.reduce((s, n) => s + 22 + n.length * CHAR_W + 14, 0);
    let x = (o.width - rowW) / 2;
    const y = 34 + ri * 18 + 6;
    for (const n of row) {
      p.push(`<rect x="${r1(x)}" y="${y - 9}" width="14" height="10" fill="${PALETTE[idx % PALETTE.length]}"/>`);
      p.push(`<text x="${r1(x + 19)}" y="${y}" font-size="11" ${FONT}>${escapeXml(n)}</text>`);
      x += 22 + n.length * CHAR_W + 14;
      idx++;
    }
  });
  // Grid and y ticks.
  for (const t of o.y.ticks) {
    const y = r1(top + plotH * (1 - o.y.frac(t)));
    p.push(`<line x1="${left}" y1="${y}" x2="${left + plotW}" y2="${y}" stroke="#e3e3e3"/>`);
    p.push(`<text x="${left - 6}" y="${y + 4}" text-anchor="end" font-size="11" ${FONT}>${formatNumber(t)}</text>`);
  }
  p.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${top + plotH}" stroke="#333"/>`);
  p.push(`<line x1="${left}" y1="${top + plotH}" x2="${left + plotW}" y2="${top + plotH}" stroke="#333"/>`);
  const cy = top + plotH / 2;
  p.push(`<text x="16" y="${cy}" text-anchor="middle" font-size="12" transform="rotate(-90 16 ${cy})" ${FONT}>${escapeXml(o.yLabel)}</text>`);
  if (o.xLabel) {
    p.push(`<text x="${left + plotW / 2}" y="${o.height - 8}" text-anchor="middle" font-size="12" ${FONT}>${escapeXml(o.xLabel)}</text>`);
  }
  return { width: o.width, height: o.height, left, top, plotW, plotH, parts: p };
}

function finish(f: Frame): Chart {
  const body = f.parts.join("\n");
  return { width: f.width, height: f.height, body, svg: document(f.width, f.height, body) };
}

function document(width: number, height: number, body: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">\n${body}\n</svg>\n`;
}

/** Split a label into at most two lines that fit the width. */
function wrap(label: string, width: number): string[] {
  if (label.length * CHAR_W <= width) return [label];
  const words = label.split(" ");
  let best = [label];
  let bestW = Infinity;
  for (let i = 1; i < words.length; i++) {
    const a = words.slice(0, i).join(" ");
    const b = words.slice(i).join(" ");
    const w = Math.max(a.length, b.length);
    if (w < bestW) {
      bestW = w;
      best = [a, b];
    }
  }
  return best;
}

// ---------------------------------------------------------------- charts

export function barChart(o: BarChartOptions): Chart {
  const width = o.width ?? 720;
  const height = o.height ?? 400;
  const values = o.series.flatMap((s) => s.values).filter((v): v is number => v !== null && Number.isFinite(v));
  const y = o.logY ? logScale(values.length ? values : [1]) : linearScale(values.length ? values : [0], true);
  const groupGuess = (width - 92) / Math.max(1, o.categories.length);
  const lines = Math.max(1, ...o.categories.map((c) => wrap(c, groupGuess - 4).length));
  const f = frame({ title: o.title, width, height, names: o.series.map((s) => s.name), xLabel: o.xLabel, yLabel: o.yLabel, y, bottomExtra: (lines - 1) * 13 });
  const groupW = f.plotW / Math.max(1, o.categories.length);
  const barW = (groupW * 0.76) / Math.max(1, o.series.length);
  const baseY = f.top + f.plotH * (1 - y.frac(y.base));
  o.categories.forEach((cat, ci) => {
    const gx = f.left + ci * groupW;
    o.series.forEach((s, si) => {
      const v = s.values[ci];
      if (v === null || v === undefined || !Number.isFinite(v)) return;
      const x = gx + groupW * 0.12 + si * barW;
      const vy = f.top + f.plotH * (1 - y.frac(v));
      const top = Math.min(vy, baseY);
      const h = Math.max(Math.abs(baseY - vy), 0.5);
      f.parts.push(
        `<rect x="${r1(x)}" y="${r1(top)}" width="${r1(barW - 1)}" height="${r1(h)}" fill="${PALETTE[si % PALETTE.length]}"><title>${escapeXml(`${s.name}, ${cat}: ${formatNumber(v)}`)}</title></rect>`,
      );
      if ((o.valueLabels ?? true) && barW >= 20) {
        f.parts.push(`<text x="${r1(x + barW / 2)}" y="${r1(top - 3)}" text-anchor="middle" font-size="9" fill="#333" ${FONT}>${formatNumber(v)}</text>`);
      }
    });
    wrap(cat, groupW - 4).forEach((line, li) => {
      f.parts.push(`<text x="${r1(gx + groupW / 2)}" y="${r1(f.top + f.plotH + 16 + li * 13)}" text-anchor="middle" font-size="11" ${FONT}>${escapeXml(line)}</text>`);
    });
  });
  return finish(f);
}

export function lineChart(o: LineChartOptions): Chart {
  const width = o.width ?? 720;
  const height = o.height ?? 400;
  const pts = o.series.flatMap((s) => s.points).filter(([a, b]) => Number.isFinite(a) && Number.isFinite(b));
  const xs = pts.map(([a]) => a);
  const ys = pts.map(([, b]) => b);
  const x = o.logX ? logScale(xs.length ? xs : [1]) : linearScale(xs.length ? xs : [0], false);
  const y = o.logY ? logScale(ys.length ? ys : [1]) : linearScale(ys.length ? ys : [0], true);
  const f = frame({ title: o.title, width, height, names: o.series.map((s) => s.name), xLabel: o.xLabel, yLabel: o.yLabel, y, bottomExtra: 0 });
  const px = (v: number) => r1(f.left + f.plotW * x.frac(v));
  const py = (v: number) => r1(f.top + f.plotH * (1 - y.frac(v)));
  for (const t of x.ticks) {
    f.parts.push(`<line x1="${px(t)}" y1="${f.top + f.plotH}" x2="${px(t)}" y2="${f.top + f.plotH + 4}" stroke="#333"/>`);
    f.parts.push(`<text x="${px(t)}" y="${f.top + f.plotH + 17}" text-anchor="middle" font-size="11" ${FONT}>${formatNumber(t)}</text>`);
  }
  o.series.forEach((s, si) => {
    const color = PALETTE[si % PALETTE.length];
    const ok = s.points.filter(([a, b]) => Number.isFinite(a) && Number.isFinite(b)).sort((p, q) => p[0] - q[0]);
    if (ok.length > 1) {
      f.parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${ok.map(([a, b]) => `${px(a)},${py(b)}`).join(" ")}"/>`);
    }
    for (const [a, b] of ok) {
      f.parts.push(`<circle cx="${px(a)}" cy="${py(b)}" r="3" fill="${color}"><title>${escapeXml(`${s.name}: (${formatNumber(a)}, ${formatNumber(b)})`)}</title></circle>`);
    }
  });
  return finish(f);
}

/** Several charts in a grid, with an optional overall title. */
export function panels(charts: Chart[], opts: { columns?: number; title?: string } = {}): Chart {
  const columns = Math.max(1, Math.min(opts.columns ?? 2, charts.length));
  const rows = Math.ceil(charts.length / columns);
  // Each column is as wide as its widest chart, each row as tall as its tallest.
  const colW = Array.from({ length: columns }, (_, c) => Math.max(0, ...charts.filter((_, i) => i % columns === c).map((x) => x.width)));
  const rowH = Array.from({ length: rows }, (_, r) => Math.max(0, ...charts.slice(r * columns, (r + 1) * columns).map((x) => x.height)));
  const colX = colW.map((_, c) => colW.slice(0, c).reduce((a, b) => a + b, 0));
  const head = opts.title ? 34 : 0;
  const rowY = rowH.map((_, r) => head + rowH.slice(0, r).reduce((a, b) => a + b, 0));
  const width = colW.reduce((a, b) => a + b, 0);
  const height = head + rowH.reduce((a, b) => a + b, 0);
  const parts = [`<rect x="0" y="0" width="${width}" height="${height}" fill="white"/>`];
  if (opts.title) {
    parts.push(`<text x="${width / 2}" y="23" text-anchor="middle" font-size="17" font-weight="bold" ${FONT}>${escapeXml(opts.title)}</text>`);
  }
  charts.forEach((c, i) => {
    const gx = colX[i % columns]!;
    const gy = rowY[Math.floor(i / columns)]!;
    parts.push(`<g transform="translate(${gx},${gy})">\n${c.body}\n</g>`);
  });
  const body = parts.join("\n");
  return { width, height, body, svg: document(width, height, body) };
}
