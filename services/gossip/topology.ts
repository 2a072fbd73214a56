// Overlay graphs for simulations: random connected graphs and the overlays of the Enes et al.
// (ICDE 2019) experiments. A topology maps each node to its sorted neighbour list; edges are
// symmetric.
import { type Random, randomInt, shuffled } from "../common/prng.js";

export type Topology = ReadonlyMap<string, readonly string[]>;

function fromEdges(ids: readonly string[], edges: Iterable<readonly [number, number]>): Topology {
  const adj = new Map<string, Set<string>>(ids.map((id) => [id, new Set<string>()]));
  for (const [a, b] of edges) {
    if (a === b) continue;
    adj.get(ids[a]!)!.add(ids[b]!);
    adj.get(ids[b]!)!.add(ids[a]!);
  }
  return new Map([...adj].map(([id, s]) => [id, [...s].sort()]));
}

/**
 * A random connected graph with average degree about `degree`: a random ring (so it is
 * connected) plus random extra edges until n·degree/2 edges exist.
 */
export function randomConnectedTopology(random: Random, ids: readonly string[], degree: number): Topology {
  const n = ids.length;
  const order = shuffled(random, [...ids.keys()]);
  const edges = new Set<string>();
  const list: Array<[number, number]> = [];
  const addEdge = (a: number, b: number): void => {
    if (a === b) return;
    const k = a < b ? `${a},${b}` : `${b},${a}`;
    if (edges.has(k)) return;
    edges.add(k);
    list.push([a, b]);
  };
  if (n > 1) for (let i = 0; i < n; i++) addEdge(order[i]!, order[(i + 1) % n]!);
  const target = Math.min(Math.floor((n * degree) / 2), (n * (n - 1)) / 2);
  for (let guard = 0; edges.size < target && guard < 100 * target; guard++) {
    addEdge(randomInt(random, n), randomInt(random, n));
  }
  return fromEdges(ids, list);
}

/** Circulant graph: node i is linked to i ± each offset (mod n). */
export function circulantTopology(ids: readonly string[], offsets: readonly number[]): Topology {
  const n = ids.length;
  const edges: Array<[number, number]> = [];
  for (let i = 0; i < n; i++) for (const o of offsets) edges.push([i, (i + o) % n]);
  return fromEdges(ids, edges);
}

/**
 * The 15-node "partialmesh" overlay of Enes et al. (vitorenesduarte/exp, src/exp_overlay.erl):
 * every node has 4 neighbours, i ± 1 and i ± 4 (mod 15), a circulant graph with many cycles.
 */
export function enesPartialMesh(ids: readonly string[]): Topology {
  if (ids.length !== 15) throw new RangeError("the partial mesh of Enes et al. has 15 nodes");
  return circulantTopology(ids, [1, 4]);
}

/** Edges of the 15-node "tree" overlay of Enes et al. (same source; degree at most 3). */
const ENES_TREE_15: ReadonlyArray<readonly [number, number]> = [
  [0, 1], [0, 8], [0, 13], [1, 6], [2, 5], [3, 10], [4, 5], [5, 6],
  [6, 10], [7, 13], [8, 9], [8, 14], [10, 12], [11, 13],
];

export function enesTree(ids: readonly string[]): Topology {
  if (ids.length !== 15) throw new RangeError("the tree of Enes et al. has 15 nodes");
  return fromEdges(ids, ENES_TREE_15);
}

export function isConnected(t: Topology): boolean {
  const ids = [...t.keys()];
  if (ids.length === 0) return true;
  const seen = new Set<string>([ids[0]!]);
  const stack = [ids[0]!];
  while (stack.length > 0) {
    for (const j of t.get(stack.pop()!) ?? []) {
      if (!seen.has(j)) {
        seen.add(j);
        stack.push(j);
      }
    }
  }
  return seen.size === ids.length;
}
