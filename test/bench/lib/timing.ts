// Timing and memory helpers for benchmarks.
import { PerformanceObserver, performance } from "node:perf_hooks";
//
//   const r = rate(10_000, (i) => doOp(i));   // { count, seconds, perSecond }
//   const s = seconds(() => bigJob());         // wall seconds of one call
//   const h = heapUsedAfterGc();               // bytes, or null without --expose-gc
//   collectGarbage();                          // one full gc before a timed section (if exposed)
//   const rng = prng(42);                      // deterministic uniform [0, 1)
//   const gcMs = await gcMillisDuring(() => work());   // GC pause time inside a section
//   const q = percentile(sortedNanos, 0.99);
//
// Heap figures need node started with --expose-gc (`node --expose-gc --import tsx file.ts`).

/** Wall-clock seconds of one call. */
export function seconds(fn: () => void): number {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

export interface Rate {
  count: number;
  seconds: number;
  perSecond: number;
}

/** Call fn(i) for i = 0..count-1 and report the rate. */
export function rate(count: number, fn: (i: number) => void): Rate {
  const s = seconds(() => {
    for (let i = 0; i < count; i++) fn(i);
  });
  return { count, seconds: s, perSecond: count / s };
}

type GcFn = () => void;

export function gcAvailable(): boolean {
  return typeof (globalThis as { gc?: GcFn }).gc === "function";
}

/** One full collection when --expose-gc was given (to start a timed section clean); else nothing. */
export function collectGarbage(): void {
  (globalThis as { gc?: GcFn }).gc?.();
}

/** heapUsed after full collections, or null when the process was not started with --expose-gc. */
export function heapUsedAfterGc(): number | null {
  const gc = (globalThis as { gc?: GcFn }).gc;
  if (gc === undefined) return null;
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** A small seeded PRNG (mulberry32): same seed, same sequence. */
export { seededRandom as prng } from "../../../services/common/prng.js";

/**
 * Run fn and return the milliseconds of garbage-collection pauses that happened during it
 * (from perf_hooks "gc" entries, which arrive asynchronously; hence the promise).
 */
export async function gcMillisDuring(fn: () => void): Promise<number> {
  const spans: Array<[number, number]> = [];
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) spans.push([e.startTime, e.duration]);
  });
  obs.observe({ entryTypes: ["gc"] });
  const t0 = performance.now();
  fn();
  const t1 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 20));
  obs.disconnect();
  return spans.filter(([start]) => start >= t0 && start <= t1).reduce((sum, [, d]) => sum + d, 0);
}

/** The q-quantile (0..1) of an ascending array. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
