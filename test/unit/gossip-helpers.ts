// Shared fixtures of the gossip tests: a grow-only set of strings as the simplest payload type.
import {
  type Algorithm1Config,
  type Algorithm2Config,
  AntiEntropyEngine,
  type FrameItem,
  type OutgoingFrame,
  type PayloadOps,
  PayloadKind,
  seededRandom,
} from "../../services/gossip/index.js";

export type GSet = ReadonlySet<string>;

export const gsetOps: PayloadOps<GSet> = {
  bottom: () => new Set(),
  join: (a, b) => new Set([...a, ...b]),
  isBottom: (p) => p.size === 0,
  sizeBytes: (p) => [...p].reduce((n, s) => n + s.length, 0),
};

export const S = (...xs: string[]): GSet => new Set(xs);

/** Sorted contents, for deepEqual. */
export const items = (p: GSet | undefined): string[] => (p === undefined ? [] : [...p].sort());

export function alg2(
  sync: Partial<Omit<Algorithm2Config, "algorithm">> = {},
  opts: { partitions?: number; neighbours?: string[]; seed?: number } = {},
): AntiEntropyEngine<GSet> {
  return new AntiEntropyEngine<GSet>({
    self: "a",
    ops: gsetOps,
    random: seededRandom(opts.seed ?? 1),
    sync: { algorithm: 2, bp: false, rr: false, fanout: "all", ...sync },
    partitions: opts.partitions ?? 2,
    neighbours: opts.neighbours ?? ["b", "c"],
  });
}

export function alg1(
  sync: Partial<Omit<Algorithm1Config, "algorithm">> = {},
  opts: { partitions?: number; neighbours?: string[] } = {},
): AntiEntropyEngine<GSet> {
  return new AntiEntropyEngine<GSet>({
    self: "a",
    ops: gsetOps,
    random: seededRandom(1),
    sync: { algorithm: 1, transitive: true, choose: "delta", ...sync },
    partitions: opts.partitions ?? 2,
    neighbours: opts.neighbours ?? ["b", "c"],
  });
}

/** The frame addressed to one neighbour, or undefined. */
export function frameTo<P>(frames: OutgoingFrame<P>[], to: string): OutgoingFrame<P> | undefined {
  const matching = frames.filter((f) => f.to === to);
  if (matching.length > 1) throw new Error(`two frames to ${to} in one tick`);
  return matching[0];
}

/** A readable summary of a frame item: [partition, "delta"|"state", seq, contents]. */
export function describeItem(item: FrameItem<GSet>): [number, string, number, string[]] {
  return [item.partition, item.kind === PayloadKind.STATE ? "state" : "delta", item.seq, items(item.payload)];
}

export function summary(frames: OutgoingFrame<GSet>[]): Record<string, Array<[number, string, number, string[]]>> {
  const out: Record<string, Array<[number, string, number, string[]]>> = {};
  for (const f of frames) out[f.to] = f.items.map(describeItem);
  return out;
}

export const delta = (partition: number, seq: number, fresh?: GSet) => ({
  partition,
  kind: PayloadKind.DELTA as const,
  seq,
  fresh,
});

/** Three simulated nodes, each the neighbour of the other two. */
export const RING3: ReadonlyMap<string, string[]> = new Map([
  ["a", ["b", "c"]],
  ["b", ["a", "c"]],
  ["c", ["a", "b"]],
]);

/** Algorithm 2 with BP and RR, as nodes run it by default. */
export const ALG2_BP_RR = { algorithm: 2 as const, bp: true, rr: true };
