// The nearest-rank percentile: the smallest value with at least p% of the values at or below it.

/** The p-th percentile (0..100) of an ascending, non-empty array, by nearest rank. */
export function nearestRank(ascending: readonly number[], p: number): number {
  return ascending[Math.min(ascending.length - 1, Math.max(0, Math.ceil((p / 100) * ascending.length) - 1))]!;
}
