// npm run bench:filter-writes [-- --quick]
// The cost of one operation on a filter key as the filter grows, on one real node (fsync): for
// GBF, GCF and ORCF at capacities 10k, 100k and 1M (quick: 10k and 100k), and an AWSET_PROB at
// 10k and 100k ("capacity" there: twice the elements), the key is filled half full in batches of
// 1000, then 30 single-element Adds, 30 Queries (and 30 Removes for ORCF and AWSET_PROB) run one
// after another; then the node restarts and each key's first Query (which reads the filter
// back from its records) and second are timed. A small filter key is one record; a large one a
// base record and a log of its deltas (store/whole-state-layout.ts), so a write costs its delta;
// the decoded state stays in memory between operations (store/decoded-states.ts).
// Writes docs/results/filter-writes.json and its chart.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { QueryRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { ObjectType } from "../../services/gen/deltaset/v1/types.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { drawChart } from "./charts/draw.ts";
import { percentile } from "./lib/timing.ts";
import { commandLine, isQuick, printTargets, target, writeResults } from "./lib/results.ts";

const quick = isQuick();
const command = commandLine("bench:filter-writes", quick);
const CAPACITIES = quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000];
const TYPES = [ObjectType.GBF, ObjectType.GCF, ObjectType.ORCF];
/**
 * The probabilistic set is stored whole too, without a log (its join is not associative, so a
 * replayed log need not give the state its operations left): a write encodes the whole set, so it
 * runs to 100k elements only and has no flatness target; reported beside the filters.
 */
const SET_SIZES = quick ? [10_000] : [10_000, 100_000];
const SAMPLES = 30;
const BATCH = 1000;

interface Cell {
  type: string;
  capacity: number;
  elements: number;
  fillSeconds: number;
  addP50Ms: number;
  queryP50Ms: number;
  removeP50Ms: number | null;
  /** After a restart: the key's first Query (reads base and log) and its second. */
  coldQueryMs?: number;
  warmQueryMs?: number;
}

const root = mkdtempSync(join(tmpdir(), "deltaset-filter-writes-"));
const nodeArgs = ["--listen", "127.0.0.61:0", "--data-dir", join(root, "node"), "--log-level", "warn"];
let node = await startNodeProcess(nodeArgs);
let client = replicaClient(node.address);
const timeoutMs = 300_000;

async function p50(fn: (i: number) => Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const t = performance.now();
    await fn(i);
    ms.push(performance.now() - t);
  }
  return percentile(ms.sort((a, b) => a - b), 0.5);
}

const cells: Cell[] = [];
try {
  const runs: Array<[ObjectType, number]> = [...TYPES.flatMap((t) => CAPACITIES.map((c) => [t, c] as [ObjectType, number])), ...SET_SIZES.map((c) => [ObjectType.AWSET_PROB, c] as [ObjectType, number])];
  for (const [type, capacity] of runs) {
    {
      const key = `${ObjectType[type]}-${capacity}`;
      const params = type === ObjectType.AWSET_PROB ? undefined : { capacity: BigInt(capacity), falsePositiveRate: 0, hashes: 0, bits: 0n, fingerprintBits: 0, bucketSize: 0, level: 0, ageSlices: 0, unionStrategy: 0 };
      const elements = capacity / 2;
      const t0 = performance.now();
      for (let i = 0; i < elements; i += BATCH) {
        const batch = Array.from({ length: Math.min(BATCH, elements - i) }, (_, j) => Buffer.from(`fill-${i + j}`));
        await call(client, client.add, { key, type, params, elements: batch, texts: [] }, { timeoutMs });
      }
      const fillSeconds = (performance.now() - t0) / 1000;
      const addP50Ms = await p50((i) => call(client, client.add, { key, elements: [Buffer.from(`one-${i}`)], texts: [] }, { timeoutMs }));
      const queryP50Ms = await p50((i) => call(client, client.query, QueryRequest.fromPartial({ key, elements: [Buffer.from(`fill-${i}`)] }), { timeoutMs }));
      const removeP50Ms = type === ObjectType.ORCF || type === ObjectType.AWSET_PROB ? await p50((i) => call(client, client.remove, { key, elements: [Buffer.from(`one-${i}`)], texts: [] }, { timeoutMs })) : null;
      const cell = { type: ObjectType[type], capacity, elements, fillSeconds, addP50Ms, queryP50Ms, removeP50Ms };
      console.log(JSON.stringify(cell));
      cells.push(cell);
    }
  }
  client.close();
  await node.stop();
  node = await startNodeProcess(nodeArgs);
  client = replicaClient(node.address);
  for (const cell of cells) {
    const query = async () => {
      const t = performance.now();
      await call(client, client.query, QueryRequest.fromPartial({ key: `${cell.type}-${cell.capacity}`, elements: [Buffer.from("fill-0")] }), { timeoutMs });
      return performance.now() - t;
    };
    cell.coldQueryMs = await query();
    cell.warmQueryMs = await query();
    console.log(`${cell.type} ${cell.capacity} after restart: first Query ${cell.coldQueryMs.toFixed(1)} ms, second ${cell.warmQueryMs.toFixed(1)} ms`);
  }
} finally {
  client.close();
  await node.stop();
  rmSync(root, { recursive: true, force: true });
}

const largest = CAPACITIES.at(-1)!;
const ratio = (type: string, of: (c: Cell) => number) => of(cells.find((c) => c.type === type && c.capacity === largest)!) / of(cells.find((c) => c.type === type && c.capacity === CAPACITIES[0])!);
const targets = TYPES.flatMap((t) => [
  target(`${ObjectType[t]} single-element Add p50 at capacity ${largest} (half full) within 2x of capacity ${CAPACITIES[0]}`, "<= 2x", ratio(ObjectType[t], (c) => c.addP50Ms), (m) => m <= 2, command),
  target(`${ObjectType[t]} Query p50 at capacity ${largest} (half full) within 2x of capacity ${CAPACITIES[0]}`, "<= 2x", ratio(ObjectType[t], (c) => c.queryP50Ms), (m) => m <= 2, command),
]);
const path = writeResults("filter-writes", {
  params: { quick, capacities: CAPACITIES, types: TYPES.map((t) => ObjectType[t]), probabilisticSetSizes: SET_SIZES, samples: SAMPLES, batch: BATCH, sync: "fsync", fill: "half of the capacity, in batches" },
  metrics: { cells },
  targets,
});
await drawChart(path);
printTargets(targets);
