// The three APBF union strategies of seed 000 §4.5.2 (digest 5.3), each joining a remote filter
// into a local one IN PLACE (unionInPlace); union() is the pure form (clone, then join in place).
//
//   Whole Filter        every physical slot p ORs the remote's slot p (both carry hash index p).
//   Active Slices       each local active slice ORs the remote's active slice with the same hash
//                       (and from a young remote every slice, as Current Generation below).
//   Current Generation  each local active slice, and its shadow, ORs the remote's shadow (the
//                       remote's current generation) of the active slice with the same hash;
//                       from a young remote (its bits within its 3 newest generations, as a
//                       gossip delta-group that shifted on its way), every slice, at about its
//                       age (own addition: youngerGenerations below).
//
// Common rules (own choices, stated so the laws below can be checked):
//   1. Shapes must match (k, l, m, strategy, hash family), else ApbfMismatchError (apbf.ts).
//   2. A union into a filter with no bit set adopts the remote as it is (base, hashes, count,
//      shadows): ⊥ ⊔ x = x, and a new replica learns the whole window, not a single generation.
//   3. A union that sets no new bit changes nothing (not even the generation count).
//   4. Otherwise the generation count becomes max(local count, remote count if the remote's current
//      generation landed in the local one, ⌊n̂₀⌋) where n̂₀ is the insertions slice 0's set bits
//      stand for (n̂ = ln(1 - b/m) / ln(1 - 1/m)); the remote count counts for Active Slices and
//      Current Generation (hash-matched, so the remote's newest elements reach every local active
//      slice) and for Whole Filter only when both filters have the same base.
//   5. Then the fill check of §4.5.2 with the insertion budget of the count rule: an active slice at
//      logical i must stand for fewer than (i+1)·g insertions; the filter shifts by the largest
//      number of positions any active slice needs to move to satisfy this. All active slices are
//      checked, so the shift depends on the resulting bits only. Whole Filter's older slices are not
//      checked: as the seed says, they can fill past 1/2 (its FP rate can exceed the target).
//
// Lattice laws (what the property tests in test/property/apbf-union.test.ts check):
//   - all strategies: idempotent, x ⊔ x = x; ⊥ (no bit set) is an identity, ⊥ ⊔ x = x = x ⊔ ⊥, up
//     to the alignment of filters with no bit set; if x ⊔ y did not
//     shift, then (x ⊔ y) ⊔ y = x ⊔ y, and every element x reported present is still present.
//   - Active Slices and Current Generation: every element of y's current generation is present in
//     x ⊔ y unless the union shifted more than l times; y young: every element y reports is
//     present in x ⊔ y unless the union shifted it past the window.
//   - commutativity: does NOT hold for any strategy. The result keeps the local base, hash
//     alignment and (AS, CG) the local older slices, and shifts are decided locally. What holds:
//     Whole Filter with aligned filters (same base) and no shift gives x ⊔ y and y ⊔ x the same
//     bits, so the same query answers.
//   - associativity: does NOT hold for any strategy (shifts and alignment depend on the order).
//     What holds: Whole Filter with aligned filters and no shift gives the same bits either way.
//   Active Slices note: the l older slices reuse the k hashes, so an element older than the
//   remote's current generation has some of its k bits in the remote's older slices, which this
//   strategy does not send unless the remote is young; it arrives only in part (extra fill, no
//   membership).
import { Apbf, checkCompatible } from "./apbf.js";
import { UnionStrategy } from "./apbf-params.js";

export { ApbfMismatchError, checkCompatible } from "./apbf.js";

export interface UnionOutcome {
  /** The local filter changed. */
  readonly changed: boolean;
  /** Shifts the union caused (each forgets the oldest generation). */
  readonly shifts: number;
}

const UNCHANGED: UnionOutcome = { changed: false, shifts: 0 };

/** Join remote into local in place, by the filters' (common) strategy. */
export function unionInPlace(local: Apbf, remote: Apbf): UnionOutcome {
  checkCompatible(local, remote);
  if (remote.isEmpty()) return UNCHANGED;
  if (local.isEmpty()) {
    if (local.equals(remote)) return UNCHANGED;
    local.copyFrom(remote);
    return { changed: true, shifts: 0 };
  }
  switch (local.strategy) {
    case UnionStrategy.WholeFilter:
      return unionWholeFilter(local, remote);
    case UnionStrategy.ActiveSlices:
      return unionActiveSlices(local, remote);
    case UnionStrategy.CurrentGeneration:
      return unionCurrentGeneration(local, remote);
  }
}

/** Pure union: a new filter, local ⊔ remote (local's perspective). */
export function union(local: Apbf, remote: Apbf): Apbf {
  const out = local.clone();
  unionInPlace(out, remote);
  return out;
}

/** Whole Filter: OR slot by slot (hash index = slot on both sides). */
export function unionWholeFilter(local: Apbf, remote: Apbf): UnionOutcome {
  const grew = orInto(local.bits, 0, remote.bits, 0, local.bits.length);
  if (!grew) return UNCHANGED;
  return settle(local, local.base === remote.base ? remote.count : 0);
}

/** Active Slices: OR each local active slice with the remote active slice of the same hash. */
export function unionActiveSlices(local: Apbf, remote: Apbf): UnionOutcome {
  let grew = false;
  const sb = local.sliceBytes;
  for (let i = 0; i < local.k; i++) {
    const j = matchingLogical(local, remote, i);
    grew = orInto(local.bits, local.slot(i) * sb, remote.bits, remote.slot(j) * sb, sb) || grew;
  }
  grew = youngerGenerations(local, remote).grew || grew;
  if (!grew) return UNCHANGED;
  return settle(local, remote.count);
}

/** Current Generation: OR the remote's shadows into the matching local active slices and shadows. */
export function unionCurrentGeneration(local: Apbf, remote: Apbf): UnionOutcome {
  let grew = false;
  let shadowsGrew = false;
  const sb = local.sliceBytes;
  for (let i = 0; i < local.k; i++) {
    const j = matchingLogical(local, remote, i);
    grew = orInto(local.bits, local.slot(i) * sb, remote.shadows, j * sb, sb) || grew;
    shadowsGrew = orInto(local.shadows, i * sb, remote.shadows, j * sb, sb) || shadowsGrew;
  }
  const older = youngerGenerations(local, remote);
  grew = older.grew || grew;
  shadowsGrew = older.shadowsGrew || shadowsGrew;
  // Bits an older generation already set can still be new to the shadows: the filter changed
  // (its encoding, and what it sends on), though no slice's fill did.
  if (!grew) return shadowsGrew ? { changed: true, shifts: 0 } : UNCHANGED;
  return settle(local, remote.count);
}

/**
 * How many generations a young remote may span (see youngerGenerations). Measured on 9 local
 * nodes, one probabilistic set written in 20 rounds like bench:prob-settle, and bench:prob-cluster: 2
 * left 5 of 20 rounds over 1 s before every node read the same, 3 left 2 (as k = 12 did; 8 of
 * 22 before any), at 2,400 / 3,200 / 6,300 bytes on the wire per operation (idle traffic taken
 * out) against 2,450 before.
 * Older generations placed by a receiver at its own alignment land apart from the same elements
 * placed by other senders, so each one taken costs fill and bytes downstream.
 */
export const YOUNG_GENERATIONS = 3;

/**
 * Active Slices and Current Generation, a young remote: one whose bits lie within its
 * YOUNG_GENERATIONS newest generations (last set slice below k - 1 + YOUNG_GENERATIONS), as a
 * gossip delta-group that shifted a few times on its way is. Its older generations are taken
 * too, each slice into the local slice of the same hash at about the same age: remote logical
 * slice s goes to local s - d (s < d: s - d + k), d the offset between the two filters' hash
 * alignments, so every element of the remote lands on k consecutive local slices and reads back.
 * Without this, a group that shifted on its way delivers only its newest generation's tombstones
 * (Current Generation) to a receiver that does not yet hold their dots, which then adopts them
 * when the add arrives. An older remote (a whole state with a history) gives its newest
 * generation only (the seed's rule; its older slices would overfill the local ones). Filters of
 * the same alignment take slot for slot, so x ⊔ x = x still holds.
 */
function youngerGenerations(local: Apbf, remote: Apbf): { grew: boolean; shadowsGrew: boolean } {
  const k = local.k;
  const last = remote.lastSetSlice();
  if (last < k || last >= k - 1 + YOUNG_GENERATIONS) return { grew: false, shadowsGrew: false };
  const sb = local.sliceBytes;
  const d = hashOffset(local, remote);
  let grew = false;
  let shadowsGrew = false;
  for (let s = 0; s <= last; s++) {
    const i = s >= d ? s - d : s - d + k;
    grew = orInto(local.bits, local.slot(i) * sb, remote.bits, remote.slot(s) * sb, sb) || grew;
    // Slice 0 is the current generation: its shadow (Current Generation) stays equal to it.
    if (i === 0 && local.shadows.length > 0) shadowsGrew = orInto(local.shadows, 0, remote.bits, remote.slot(s) * sb, sb) || shadowsGrew;
  }
  return { grew, shadowsGrew };
}

/** The remote's logical active index whose hash equals that of local logical active slice i. */
function matchingLogical(local: Apbf, remote: Apbf, i: number): number {
  return (i + hashOffset(local, remote)) % local.k;
}

/**
 * d: how far the remote's hash alignment runs behind the local one. Logical slice i holds hash
 * (hash of slice 0 + i) mod k in every filter (apbf.ts), so local logical i and remote logical
 * i + d (mod k) share a hash.
 */
function hashOffset(local: Apbf, remote: Apbf): number {
  return (local.hashIndex[local.base]! - remote.hashIndex[remote.base]! + local.k) % local.k;
}

/** dst[d..d+len) |= src[s..s+len); true when a new bit was set. */
function orInto(dst: Uint8Array, d: number, src: Uint8Array, s: number, len: number): boolean {
  let grew = false;
  for (let i = 0; i < len; i++) {
    const before = dst[d + i]!;
    const after = before | src[s + i]!;
    if (after !== before) {
      dst[d + i] = after;
      grew = true;
    }
  }
  return grew;
}

/** Insertions that b set bits of an m-bit slice stand for (maximum-likelihood estimate). */
export function insertionsFor(b: number, m: number): number {
  if (b >= m) return Infinity;
  return Math.log(1 - b / m) / Math.log(1 - 1 / m);
}

/** Rules 4 and 5 above, after a union that set new bits. */
function settle(f: Apbf, remoteCount: number): UnionOutcome {
  let shifts = 0;
  for (let i = 0; i < f.k; i++) {
    const n = insertionsFor(f.setBits(i), f.m);
    // Smallest s with n < (i + s + 1)·g; a saturated slice pushes everything out.
    const need = n === Infinity ? f.n : Math.max(0, Math.floor(n / f.g) - i);
    shifts = Math.max(shifts, Math.min(need, f.n));
  }
  if (shifts > 0) {
    f.shift(shifts);
  } else {
    // Below the budget, so ⌊n̂₀⌋ < g, and both counts are < g by the count rule.
    const fromBits = Math.floor(insertionsFor(f.setBits(0), f.m));
    f.count = Math.max(f.count, remoteCount, fromBits);
  }
  return { changed: true, shifts };
}
