// AWSET_PROB as a served type: the probabilistic add-wins set of seed 000, stored whole, with
// anonymous random 64-bit dots drawn at the node from a cryptographic source (MutatorEnv.randomId),
// removed dots kept in its Age-Partitioned Bloom Filter. Registered with its lattice, its one-record
// layout (store/layouts.ts) and these client operations.
//
// The Add that creates a key fixes its filter's shape (probSetParams); later Adds' parameters are
// ignored, as for the filter types.
import { AWSetProb, AWSetProbLattice } from "./awset-prob.js";
import { apbfByteSize, strategyName } from "./apbf-params.js";
import { probSetParams } from "./awset-prob-params.js";
import { ObjectType, registerLattice } from "./lattice.js";
import { type ClientOperations, type MutatorEnv, registerOperations } from "./operations.js";

/** A dot no replica is using and the filter does not report (bounded: a full filter reports everything). */
function freshDot(s: AWSetProb, env: MutatorEnv): bigint {
  for (let i = 0; i < 64; i++) {
    const d = env.randomId();
    if (s.isFreshDot(d)) return d;
  }
  throw new RangeError("no fresh dot after 64 draws: the tombstone filter reports almost every id");
}

/**
 * Apply each element's delta in place and gather them into one, joined in place (a join into a
 * copy per element made a batch of n elements cost n^2).
 */
function applyAll(s: AWSetProb, elements: readonly Uint8Array[], deltaOf: (e: Uint8Array) => AWSetProb): AWSetProb {
  let delta: AWSetProb | undefined;
  for (const e of elements) {
    const d = deltaOf(e);
    s.joinInPlace(d);
    if (delta === undefined) delta = d;
    else AWSetProbLattice.joinInPlace(delta, d);
  }
  return delta!;
}

const awsetProbOps: ClientOperations<AWSetProb> = {
  create: (p) => AWSetProb.bottom(probSetParams(p)),
  sizeOf: (p) => apbfByteSize(probSetParams(p)),
  add: (s, elements, env) => applyAll(s, elements, (e) => s.addDelta(e, freshDot(s, env))),
  remove: (s, elements) => applyAll(s, elements, (e) => s.removeDelta(e)),
  contains: (s, elements) => elements.map((e) => s.has(e)),
  members: (s) => s.elements(),
  probabilistic: false,
  describe: (s) => ({
    // The chance that the filter reports a dot it never held: an add that vanishes on a join.
    estimatedFalsePositiveRate: s.tombstones.estimatedFp(),
    loadFactor: 0,
    estimatedCount: s.size,
    parameters: { ...s.params, strategy: strategyName(s.params.strategy), bytes: apbfByteSize(s.params) },
  }),
  // A key nothing was added to or removed from yet takes the shape of the next Add.
  isUnset: (s) => s.isBottom(),
};

registerLattice(AWSetProbLattice);
registerOperations(ObjectType.AWSET_PROB, awsetProbOps);
