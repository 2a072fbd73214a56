// False-positive probability of an Age-Partitioned Bloom Filter from its slices' fill ratios.
//
// A query answers "present" when some k consecutive logical slices all have the probed bit set.
// Treating slice i's bit as an independent Bernoulli(r_i) draw, the FP probability is the chance
// of a run of at least k ones among the k+l draws (the seed-000 digest, section 4.4 [derived]),
// computed exactly by a dynamic programme over the length of the current run of ones.

/**
 * P(a run of >= k consecutive ones) for independent bits with P(bit i = 1) = ratios[i], in the
 * given (logical) order.
 */
export function runProbability(ratios: readonly number[], k: number): number {
  if (k < 1) return 1;
  // alive[j]: probability that no run of k was seen yet and the current run of ones has length j.
  let alive = new Float64Array(k);
  alive[0] = 1;
  let found = 0;
  for (const r of ratios) {
    const next = new Float64Array(k);
    let total = 0;
    for (let j = 0; j < k; j++) total += alive[j]!;
    next[0] = total * (1 - r);
    for (let j = 0; j + 1 < k; j++) next[j + 1] = alive[j]! * r;
    found += alive[k - 1]! * r;
    alive = next;
  }
  return found;
}

/**
 * The steady-state maximum fill ratios of the seed's Eq. 4: 1/2k, 2/2k, …, k/2k for the active
 * slices, then 1/2 for the l older ones.
 */
export function steadyStateRatios(k: number, l: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < k; i++) out.push((i + 1) / (2 * k));
  for (let i = 0; i < l; i++) out.push(0.5);
  return out;
}

/** The design FP rate of a (k, l) configuration: runProbability over the Eq. 4 ratios. */
export function designFp(k: number, l: number): number {
  return runProbability(steadyStateRatios(k, l), k);
}
