// AWSET_PROB: the Lattice implementation of the probabilistic add-wins set (awset-prob-state.ts)
// with its codec (awset-prob-codec.ts). Not registered here: registration is wired elsewhere.
//
// A key's filter shape is chosen by the Add that creates it (awset-prob-operations.ts); states of
// any shape decode, and joins of two shapes keep the greater (awset-prob-state.ts header). ⊥ uses
// the seed's default configuration: APBF error 2, capacity 4096, level 5, Current Generation
// (seed 000 §5.3.3 and digest 6.1), the shape a key gets when its first Add names none.
// Notes on the Lattice contract for a structure that forgets and has false positives:
//   - delta-groups take later deltas without refusing their live dots (joinGroupInPlace,
//     awset-prob-state.ts): the group keeps every dot its replica kept.
//   - join is x ⊔ y from x's side; it is idempotent, its store is commutative, its filter is not
//     (awset-prob-state.ts header, apbf-union.ts header). leq(a, b) means "b ⊔ a = b".
//   - context(s) is an empty CausalContext: the set keeps no exact causal context (its removed
//     dots sit in a filter that cannot list them), so there is nothing exact to report.
//   - decompose(s): one state per live dot (empty filter) plus one state holding the whole filter;
//     these join back to s exactly unless the filter reports one of s's own live dots (a false
//     positive), in which case [s] is returned, which also joins back to s.
//   - difference(a, b) is a conservative over-approximation: the live dots of a that b neither
//     holds nor has tombstoned, plus a's whole filter when joining it would change b.
import { createHash } from "node:crypto";
import { CausalContext } from "./causal-context.js";
import { type ApbfParams, UnionStrategy, paramsFor, sameParams } from "./apbf-params.js";
import { AWSetProb, DotBuffer, type ElementKey, type ProbDot, dotBytes } from "./awset-prob-state.js";
import { awsetProbEncodedSize, decodeAWSetProb, encodeAWSetProb, encodeAWSetProbEntries } from "./awset-prob-codec.js";
import { type Lattice, ObjectType, joinIntoCopy } from "./lattice.js";
import { Apbf } from "./apbf.js";

export { AWSetProb, type DotInput, type ProbDot, dotBytes, toDot } from "./awset-prob-state.js";
export { awsetProbEncodedSize, decodeAWSetProb, encodeAWSetProb } from "./awset-prob-codec.js";

/** The seed's default tombstone filter: error 2, capacity 4096, level 5, Current Generation. */
export const DEFAULT_AWSET_PROB_PARAMS: ApbfParams = paramsFor(2, 4096, 5, UnionStrategy.CurrentGeneration);

/** Does the filter report one of the state's own live dots? */
function hasSelfFalsePositive(s: AWSetProb): boolean {
  if (s.entries.size === 0 || s.tombstones.isEmpty()) return false;
  const reports = s.tombstones.querier();
  const dot = new DotBuffer();
  for (const dots of s.entries.values()) for (const d of dots) if (reports(dot.of(d))) return true;
  return false;
}

/** One element's dots with no tombstone; listed (nothing removed) when listed is true. */
function liveDotState(params: ApbfParams, k: ElementKey, dots: Iterable<ProbDot>, listed: boolean): AWSetProb {
  return AWSetProb.fromParts(new Map([[k, new Set(dots)]]), Apbf.create(params), listed ? new Set() : undefined);
}

/** A copy of s's list of removed dots when part carries s's filter, an empty one when not; none when s has none. */
function listFor(s: AWSetProb, withFilter: boolean): Set<ProbDot> | undefined {
  if (s.removed === undefined) return undefined;
  return withFilter ? new Set(s.removed) : new Set();
}

export function makeAWSetProbLattice(params: ApbfParams): Lattice<AWSetProb> {
  const L: Lattice<AWSetProb> = {
    type: ObjectType.AWSET_PROB,
    name: "AWSET_PROB",
    bottom: () => AWSetProb.bottom(params),
    isBottom: (s) => s.isBottom(),
    clone: (s) => s.clone(),
    join: joinIntoCopy((s) => s.clone(), (t, o) => t.joinInPlace(o)),
    joinInPlace: (t, o) => t.joinInPlace(o),
    joinGroupInPlace: (g, later) => g.joinGroupInPlace(later),
    leq: (a, b) => !b.clone().joinInPlace(a),
    equals: (a, b) => a.equals(b),
    decompose(s) {
      if (s.isBottom()) return [];
      if (hasSelfFalsePositive(s)) return [s.clone()];
      const out: AWSetProb[] = [];
      const listed = s.removed !== undefined;
      for (const [k, dots] of s.entries) for (const d of dots) out.push(liveDotState(s.params, k, [d], listed));
      if (!s.tombstones.isEmpty()) out.push(AWSetProb.fromParts(new Map(), s.tombstones.clone(), listFor(s, true)));
      return out;
    },
    difference(a, b) {
      // Another shape: b cannot answer for a's filter, so all of a is new (conservative).
      if (!sameParams(a.params, b.params) && !b.isBottom()) return a.clone();
      if (hasSelfFalsePositive(a)) return L.leq(a, b) ? L.bottom() : a.clone();
      const entries = new Map<ElementKey, Set<ProbDot>>();
      for (const [k, dots] of a.entries) {
        const fresh = [...dots].filter((d) => !b.holds(d) && !b.tombstones.query(dotBytes(d)));
        if (fresh.length > 0) entries.set(k, new Set(fresh));
      }
      // a's filter is new to b if its union would change b's filter or it removes a dot b holds.
      const probe = b.clone();
      const filterIsNew = probe.joinInPlace(AWSetProb.fromParts(new Map(), a.tombstones, a.removed));
      const filter = filterIsNew ? a.tombstones.clone() : Apbf.create(a.params);
      return AWSetProb.fromParts(entries, filter, listFor(a, filterIsNew));
    },
    // One walk of the live dots instead of two: difference asks other's filter about every dot of
    // a copy of target (43.9 ms at 50k elements, 22.7 of them the copy), then the join asks again.
    joinInPlaceWithNewPart(target, other) {
      if (!sameParams(target.params, other.params) || hasSelfFalsePositive(other)) {
        const newPart = L.difference(other, target);
        return { changed: target.joinInPlace(other), newPart };
      }
      // Only this join's callers pass the new part on: the others do not pay for this walk.
      const listedNew = target.unknownRemoves(other);
      const { changed, adopted, dropped, filterNew } = target.joinSameShape(other);
      const entries = new Map<ElementKey, Set<ProbDot>>();
      for (const [d, k] of adopted) {
        const dots = entries.get(k);
        if (dots === undefined) entries.set(k, new Set([d]));
        else dots.add(d);
      }
      // Listed: the removes of a listed delta that were new here, or the dots a whole state's
      // join dropped (joinSameShape).
      const removed = !filterNew ? new Set<ProbDot>() : other.removed !== undefined ? new Set(listedNew) : new Set(dropped);
      return { changed, newPart: AWSetProb.fromParts(entries, filterNew ? other.tombstones.clone() : Apbf.create(other.params), removed) };
    },
    context: () => new CausalContext(),
    encode: encodeAWSetProb,
    encodedSize: awsetProbEncodedSize,
    decode: (bytes, _now, bound) => decodeAWSetProb(bytes, bound?.maxFilterBytes),
    size: (s) => s.size,
    // Unions of the tombstone filter need not end equal on every replica (apbf-union.ts): the
    // digest covers the live entries, which converged replicas do share.
    readsDigest: (s) => createHash("sha256").update(encodeAWSetProbEntries(s)).digest().subarray(0, 16),
    settlesByState: true,
  };
  return L;
}

/** The AWSET_PROB lattice with the seed's default filter. Not registered (see the header). */
export const AWSetProbLattice: Lattice<AWSetProb> = makeAWSetProbLattice(DEFAULT_AWSET_PROB_PARAMS);
