// The overlay half of bench:scale: the gossip simulator (real engine, exchange and memory stores,
// services/gossip/simulator.ts) at growing cluster sizes, full mesh against the finger overlay
// (services/gossip/overlay.ts), Algorithm 2 + BP + RR with one random neighbour per period, as a
// node runs. Workload: for `updatePeriods` periods, `writersPerPeriod` random nodes each add one
// unique element to one set; then periods until every node holds every element, and on until
// every delta buffer is empty (the traffic an update costs ends only there).
import { seededRandom, sample } from "../../services/common/prng.ts";
import { fingerTopology } from "../../services/gossip/overlay.ts";
import { placement } from "../../services/gossip/placement.ts";
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

export interface PlacedRun {
  nodes: number;
  r: number;
  partitions: number;
  updates: number;
  periodsToConverge: number;
  periodsToDrain: number;
  bytes: number;
  bytesPerUpdate: number;
  wallMs: number;
}

/**
 * Placement in the simulator: every node's engine exchanges a partition only with that partition's
 * other owners (placement.ts, R of them), and each update is written at an owner of its key's
 * partition (as routing to owners would do). Converged when every owner of every written key holds
 * its elements; traffic counted until every buffer is empty, as in runScale, after the start-up
 * exchange of empty partitions has settled.
 */
export async function runPlaced(nodes: number, r: number, opts: { partitions?: number; keys?: number; updatePeriods?: number; writersPerPeriod?: number; seed?: number } = {}): Promise<PlacedRun> {
  const started = performance.now();
  const partitions = opts.partitions ?? 256;
  const ids = Array.from({ length: nodes }, (_, i) => `n${String(i).padStart(4, "0")}`);
  const owners = placement(ids, partitions, r);
  const sim = await GossipSimulation.create({ topology: meshTopology(ids), sync: { algorithm: 2, bp: true, rr: true }, partitions, seed: opts.seed ?? 7 });
  for (const id of ids) sim.engine(id).setPartitionPeers((p) => (owners[p]!.includes(id) ? owners[p]! : []));
  // A node starts by shipping each of its partitions whole once (its sequence numbers start past
  // the persisted ones): let that settle, and count only what the updates cost.
  for (let i = 0; i < 20; i++) await sim.step();
  const baseline = sim.traffic.frameBytes + sim.traffic.replyBytes;
  const random = seededRandom(opts.seed ?? 7);
  const keys = Array.from({ length: opts.keys ?? 64 }, (_, i) => `k${i}`);
  const written = new Map<string, string[]>();
  let updates = 0;
  try {
    for (let p = 0; p < (opts.updatePeriods ?? 5); p++) {
      for (let w = 0; w < (opts.writersPerPeriod ?? 4); w++) {
        const key = keys[Math.floor(random() * keys.length)]!;
        const keyOwners = owners[sim.partitionOf(key)]!;
        const at = keyOwners[Math.floor(random() * keyOwners.length)]!;
        const element = `${at}:${p}:${w}`;
        await sim.add(at, key, [Buffer.from(element)]);
        written.set(key, [...(written.get(key) ?? []), element]);
        updates++;
      }
      await sim.step();
    }
    const converged = async () => {
      for (const [key, elements] of written) {
        for (const o of owners[sim.partitionOf(key)]!) {
          const held = await sim.elementsOf(o, key);
          if (!elements.every((e) => held.includes(e))) return false;
        }
      }
      return true;
    };
    let periods = 0;
    for (; !(await converged()) && periods < 200; periods++) await sim.step();
    if (!(await converged())) throw new Error(`placement, ${nodes} nodes: owners did not converge`);
    const buffered = () => ids.some((id) => owners.some((_, p) => sim.engine(id).partitionStats(p).bufferBytes > 0));
    let drain = 0;
    for (; buffered() && drain < 400; drain++) await sim.step();
    if (buffered()) throw new Error(`placement, ${nodes} nodes: delta buffers did not drain`);
    const bytes = sim.traffic.frameBytes + sim.traffic.replyBytes - baseline;
    return { nodes, r, partitions, updates, periodsToConverge: periods, periodsToDrain: drain, bytes, bytesPerUpdate: bytes / updates, wallMs: Math.round(performance.now() - started) };
  } finally {
    await sim.close();
  }
}
