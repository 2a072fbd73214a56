// The bounded-degree gossip overlay: which live members a node gossips with, instead of all of
// them. Members are placed on a ring by a hash of their id; a node links to the members at ring
// distance 1, 2, 4, 8, ... (below the member count) on both sides. So the degree is at most
// 2·ceil(log2 n), the ring edges keep the graph connected, any member is within O(log n) hops,
// and the links are symmetric (a's successor at distance d has a as its predecessor at d). Every
// node computes it from its own membership view, so a failure or a join repairs it at the next
// membership change, with no protocol of its own; while views differ, each node still links to
// its own ring neighbours. Pure and deterministic.
import { fnv1a32 } from "./partition.js";
import type { Topology } from "./topology.js";

export type OverlayKind = "all" | "fingers";

const encoder = new TextEncoder();

/** The members in ring order: by the hash of their id, ties by id. */
export function ringOrder(members: Iterable<string>): string[] {
  return [...new Set(members)]
    .map((id) => ({ id, h: fnv1a32(encoder.encode(id)) }))
    .sort((a, b) => a.h - b.h || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((x) => x.id);
}

/** The finger distances of a ring of n members: 1, 2, 4, ... below n. */
function distances(n: number): number[] {
  const out: number[] = [];
  for (let d = 1; d < n; d *= 2) out.push(d);
  return out;
}

/** self's neighbours among members (self included or not), sorted. */
export function fingerNeighbours(self: string, members: Iterable<string>): string[] {
  const ring = ringOrder([self, ...members]);
  const n = ring.length;
  const at = ring.indexOf(self);
  const out = new Set<string>();
  for (const d of distances(n)) {
    out.add(ring[(at + d) % n]!);
    out.add(ring[(at - d + n * d) % n]!);
  }
  out.delete(self);
  return [...out].sort();
}

/** The neighbours of self under an overlay kind: every other member, or its fingers. */
export function overlayNeighbours(kind: OverlayKind, self: string, members: Iterable<string>): string[] {
  if (kind === "all") return [...new Set(members)].filter((m) => m !== self).sort();
  return fingerNeighbours(self, members);
}

/** The whole finger overlay over ids (for simulations). */
export function fingerTopology(ids: readonly string[]): Topology {
  return new Map(ids.map((id) => [id, fingerNeighbours(id, ids)]));
}
