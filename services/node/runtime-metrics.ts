// The node process's own metrics, beside the replication ones: CPU time, memory, garbage
// collection pauses and the event loop's delay and utilization. A node is one JavaScript thread:
// when it cannot keep up, these say whether that thread is saturated (utilization near 1), and
// how much of it goes to collecting garbage. They are process-wide: nodes sharing a process (tests)
// each report the same figures.
import { PerformanceObserver, constants, monitorEventLoopDelay, performance } from "node:perf_hooks";
import type { Attributes, Meter } from "@opentelemetry/api";

/** Pause buckets (seconds): young-generation collections take ~0.5-10 ms, full ones up to ~1 s. */
const GC_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** How often the event loop's delay is sampled (ms): a timer at this period, whose lateness is the delay. */
const LOOP_RESOLUTION_MS = 10;
/** Node records each sample as the whole interval between the timer's runs: the period is taken off. */
const lateness = (ns: number): number => Math.max(0, ns / 1e9 - LOOP_RESOLUTION_MS / 1000);

/** Node's gc performance entry kinds, as label values. */
const GC_KINDS = new Map<number, Attributes>([
  [constants.NODE_PERFORMANCE_GC_MINOR, { kind: "minor" }],
  [constants.NODE_PERFORMANCE_GC_MAJOR, { kind: "major" }],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, { kind: "incremental" }],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, { kind: "weak_callbacks" }],
]);
const OTHER_GC: Attributes = { kind: "other" };

/** Register the instruments; returns what stops their observers (at the metrics' shutdown). */
export function runtimeMetrics(meter: Meter): () => void {
  const cpu = meter.createObservableCounter("deltaset_process_cpu_seconds", { description: "CPU time the node process used, by mode (user, system), all threads", unit: "s" });
  const rss = meter.createObservableGauge("deltaset_process_resident_memory_bytes", { description: "Resident memory of the node process", unit: "By" });
  const heap = meter.createObservableGauge("deltaset_heap_bytes", {
    description: "JavaScript heap by state: used, total (reserved by V8), external (Buffers and other memory outside the heap that JavaScript objects hold)",
    unit: "By",
  });
  const delay = meter.createObservableGauge("deltaset_event_loop_delay_seconds", {
    description: "How late the event loop ran a timer, since the previous collection (stat: p50, p99, max); high values mean calls waited for the loop",
    unit: "s",
  });
  const utilization = meter.createObservableGauge("deltaset_event_loop_utilization", {
    description: "Fraction of the time since the previous collection that the event loop was busy (0-1); near 1 the node is bound by its one JavaScript thread",
  });
  const gc = meter.createHistogram("deltaset_gc_duration_seconds", {
    description: "Garbage-collection pauses of the node process, by kind (minor: young generation; major: full; incremental: marking steps; weak_callbacks)",
    unit: "s",
    advice: { explicitBucketBoundaries: GC_BUCKETS },
  });

  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  let lastElu = performance.eventLoopUtilization();
  meter.addBatchObservableCallback(
    (r) => {
      const usage = process.cpuUsage();
      r.observe(cpu, usage.user / 1e6, { mode: "user" });
      r.observe(cpu, usage.system / 1e6, { mode: "system" });
      const mem = process.memoryUsage();
      r.observe(rss, mem.rss);
      r.observe(heap, mem.heapUsed, { state: "used" });
      r.observe(heap, mem.heapTotal, { state: "total" });
      r.observe(heap, mem.external, { state: "external" });
      // A loop too busy to run the timer since the last collection has no sample: nothing is reported.
      if (loopDelay.count > 0) {
        r.observe(delay, lateness(loopDelay.percentile(50)), { stat: "p50" });
        r.observe(delay, lateness(loopDelay.percentile(99)), { stat: "p99" });
        r.observe(delay, lateness(loopDelay.max), { stat: "max" });
      }
      loopDelay.reset();
      const now = performance.eventLoopUtilization();
      r.observe(utilization, performance.eventLoopUtilization(now, lastElu).utilization);
      lastElu = now;
    },
    [cpu, rss, heap, delay, utilization],
  );

  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      gc.record(e.duration / 1000, (kind === undefined ? undefined : GC_KINDS.get(kind)) ?? OTHER_GC);
    }
  });
  gcObserver.observe({ entryTypes: ["gc"] });
  return () => {
    gcObserver.disconnect();
    loopDelay.disable();
  };
}
