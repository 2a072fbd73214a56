// Placement at scale, for bench:scale: partitions per node and partition copies moved when one
// member joins or leaves, computed with the placement the nodes use (gossip/placement.ts) over
// synthetic member ids. Pure arithmetic on the placement table: no gossip is simulated.
import { copiesToMove, ownedBy, placement } from "../../services/gossip/placement.ts";

export interface PlacementRun {
  nodes: number;
  partitions: number;
  r: number;
  /** Partitions per node: mean (P·R/N), max and min over the members. */
  perNode: { mean: number; max: number; min: number; maxOverMean: number };
  /** Share of all partition copies a join moves (mean over the sampled joins), and the ideal 1/(N+1). */
  joinMoved: number;
  joinIdeal: number;
  /** Share of all partition copies a leave moves (mean over the sampled leaves), and the ideal 1/N. */
  leaveMoved: number;
  leaveIdeal: number;
  samples: number;
}

const memberId = (i: number) => `node-${i.toString(36)}-${(i * 2654435761) >>> 0}`;

export function runPlacement(nodes: number, partitions: number, r: number, samples: number): PlacementRun {
  const members = Array.from({ length: nodes }, (_, i) => memberId(i));
  const table = placement(members, partitions, r);
  const counts = members.map((m) => ownedBy(m, table).length);
  const mean = (partitions * Math.min(r, nodes)) / nodes;
  const total = partitions * Math.min(r, nodes);
  let joined = 0;
  let left = 0;
  for (let s = 0; s < samples; s++) {
    joined += copiesToMove(table, placement([...members, memberId(nodes + s)], partitions, r)) / total;
    const leaver = members[(s * 7919) % nodes]!;
    left += copiesToMove(table, placement(members.filter((m) => m !== leaver), partitions, r)) / total;
  }
  const max = Math.max(...counts);
  return {
    nodes,
    partitions,
    r,
    perNode: { mean, max, min: Math.min(...counts), maxOverMean: max / mean },
    joinMoved: joined / samples,
    joinIdeal: 1 / (nodes + 1),
    leaveMoved: left / samples,
    leaveIdeal: 1 / nodes,
    samples,
  };
}
