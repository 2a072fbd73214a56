// The shape of a new AWSET_PROB key's tombstone filter from the parameters of the Add that creates
// it: the seed's (error, capacity, level) table by default, or (k, l, m) given directly.
import { type ApbfParams, UnionStrategy, checkParams, isUnionStrategy, paramsFor } from "./apbf-params.js";
import { FilterParamError } from "./filter-common.js";
import type { CreateParams } from "./operations.js";

export const PROB_SET_DEFAULTS = { capacity: 4096, falsePositiveRate: 0.01, level: 5, strategy: UnionStrategy.CurrentGeneration } as const;

/** The table's error row for a target rate: the smallest e in 1..5 with 10^-e <= rate. */
export function errorRow(rate: number): number {
  if (!(rate > 0 && rate < 1)) throw new FilterParamError(`false_positive_rate must be in (0, 1), got ${rate}`);
  const e = Math.ceil(-Math.log10(rate) - 1e-9);
  if (e > 5) throw new FilterParamError(`false_positive_rate ${rate} is below the APBF table's lowest, 1e-5`);
  return Math.max(1, e);
}

export function probSetParams(p: CreateParams): ApbfParams {
  const strategy = p.unionStrategy ?? PROB_SET_DEFAULTS.strategy;
  if (!isUnionStrategy(strategy)) throw new FilterParamError(`unknown union strategy ${strategy}`);
  try {
    if (p.ageSlices) {
      if (!p.hashes || !p.bits) throw new FilterParamError("age_slices (l) needs hashes (k) and bits (m per slice) too");
      return checkParams({ k: p.hashes, l: p.ageSlices, m: p.bits, strategy });
    }
    const level = p.level ?? PROB_SET_DEFAULTS.level;
    const rate = p.falsePositiveRate || PROB_SET_DEFAULTS.falsePositiveRate;
    return paramsFor(errorRow(rate), p.capacity || PROB_SET_DEFAULTS.capacity, level, strategy);
  } catch (e) {
    if (e instanceof FilterParamError || !(e instanceof RangeError)) throw e;
    throw new FilterParamError(e.message);
  }
}
