// The probabilistic half under the seed's own rules, for the reproduction of its evaluation (seed
// 000 ch. 5). The figures of §5.3.2 come from the seed's simulator (its ref. [7]) running the APBF
// of its ref. [5]; where the thesis text and those differ from the choices of the AWSetProb type
// (services/crdt/awset-prob-state.ts, apbf.ts, apbf-union.ts), this module follows the seed. It
// reuses the type's filter layout, hashing and query (Apbf) and replaces only the rules:
//
//  - generations are driven by fill (§4.5.2 "Union Process" and "Fill Ratios"): after every
//    insertion AND every union the k active slices are checked, and if the slice at logical i has
//    a fill ratio above (i+1)/2k (Eq. 4) the filter shifts as often as needed to put it at an index
//    whose limit it respects (at most k). The type instead shifts after g = ⌊m·ln2/k⌋ insertions
//    (Eq. 3), which gives ~36% longer generations for the binding slice 0 (48 vs ~35 insertions
//    at error 2, capacity 4096, level 5).
//  - unions (§4.5.2 "Strategy Analysis"): Whole Filter ORs every slot with the remote slot of the
//    same hash (= physical slot); Active Slices ORs each local active slice with the remote active
//    slice of the same hash; Current Generation ORs the remote's current-generation copy into the
//    matching local active slice only: "in the latter a local active slice merges only the content
//    of the current generation of its remote match", while "insertions affect both the slice itself
//    and the respective current generation slice" — a union is not an insertion, so the local
//    current generation keeps only local insertions (the type also ORs it into its shadows).
//    No special case for an empty local filter (the type adopts the remote whole, its rule 2).
//    Two readings of the current-generation copy are open, and each is a parameter here:
//    * what an insertion writes into it (ShadowRule): every bit the item maps to ("insertions
//      affect both the slice itself and the respective current generation slice"), or only the
//      bits the insertion newly sets in the slice (the cited APBF's code), so that a bit an older
//      generation (or a union) already set never reaches a remote;
//    * whether a union also writes the remote's copy into the local one (CopyUnionRule): not in
//      the text, where a union is not an insertion, nor in the cited APBF as published, where
//      that line is present but commented out, marked experimental "for transitive propagations".
//    The text does not settle either ("knowing which of the set bits of an active slice correspond
//    to the current generation"; clearing "guaranteeing that older set bits are not included in
//    future content mergers"). bench:prob's main table uses the combination that reproduces the
//    thesis' Current Generation figures (new bits, passed on) and reports the others beside it.
//  - join, the tombstone method (§4.5.3 with Alg. 3 of §4.4.2, as the seed's simulator runs it):
//    (a) a local dot the remote's tombstones report is dropped and inserted into the local
//        tombstones on its own; (b) a remote dot the local store lacks is adopted unless the local
//        tombstones report it (the §4.5.1 fix d' ∉ c ∧ d' ∉ dots(m)); (c) the tombstone filters are
//        unioned. In (a) the seed's simulator drops the dot even when the remote store holds it
//        live ("tombstone" rule); Alg. 3 line 3 first tests d ∉ m' ("alg3" rule, the type's rule).
//  - local operations (§5.2.2): an add first retires the value's dots into the tombstones, then
//    stores a random 64-bit dot, never checked against the filter (the type's isFreshDot contract
//    redraws such dots); a remove retires the value's dots into the tombstones.
import { Apbf } from "../../services/crdt/apbf.js";
import { type ApbfParams, UnionStrategy } from "../../services/crdt/apbf-params.js";
import { type ProbDot, compareDots, dotBytes } from "../../services/crdt/awset-prob-state.js";
import type { ElementKey } from "../../services/crdt/awset.js";

export type SeedJoinRule = "tombstone" | "alg3";
/**
 * How the fill check reads the limit of Eq. 4: "fill" = set bits above m(i+1)/2k (the thesis'
 * wording); "insertions" = set bits above the insertion count that would reach that fill,
 * ln(1-(i+1)/2k)/ln(1-1/m) (the cited APBF's code; looser for i > 0). Kept for a sensitivity run.
 */
export type FillRule = "fill" | "insertions";

/** Set bits the active slice at logical i may hold (see FillRule). */
export function fillLimit(f: Apbf, i: number, rule: FillRule = "fill"): number {
  const ratio = (i + 1) / (2 * f.k);
  return rule === "fill" ? ratio * f.m : Math.ceil(Math.log(1 - ratio) / Math.log(1 - 1 / f.m));
}

/** Shifts that put every active slice at a logical index whose fill limit it respects (§4.5.2). */
export function neededShifts(f: Apbf, rule: FillRule = "fill"): number {
  let shifts = 0;
  for (let i = 0; i < f.k; i++) {
    const b = f.setBits(i);
    let j = i;
    while (j < f.k && b > fillLimit(f, j, rule)) j++;
    shifts = Math.max(shifts, j - i);
  }
  return shifts;
}

/** The fill check of §4.5.2; returns the shifts made. */
export function checkAndShift(f: Apbf, rule: FillRule = "fill"): number {
  const s = neededShifts(f, rule);
  if (s > 0) f.shift(s);
  return s;
}

/**
 * What an insertion writes into the current-generation copy of an active slice (Current Generation
 * only): "all" = every bit the item maps to, so the copy holds the whole current generation
 * (§4.5.2 "insertions affect both the slice itself and the respective current generation slice");
 * "newBits" = only the bits the insertion newly sets in the slice, a bit an older generation or a
 * union already set staying out of the copy (the cited APBF's code). Kept for a sensitivity run.
 */
export type ShadowRule = "all" | "newBits";

/**
 * What a Current Generation union does with the local current-generation copy: "local" = leaves
 * it alone, so it holds this replica's own insertions only and a removal travels one hop per
 * generation (the text: a union is not an insertion; the cited APBF as published); "passOn" =
 * ORs the remote's copy into it as well, so what this replica received in the current generation
 * reaches the replicas that pull from it next (the cited APBF's line for "transitive
 * propagations", commented out there as experimental).
 */
export type CopyUnionRule = "local" | "passOn";

/** Insert into the k active slices and the current-generation copies, then the fill check. */
export function seedInsert(f: Apbf, item: Uint8Array, rule: FillRule = "fill", shadowRule: ShadowRule = "all"): number {
  for (let i = 0; i < f.k; i++) {
    const slot = f.slot(i);
    const pos = f.position(item, f.hashIndex[slot]!);
    const byte = pos >>> 3;
    const mask = 1 << (pos & 7);
    const at = slot * f.sliceBytes + byte;
    const wasSet = (f.bits[at]! & mask) !== 0;
    f.bits[at]! |= mask;
    if (f.shadows.length > 0 && (shadowRule === "all" || !wasSet)) f.shadows[i * f.sliceBytes + byte]! |= mask;
  }
  return checkAndShift(f, rule);
}

/** The remote's logical active index whose hash equals that of local logical active slice i. */
function matching(local: Apbf, remote: Apbf, i: number): number {
  const h = local.hashIndex[local.slot(i)]!;
  const remoteHash0 = remote.hashIndex[remote.base]!;
  return (((h - remoteHash0) % local.k) + local.k) % local.k;
}

function orInto(dst: Uint8Array, d: number, src: Uint8Array, s: number, len: number): void {
  for (let i = 0; i < len; i++) dst[d + i]! |= src[s + i]!;
}

/** Union remote into local by the strategy's merge zone (see the header), then the fill check. */
export function seedUnion(local: Apbf, remote: Apbf, rule: FillRule = "fill", copyRule: CopyUnionRule = "local"): number {
  const sb = local.sliceBytes;
  switch (local.strategy) {
    case UnionStrategy.WholeFilter:
      orInto(local.bits, 0, remote.bits, 0, local.bits.length);
      break;
    case UnionStrategy.ActiveSlices:
      for (let i = 0; i < local.k; i++) orInto(local.bits, local.slot(i) * sb, remote.bits, remote.slot(matching(local, remote, i)) * sb, sb);
      break;
    case UnionStrategy.CurrentGeneration:
      for (let i = 0; i < local.k; i++) {
        const from = matching(local, remote, i) * sb;
        orInto(local.bits, local.slot(i) * sb, remote.shadows, from, sb);
        if (copyRule === "passOn") orInto(local.shadows, i * sb, remote.shadows, from, sb);
      }
      break;
  }
  return checkAndShift(local, rule);
}

/** A probabilistic dot store (dot → value) with an APBF of tombstones, under the seed's rules. */
export class SeedProbHalf {
  private readonly byDot = new Map<ProbDot, ElementKey>();
  private readonly byValue = new Map<ElementKey, Set<ProbDot>>();
  readonly tombstones: Apbf;

  constructor(
    params: ApbfParams,
    private readonly joinRule: SeedJoinRule = "tombstone",
    private readonly fillRule: FillRule = "fill",
    private readonly shadowRule: ShadowRule = "all",
    private readonly copyRule: CopyUnionRule = "local",
  ) {
    this.tombstones = Apbf.create(params);
  }

  get size(): number {
    return this.byValue.size;
  }

  values(): IterableIterator<ElementKey> {
    return this.byValue.keys();
  }

  hasValue(k: ElementKey): boolean {
    return this.byValue.has(k);
  }

  /** Add: the value's old dots become tombstones, then the new dot is stored (§5.2.2). */
  add(k: ElementKey, d: ProbDot): void {
    this.remove(k);
    this.put(d, k);
  }

  /** Remove: the value's dots become tombstones (§5.2.2). */
  remove(k: ElementKey): void {
    const dots = this.byValue.get(k);
    if (dots === undefined) return;
    for (const d of [...dots].sort(compareDots)) {
      this.drop(d);
      seedInsert(this.tombstones, dotBytes(d), this.fillRule, this.shadowRule);
    }
  }

  /** Pull: join the remote's whole state into this one (the tombstone method, see the header). */
  join(remote: SeedProbHalf): void {
    const dropped: ProbDot[] = [];
    for (const d of this.byDot.keys()) {
      if (this.joinRule === "alg3" && remote.byDot.has(d)) continue;
      if (remote.tombstones.query(dotBytes(d))) dropped.push(d);
    }
    for (const d of dropped.sort(compareDots)) {
      this.drop(d);
      seedInsert(this.tombstones, dotBytes(d), this.fillRule, this.shadowRule);
    }
    const adopted: Array<[ProbDot, ElementKey]> = [];
    for (const [d, k] of remote.byDot) if (!this.byDot.has(d) && !this.tombstones.query(dotBytes(d))) adopted.push([d, k]);
    for (const [d, k] of adopted) this.put(d, k);
    seedUnion(this.tombstones, remote.tombstones, this.fillRule, this.copyRule);
  }

  private put(d: ProbDot, k: ElementKey): void {
    this.byDot.set(d, k);
    let dots = this.byValue.get(k);
    if (dots === undefined) this.byValue.set(k, (dots = new Set()));
    dots.add(d);
  }

  private drop(d: ProbDot): void {
    const k = this.byDot.get(d);
    if (k === undefined) return;
    this.byDot.delete(d);
    const dots = this.byValue.get(k)!;
    dots.delete(d);
    if (dots.size === 0) this.byValue.delete(k);
  }
}
