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
import { TombstonesSaturatedError } from "./errors.js";
import { type ClientOperations, type MutatorEnv, registerOperations } from "./operations.js";

/** A dot no replica is using and the filter does not report (bounded: a full filter reports everything). */
function freshDot(s: AWSetProb, env: MutatorEnv): bigint {
  for (let i = 0; i < 64; i++) {
    const d = env.randomId();
    if (s.isFreshDot(d)) return d;
  }
  throw new TombstonesSaturatedError(64, s.tombstones.estimatedFp());
}

/**
 * Join each element's delta into the state in turn. Returns their join (what gossip spreads) with
 * the joins made as its steps (AWSetProb.steps, what a state log replays). Deltas with no
 * tombstone (adds of new elements) that follow each other are one step: their joins only add
 * dots, so joining their join is the same. Gathered in place: a join into a copy per element made
 * a batch of n elements cost n^2.
 */
function applyAll(s: AWSetProb, elements: readonly Uint8Array[], deltaOf: (e: Uint8Array) => AWSetProb): AWSetProb {
  const steps: AWSetProb[] = [];
  for (const e of elements) {
    const d = deltaOf(e);
    s.joinInPlace(d);
    const last = steps.at(-1);
    if (last !== undefined && last.tombstones.isEmpty() && d.tombstones.isEmpty()) AWSetProbLattice.joinInPlace(last, d);
    else steps.push(d);
  }
  if (steps.length === 1) return steps[0]!;
  // The batch's delta is a delta-group of its steps.
  const delta = AWSetProbLattice.clone(steps[0]!);
  for (let i = 1; i < steps.length; i++) delta.joinGroupInPlace(steps[i]!);
  delta.steps = steps;
  return delta;
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
