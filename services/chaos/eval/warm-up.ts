// The warm-up of a fresh cell group, before its first cell is measured. Node processes start
// cold: V8 compiles the hot paths (gRPC, the store, the gossip receive path, watches) during
// their first tens of seconds of load, on the same two cores the nodes share, and every node
// starts by shipping the full state of every partition to every neighbour (acks start at 0). A
// cell measured on that counted both: the first cell of each group (the no-loss one, which the
// lag targets read) used 1.3-1.5x the CPU of the cells after it and its lag p95 was up to twice
// theirs. So each group first runs the cells' own workload on keys of its own, with the lag
// probe following it, waits until every node reads the same, and deletes those keys (a deleted
// set keeps only its header, so a full-state mode ships nothing more in the cells after).
import { seededRandom } from "../../common/prng.js";
import { readUntilIdentical } from "../final-reads.js";
import { HistoryRecorder } from "../history.js";
import { Workload, type WorkloadNode } from "../workload.js";
import { deleteEverywhere } from "./delete-everywhere.js";
import type { EvalGrid } from "./grid.js";
import { LagProbe } from "./lag-probe.js";

export interface WarmUpReport {
  /** Operations the warm-up workload ran (acknowledged or not). */
  operations: number;
  /** Lag probes the warm-up took (discarded). */
  probes: number;
  /** From the end of the workload until every node read the same warm-up keys (ms). */
  settledMs: number;
}

/**
 * Run the cells' workload for grid.warmUpMs on warm-up keys, probe lag meanwhile, wait until every
 * node reads the same, then delete the keys everywhere. Nothing of it is counted in any cell.
 */
export async function warmUp(nodes: readonly WorkloadNode[], grid: Pick<EvalGrid, "warmUpMs" | "clients" | "thinkMs" | "probeEveryMs">, tag: string): Promise<WarmUpReport> {
  const keys = Array.from({ length: 4 }, (_, i) => `eval-warm-up-${tag}-${i}`);
  const lagKey = `eval-warm-up-${tag}-lag`;
  const random = seededRandom(0x5eed ^ tag.length);
  const history = new HistoryRecorder();
  const workload = new Workload({ nodes, clients: 2 * grid.clients, keys, history, random, opTimeoutMs: 5000, thinkMs: 0 });
  const probe = new LagProbe({ nodes, key: lagKey, random, probeEveryMs: grid.probeEveryMs, tag: `warm-${tag}`, boundMs: 10_000 });
  let probes = 0;
  try {
    await probe.start();
    probe.begin();
    workload.start();
    await new Promise((r) => setTimeout(r, grid.warmUpMs));
    await workload.stop();
    const report = await probe.stop();
    probes = report.samples.length + report.unseen;
  } finally {
    workload.close();
    probe.close();
  }
  const stopAt = Date.now();
  const settled = await readUntilIdentical(nodes, keys, { boundMs: 60_000, intervalMs: 100 });
  if (settled.identicalAt === null) throw new Error("warm-up: the warm-up keys did not become identical on every node within 60 s");
  const settledMs = settled.identicalAt - stopAt;
  const { emptiedMs } = await deleteEverywhere(nodes, [...keys, lagKey]);
  if (emptiedMs === null) throw new Error("warm-up: the deleted warm-up keys did not read empty on every node within 60 s");
  return { operations: history.size, probes, settledMs };
}
