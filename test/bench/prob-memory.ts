// Memory of the APBF causal context against classic version-vector contexts (seed 000 §5.3.1,
// Figs 5.1 and 5.2; digest section 6.2), and the crossover replica counts.
//
// APBF bytes: measured from an allocated filter (the bit arrays plus, for Current Generation, the
// shadow slices), checked against apbfByteSize (services/crdt/apbf-params.ts). It does not depend
// on the number of replicas.
// Classic contexts, with the per-entry sizes the digest gives (section 6.2):
//   - vector of u64 counters: 8 bytes per replica id, V(N) = 8·N;
//   - map UUID → u64 in a Rust hashbrown table: 24-byte entries (16-byte UUID + 8-byte counter)
//     plus 1 control byte per bucket, buckets = the next power of two of ⌈8N/7⌉ (7/8 maximum load;
//     4 buckets below 4 entries, 8 below 8), M(N) = 25·buckets(N).
// Crossover: the smallest N at which the classic context is larger than the APBF,
//   vector: N* = ⌊S/8⌋ + 1 (break-even S/8);  map: N* = min{N : 25·buckets(N) > S}.
import { Apbf } from "../../services/crdt/apbf.js";
import { type ApbfParams, UnionStrategy, apbfByteSize, paramsFor } from "../../services/crdt/apbf-params.js";

export const VECTOR_ENTRY_BYTES = 8;
export const MAP_ENTRY_BYTES = 24;
export const MAP_CONTROL_BYTES = 1;

/** Bytes of the allocated bit arrays (slices and shadows) of an empty filter with these parameters. */
export function measuredApbfBytes(p: ApbfParams): number {
  const f = Apbf.create(p);
  return f.bits.byteLength + f.shadows.byteLength;
}

export function vectorBytes(n: number): number {
  return VECTOR_ENTRY_BYTES * n;
}

/** hashbrown bucket count for n entries (capacity_to_buckets as the digest describes it). */
export function mapBuckets(n: number): number {
  if (n < 4) return 4;
  if (n < 8) return 8;
  let b = 1;
  const need = Math.ceil((n * 8) / 7);
  while (b < need) b *= 2;
  return b;
}

export function mapBytes(n: number): number {
  return (MAP_ENTRY_BYTES + MAP_CONTROL_BYTES) * mapBuckets(n);
}

/** Smallest n in [1, limit] with classic(n) > apbf, or null. */
export function crossover(apbf: number, classic: (n: number) => number, limit = 1 << 22): number | null {
  for (let n = 1; n <= limit; n++) if (classic(n) > apbf) return n;
  return null;
}

export interface MemoryFigures {
  configs: Array<{ name: string; error: number; capacity: number; level: number; strategy: string; k: number; l: number; m: number; measuredBytes: number; formulaBytes: number }>;
  crossovers: Array<{ capacity: number; apbfBytes: number; vectorBreakEven: number; vectorCrossover: number | null; mapCrossover: number | null }>;
  formula: string;
}

export function memoryFigures(): MemoryFigures {
  const cfg = (name: string, error: number, capacity: number, strategy: UnionStrategy) => {
    const p = paramsFor(error, capacity, 5, strategy);
    return {
      name, error, capacity, level: 5,
      strategy: strategy === UnionStrategy.CurrentGeneration ? "CurrentGeneration (with shadows)" : "ActiveSlices (no shadows; Whole Filter has the same size)",
      k: p.k, l: p.l, m: p.m,
      measuredBytes: measuredApbfBytes(p),
      formulaBytes: apbfByteSize(p),
    };
  };
  const configs = [
    cfg("error 2, capacity 4096, level 5, Current Generation", 2, 4096, UnionStrategy.CurrentGeneration),
    cfg("error 3, capacity 4096, level 5, no shadows", 3, 4096, UnionStrategy.ActiveSlices),
    cfg("error 5, capacity 4096, level 5, no shadows", 5, 4096, UnionStrategy.ActiveSlices),
    cfg("error 2, capacity 2048, level 5, Current Generation", 2, 2048, UnionStrategy.CurrentGeneration),
  ];
  const crossovers = [4096, 2048].map((capacity) => {
    const apbfBytes = configs.find((c) => c.capacity === capacity && c.error === 2)!.measuredBytes;
    return {
      capacity,
      apbfBytes,
      vectorBreakEven: apbfBytes / VECTOR_ENTRY_BYTES,
      vectorCrossover: crossover(apbfBytes, vectorBytes),
      mapCrossover: crossover(apbfBytes, mapBytes),
    };
  });
  return {
    configs,
    crossovers,
    formula:
      "S = measured APBF bytes (bits + CG shadows). Vector of u64: V(N) = 8N, APBF smaller for N > S/8. " +
      "Map UUID->u64 (hashbrown): M(N) = (24 + 1) * buckets(N), buckets(N) = nextPow2(ceil(8N/7)) (4 if N<4, 8 if N<8); crossover = min{N : M(N) > S}.",
  };
}
