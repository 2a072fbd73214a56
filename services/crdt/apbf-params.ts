// Parameters of an Age-Partitioned Bloom Filter (APBF): the (k, l) table, the slice size m, the
// generation size g and the byte size as seed 000 counts it. Pure arithmetic, no filter state.
//
// Sources: the (k, l) table and the m rule are from the seed-000 digest, section 4.4 (the author's
// public "filte-rs" code, the seed's ref [5]); g = ⌊m·ln2/k⌋ is the seed's Eq. 3 (digest 4.4); the
// byte counts are those of the seed's §5.3.1/§5.3.2 (digest 6.2, 6.3).

/** The three union strategies of the seed (§4.5.2, digest 5.3). The number is the wire value. */
export const UnionStrategy = {
  WholeFilter: 0,
  ActiveSlices: 1,
  CurrentGeneration: 2,
} as const;
export type UnionStrategy = (typeof UnionStrategy)[keyof typeof UnionStrategy];

export function isUnionStrategy(x: number): x is UnionStrategy {
  return x === 0 || x === 1 || x === 2;
}

export function strategyName(s: UnionStrategy): string {
  return s === UnionStrategy.WholeFilter ? "WholeFilter" : s === UnionStrategy.ActiveSlices ? "ActiveSlices" : "CurrentGeneration";
}

/** Everything that fixes a filter's shape. Two filters can be unioned only if these are equal. */
export interface ApbfParams {
  /** Active slices (hash functions an element is inserted with). */
  readonly k: number;
  /** Older slices kept for queries only. */
  readonly l: number;
  /** Bits per slice, a multiple of 64. */
  readonly m: number;
  readonly strategy: UnionStrategy;
}

/** Bounds enforced on every filter (and by the decoder): hash indices fit a byte, m stays sane. */
export const MAX_SLICES = 256;
export const MAX_SLICE_BITS = 1 << 24;

/**
 * (k, l) by error (FP = 10^-error) and level, seed-000 digest section 4.4 ([ref-code] table).
 * Row index error-1, column index level; level 5 does not exist for error 1.
 */
const KL_TABLE: readonly (readonly (readonly [number, number])[])[] = [
  [[4, 3], [5, 7], [6, 14], [7, 28], [8, 56]],
  [[7, 5], [8, 8], [9, 14], [10, 25], [11, 46], [12, 88]],
  [[10, 7], [11, 9], [12, 14], [13, 23], [14, 40], [15, 74]],
  [[14, 11], [15, 15], [16, 22], [17, 36], [18, 63], [19, 117]],
  [[17, 13], [18, 16], [19, 22], [20, 33], [21, 54], [22, 95]],
];

/** (k, l) for a target error and level; throws RangeError outside the table. */
export function tableKL(error: number, level: number): { k: number; l: number } {
  const row = Number.isInteger(error) ? KL_TABLE[error - 1] : undefined;
  const cell = row !== undefined && Number.isInteger(level) ? row[level] : undefined;
  if (cell === undefined) throw new RangeError(`no APBF configuration for error ${error}, level ${level}: error is 1 to 5 (a false-positive rate of 10^-error) and level 0 to 5 (0 to 4 with error 1)`);
  return { k: cell[0], l: cell[1] };
}

/** Slice bits for a capacity: m = ceil(k·C / (l·ln2)), rounded up to a multiple of 64. */
export function sliceBits(k: number, l: number, capacity: number): number {
  if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  const raw = Math.ceil((k * capacity) / (l * Math.LN2));
  return Math.ceil(raw / 64) * 64;
}

/** Parameters from (error, capacity, level), the seed's high-level constructor. */
export function paramsFor(error: number, capacity: number, level: number, strategy: UnionStrategy): ApbfParams {
  const { k, l } = tableKL(error, level);
  return checkParams({ k, l, m: sliceBits(k, l, capacity), strategy });
}

/** Elements per generation, g = ⌊m·ln2 / k⌋ (seed Eq. 3): k generations fill a slice to 1/2. */
export function generationSize(p: { k: number; m: number }): number {
  return Math.floor((p.m * Math.LN2) / p.k);
}

/**
 * The filter's size in bytes as the seed counts it: the bit arrays only, (k+l)·m/8, plus k·m/8 for
 * the Current-Generation shadow slices (digest 4.4 "Memory", 6.2). The encoding adds a header.
 */
export function apbfByteSize(p: ApbfParams): number {
  const slices = p.k + p.l + (p.strategy === UnionStrategy.CurrentGeneration ? p.k : 0);
  return (slices * p.m) / 8;
}

/** Validate a parameter set, returning it; throws RangeError with the first problem. */
export function checkParams(p: ApbfParams): ApbfParams {
  const { k, l, m } = p;
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be a positive integer, got ${k}`);
  if (!Number.isInteger(l) || l < 1) throw new RangeError(`l must be a positive integer, got ${l}`);
  if (k + l > MAX_SLICES) throw new RangeError(`k + l must be at most ${MAX_SLICES}, got ${k + l}`);
  if (!Number.isInteger(m) || m < 64 || m % 64 !== 0 || m > MAX_SLICE_BITS) {
    throw new RangeError(`m must be a multiple of 64 in [64, ${MAX_SLICE_BITS}], got ${m}`);
  }
  if (!isUnionStrategy(p.strategy)) throw new RangeError(`unknown union strategy ${String(p.strategy)}`);
  if (generationSize(p) < 1) throw new RangeError(`m = ${m} is too small for k = ${k}: a generation would hold no element`);
  return p;
}

export function sameParams(a: ApbfParams, b: ApbfParams): boolean {
  return a.k === b.k && a.l === b.l && a.m === b.m && a.strategy === b.strategy;
}
