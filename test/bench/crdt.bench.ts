// Benchmark of the CRDT kernel's add-wins set: mutators, joins, codec, size and memory, for sets
// of 1k, 100k and 1M elements (--quick: 1k and 10k). Writes docs/results/crdt.json and crdt.svg.
//
//   npm run bench:crdt            (node --expose-gc --max-old-space-size=6144 --import tsx test/bench/crdt.bench.ts)
//   npm run bench:crdt -- --quick
//
// Elements are 8 bytes: 4 bytes of a hash of the index, then the index, so byte order (the
// order of entries on the wire and in the store) is unrelated to the order dots were minted.
// The main state is built by one replica ("node-a") in batches of 1000 adds, with 5% of the
// elements then removed and 5% new ones added, so its context also covers removed dots.
import { AWSet, AWSetLattice } from "../../services/crdt/index.js";
import { drawChart } from "./charts/draw.js";
import { sizeLabel as label } from "./charts/crdt.js";
import { commandLine, isQuick, printTargets, target, writeResults } from "./lib/results.js";
import {
  type Rate,
  collectGarbage,
  gcAvailable,
  gcMillisDuring,
  heapUsedAfterGc,
  percentile,
  prng,
  rate,
  seconds,
} from "./lib/timing.js";

const quick = isQuick();
const SIZES = quick ? [1_000, 10_000] : [1_000, 100_000, 1_000_000];
const OPS = quick ? 5_000 : 20_000; // single-element operations timed per size
const BATCH = 1_000;
const CHURN = 0.05;
const ROUNDS = 5; // timed rounds per measurement; the best is kept
const COMMAND = commandLine("bench:crdt", quick);

function element(i: number): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeUInt32BE(Math.imul(i ^ 0x9e3779b9, 0x85ebca6b) >>> 0, 0);
  b.writeUInt32BE(i >>> 0, 4);
  return b;
}

/** Repeat fn until at least minSeconds have passed; seconds per call. */
function perCall(fn: () => void, minSeconds: number): number {
  let calls = 0;
  const total = seconds(() => {
    const t0 = process.hrtime.bigint();
    do {
      fn();
      calls++;
    } while (Number(process.hrtime.bigint() - t0) / 1e9 < minSeconds);
  });
  return total / calls;
}

interface SizeMetrics {
  elements: number;
  buildAddsPerSec: number;
  heapBytesPerElement: number | null;
  addDeltaOpsPerSec: number;
  removeDeltaOpsPerSec: number;
  deltaJoinPerSec: number;
  deltaJoinMedianNs: number;
  deltaJoinP99Ns: number;
  deltaJoinGcShare: number;
  deltaJoinLatencyPassMeanNs: number;
  plainMapChurnOpsPerSec: number;
  fullJoinElementsPerSec: number;
  fullJoinWireOrderElementsPerSec: number;
  encodeElementsPerSec: number;
  decodeElementsPerSec: number;
  encodedBytes: number;
  encodedBytesPerElement: number;
  contextRanges: number;
}

async function measure(n: number): Promise<SizeMetrics> {
  const rnd = prng(n);
  let nextIndex = 0;

  // Build: batches of adds at node-a, then churn.
  const heap0 = heapUsedAfterGc();
  const a = AWSet.bottom();
  const buildSeconds = seconds(() => {
    while (nextIndex < n) {
      const batch: Buffer[] = [];
      for (let k = 0; k < BATCH && nextIndex < n; k++) batch.push(element(nextIndex++));
      a.joinInPlace(a.addDelta("node-a", batch));
    }
  });
  const heap1 = heapUsedAfterGc();
  const churn = Math.floor(n * CHURN);
  const victims = new Set<number>();
  while (victims.size < churn) victims.add(Math.floor(rnd() * n));
  a.joinInPlace(a.removeDelta([...victims].map(element)));
  const fresh: Buffer[] = [];
  for (let k = 0; k < churn; k++) fresh.push(element(nextIndex++));
  a.joinInPlace(a.addDelta("node-a", fresh));
  const live = Array.from({ length: n }, (_, i) => i).filter((i) => !victims.has(i));

  // Pure delta mutators on the big state (the state is not changed).
  const newEls = Array.from({ length: OPS }, (_, k) => element(nextIndex + k));
  const add = bestRate(() => rate(OPS, (i) => a.addDelta("node-a", [newEls[i]!])));
  const liveEls = Array.from({ length: OPS }, () => element(live[Math.floor(rnd() * live.length)]!));
  const remove = bestRate(() => rate(OPS, (i) => a.removeDelta([liveEls[i]!])));

  // Single-element deltas from another replica: add e, then remove e, for OPS/2 elements.
  const c = AWSet.bottom();
  const deltas: AWSet[] = [];
  for (let k = 0; k < OPS / 2; k++) {
    const e = element(nextIndex++);
    const d1 = c.addDelta("node-c", [e]);
    c.joinInPlace(d1);
    const d2 = c.removeDelta([e]);
    c.joinInPlace(d2);
    deltas.push(d1, d2);
  }
  const deltaJoin = bestRate(() => {
    const target = warmClone(a);
    collectGarbage();
    const r = rate(deltas.length, (i) => target.joinInPlace(deltas[i]!));
    if (target.size !== a.size || target.ctx.max("node-c") !== OPS / 2) throw new Error("delta join went wrong");
    return r;
  });
  // One more pass timing each join alone, and the GC pauses inside the pass: the typical join
  // shows the algorithm's cost; the mean also carries the runtime's GC and hash-table upkeep,
  // which grow with the heap.
  // Three such passes; the one with the lowest median is kept (the machine is shared).
  let latency = new Float64Array(0);
  let passSeconds = 0;
  let deltaJoinGcMs = 0;
  for (let pass = 0; pass < 3; pass++) {
    const times = new Float64Array(deltas.length);
    const latencyTarget = warmClone(a);
    collectGarbage();
    let s = 0;
    const gcMs = await gcMillisDuring(() => {
      s = seconds(() => {
        for (let i = 0; i < deltas.length; i++) {
          const t0 = process.hrtime.bigint();
          latencyTarget.joinInPlace(deltas[i]!);
          times[i] = Number(process.hrtime.bigint() - t0);
        }
      });
    });
    times.sort();
    if (pass === 0 || percentile(times, 0.5) < percentile(latency, 0.5)) {
      latency = times;
      passSeconds = s;
      deltaJoinGcMs = gcMs;
    }
  }
  // Baseline: the same churn (insert a fresh key, delete it) on a plain Map of n string keys.
  const plain = new Map<string, number>();
  for (const k of a.entries.keys()) plain.set(k, 0);
  const plainKeys = deltas.map((_, i) => element(nextIndex + OPS + i).toString("latin1"));
  const mapChurn = bestRate(() => rate(plainKeys.length, (i) => (i % 2 === 0 ? plain.set(plainKeys[i]!, 1) : plain.delete(plainKeys[i - 1]!))));

  // Full-state join: b diverged from a by 1% removes and 1% adds at node-b.
  const b = a.clone();
  const k1 = Math.max(1, Math.floor(n / 100));
  b.joinInPlace(b.removeDelta(Array.from({ length: k1 }, () => element(live[Math.floor(rnd() * live.length)]!))));
  b.joinInPlace(b.addDelta("node-b", Array.from({ length: k1 }, () => element(nextIndex++))));
  const fullJoinSeconds = joinSeconds(a, b);

  // Codec.
  const bytes = AWSetLattice.encode(a);
  const encodeSeconds = bestOf(ROUNDS, () => perCall(() => AWSetLattice.encode(a), 0.2));
  const decodeSeconds = bestOf(ROUNDS, () => perCall(() => AWSetLattice.decode(bytes), 0.2));
  // The same join with b as received over the wire: its entries come in element byte order,
  // unrelated to dot order.
  const bWire = AWSetLattice.decode(AWSetLattice.encode(b));
  const wireJoinSeconds = joinSeconds(a, bWire);
  const check = a.clone();
  check.joinInPlace(bWire);
  if (!AWSetLattice.equals(check, AWSet.referenceJoin(a, b))) throw new Error("wire-order join differs");

  const heapPerElement = heap0 === null || heap1 === null ? null : (heap1 - heap0) / n;
  return {
    elements: a.size,
    buildAddsPerSec: n / buildSeconds,
    heapBytesPerElement: heapPerElement,
    addDeltaOpsPerSec: add.perSecond,
    removeDeltaOpsPerSec: remove.perSecond,
    deltaJoinPerSec: deltaJoin.perSecond,
    deltaJoinMedianNs: percentile(latency, 0.5),
    deltaJoinP99Ns: percentile(latency, 0.99),
    deltaJoinGcShare: deltaJoinGcMs / 1000 / passSeconds,
    deltaJoinLatencyPassMeanNs: (passSeconds * 1e9) / deltas.length,
    plainMapChurnOpsPerSec: mapChurn.perSecond,
    fullJoinElementsPerSec: b.size / fullJoinSeconds,
    fullJoinWireOrderElementsPerSec: bWire.size / wireJoinSeconds,
    encodeElementsPerSec: a.size / encodeSeconds,
    decodeElementsPerSec: a.size / decodeSeconds,
    encodedBytes: bytes.length,
    encodedBytesPerElement: bytes.length / a.size,
    contextRanges: a.ctx.size().ranges,
  };
}

/**
 * A copy of a state as a long-lived replica holds it: AWSet builds its dot index lazily on the
 * first operation that needs it (O(n), once per state), so build it here, outside the timings.
 */
function warmClone(s: AWSet): AWSet {
  const c = s.clone();
  c.dotCount(); // forces the dot index
  return c;
}

/** Smallest of several timings (each preceded by a gc when available). */
function bestOf(times: number, run: () => number): number {
  let best = Infinity;
  for (let i = 0; i < times; i++) {
    collectGarbage();
    best = Math.min(best, run());
  }
  return best;
}

/**
 * Seconds for one full-state join of `other` into a copy of `base`. Only the joins are timed,
 * not the clones they mutate; small states are joined into many clones per timing so that one
 * timing covers ~200k elements.
 */
function joinSeconds(base: AWSet, other: AWSet): number {
  const copies = Math.max(1, Math.min(200, Math.ceil(200_000 / Math.max(1, base.size))));
  return bestOf(copies > 1 ? ROUNDS : 3, () => {
    const targets = Array.from({ length: copies }, () => warmClone(base));
    collectGarbage();
    return seconds(() => {
      for (const t of targets) t.joinInPlace(other);
    }) / copies;
  });
}

/** The best of ROUNDS rate measurements: the machine is shared, so the fastest run is the least disturbed. */
function bestRate(measureOnce: () => Rate): Rate {
  let best: Rate | undefined;
  for (let i = 0; i < ROUNDS; i++) {
    collectGarbage();
    const r = measureOnce();
    if (best === undefined || r.perSecond > best.perSecond) best = r;
  }
  return best!;
}

async function main(): Promise<void> {
  if (!gcAvailable()) console.warn("note: run with node --expose-gc for heap figures (npm run bench:crdt does)");
  await measure(2_000); // warm-up: let the JIT compile the hot paths before anything is recorded
  const bySize: Record<string, SizeMetrics> = {};
  for (const n of SIZES) {
    const t0 = Date.now();
    const m = await measure(n);
    bySize[label(n)] = m;
    console.log(`${label(n).padStart(5)}: ${JSON.stringify(m, (_k, v) => (typeof v === "number" ? Number(v.toPrecision(4)) : v))} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    heapUsedAfterGc();
  }

  const small = bySize[label(SIZES[0]!)]!;
  const largeN = SIZES[SIZES.length - 1]!;
  const large = bySize[label(largeN)]!;
  const prevN = SIZES[SIZES.length - 2]!;
  const prev = bySize[label(prevN)]!;
  const targets = [
    target(
      `single-element delta join throughput: ${label(SIZES[0]!)} rate / ${label(largeN)} rate`,
      "<= 2 (joining a small delta does not scale with the set size)",
      small.deltaJoinPerSec / large.deltaJoinPerSec,
      (m) => m <= 2,
      COMMAND,
    ),
    target(
      `single-element delta join, median latency: ${label(largeN)} / ${label(SIZES[0]!)}`,
      "<= 2 (the typical join does not scale with the set size)",
      large.deltaJoinMedianNs / small.deltaJoinMedianNs,
      (m) => m <= 2,
      COMMAND,
    ),
    target(`encoded bytes per element at ${label(largeN)} (8-byte elements)`, "< 40", large.encodedBytesPerElement, (m) => m < 40, COMMAND),
    target(
      `full-state join of a wire-order state, per-element cost: ${label(largeN)} / ${label(prevN)} (10x the elements)`,
      "<= 4 (linear, allowing for cache misses at 1M; a quadratic step would give ~10)",
      prev.fullJoinWireOrderElementsPerSec / large.fullJoinWireOrderElementsPerSec,
      (m) => m <= 4,
      COMMAND,
    ),
  ];

  const path = writeResults("crdt", {
    params: {
      quick,
      sizes: SIZES,
      elementBytes: 8,
      opsPerSize: OPS,
      buildBatch: BATCH,
      churn: CHURN,
      replicaIds: ["node-a", "node-b", "node-c"],
      heapMeasured: gcAvailable(),
      notes:
        "addDelta/removeDelta: pure mutator on the big state. deltaJoin: joinInPlace of single-element add and remove deltas from another replica (PerSec: best of 5 passes; MedianNs/P99Ns: each join timed alone, in the best of 3 more passes by median; GcShare: fraction of that pass spent in GC pauses as reported by perf_hooks). plainMapChurn: the same insert/delete churn on a plain Map holding the set's keys, as a baseline of the runtime's own cost at that size. Targets of timed joins are copies of the state with the dot index already built (a long-lived replica's state has it; it is built lazily once per state). fullJoin: joinInPlace of a replica state that diverged by 1% removes + 1% adds; wire order: the same state decoded, entries in byte order. Heap: heapUsed growth after gc while building, per element.",
    },
    metrics: { bySize },
    targets,
  });

  printTargets(targets);
}

await main();
