// The overlay half of bench:scale: the gossip simulator (real engine, exchange and memory stores,
// services/gossip/simulator.ts) at growing cluster sizes, full mesh against the finger overlay
// (services/gossip/overlay.ts), Algorithm 2 + BP + RR with one random neighbour per period, as a
// node runs. Workload: for `updatePeriods` periods, `writersPerPeriod` random nodes each add one
// unique element to one set; then periods until every node holds every element, and on until
// every delta buffer is empty (the traffic an update costs ends only there).
import { seededRandom, sample } from "../../services/common/prng.ts";
import { fingerTopology } from "../../services/gossip/overlay.ts";
import { GossipSimulation } from "../../services/gossip/simulator.ts";
import type { Topology } from "../../services/gossip/topology.ts";

export type ScaleOverlay = "all" | "fingers";

export interface ScaleRun {
  overlay: ScaleOverlay;
  nodes: number;
  meanDegree: number;
  updates: number;
  /** Periods from the last update until every node held every element. */
  periodsToConverge: number;
  /** Further periods until every neighbour had acknowledged every delta (buffers empty). */
  periodsToDrain: number;
  bytes: number;
  bytesPerUpdate: number;
  /** bytesPerUpdate / (nodes · meanDegree): flat when traffic grows as O(N·k). */
  bytesPerUpdatePerLink: number;
  wallMs: number;
}

function meshTopology(ids: readonly string[]): Topology {
  return new Map(ids.map((id) => [id, ids.filter((x) => x !== id)]));
}

export async function runScale(overlay: ScaleOverlay, nodes: number, opts: { updatePeriods?: number; writersPerPeriod?: number; seed?: number } = {}): Promise<ScaleRun> {
  const started = performance.now();
  const updatePeriods = opts.updatePeriods ?? 5;
  const writers = opts.writersPerPeriod ?? 4;
  const ids = Array.from({ length: nodes }, (_, i) => `n${String(i).padStart(4, "0")}`);
  const topology = overlay === "all" ? meshTopology(ids) : fingerTopology(ids);
  const sim = await GossipSimulation.create({ topology, sync: { algorithm: 2, bp: true, rr: true }, partitions: 1, seed: opts.seed ?? 7 });
  const random = seededRandom(opts.seed ?? 7);
  let updates = 0;
  try {
    for (let p = 0; p < updatePeriods; p++) {
      for (const id of sample(ids, writers, random)) {
        await sim.add(id, "scale", [Buffer.from(`${id}:${p}`)]);
        updates++;
      }
      await sim.step();
    }
    const periods = await sim.runUntilConverged(40 * Math.ceil(Math.log2(nodes) + 1));
    if (periods < 0) throw new Error(`${overlay}, ${nodes} nodes: did not converge`);
    // The traffic of an update does not end at convergence: Algorithm 2 keeps sending a delta to
    // each neighbour until that neighbour acknowledges it. Count until every buffer is empty.
    let drain = 0;
    const buffered = () => ids.some((id) => sim.engine(id).partitionStats(0).bufferBytes > 0);
    for (; buffered() && drain < 40 * nodes; drain++) await sim.step();
    if (buffered()) throw new Error(`${overlay}, ${nodes} nodes: delta buffers did not drain`);
    const t = sim.traffic;
    const bytes = t.frameBytes + t.replyBytes;
    const meanDegree = [...topology.values()].reduce((a, n) => a + n.length, 0) / nodes;
    return {
      overlay,
      nodes,
      meanDegree,
      updates,
      periodsToConverge: periods,
      periodsToDrain: drain,
      bytes,
      bytesPerUpdate: bytes / updates,
      bytesPerUpdatePerLink: bytes / updates / (nodes * meanDegree),
      wallMs: Math.round(performance.now() - started),
    };
  } finally {
    await sim.close();
  }
}
