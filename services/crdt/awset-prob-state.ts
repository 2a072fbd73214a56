// AWSetProb: the seed's probabilistic add-wins set (seed 000 §4.4-§4.5.3, digest 3.4, 5.4), a
// tombstone OR-Set whose tombstones live in an Age-Partitioned Bloom Filter.
//
//   state   = (store: element → set of live dots, tombstones: APBF of removed dots)
//   add^δ(e, d)  = ({e ↦ {d}}, APBF{dots of e})      old dots of e become tombstones
//   remove^δ(e)  = ({}, APBF{dots of e})
//   clear^δ()    = ({}, APBF{all live dots})
//   elements     = dom store
//
// Dots are anonymous random 64-bit ids. The caller draws them (the kernel never draws randomness)
// and passes them as a bigint or 8 bytes; isFreshDot tells whether the filter would swallow one.
// Only removed dots enter the filter ("resurrection of the tombstones", seed §4.5.3): live dots
// are known from the store, so the filter sees fewer, later insertions and forgets the oldest
// removals, a blind garbage collection of tombstones.
//
// Join (the seed's tombstone method, digest 5.4, with three changes marked *):
//   (a) a local dot the remote does not hold* and the remote's tombstones report is removed, and
//       inserted into the local tombstones on its own (the filter union is lossy);
//   (b) a remote dot the local store lacks is added unless the local tombstones report it;
//   * a delta lists the dots its removes took (`removed`), and "reports" is then asked of the list
//     instead of its filter, on either side: a delta that removed more than a generation has a
//     filter that reports other dots too, and every such delta would be a new chance for each
//     live element of the receiver to be dropped;
//   (c) local tombstones ⊔= remote tombstones, by the filters' union strategy.
//   * a dot both stores hold is kept even if a filter reports it (the DotSet rule; without it a
//     false positive on a replica's own live dot would make x ⊔ x differ from x);
//   * every filter answer is taken before anything changes, so insertions of (a) cannot shift a
//     generation out from under the checks of (b), and the resulting store is the same both ways.
// A delta-group (gossip buffers, a batch's delta) takes a later delta with joinGroupInPlace: (a)
// and (c) as above, and (b) without refusals, because the replica that made the group already
// decided each dot with its own filter.
//
// What holds exactly, for every union strategy (test/property/awset-prob.test.ts):
//   - x ⊔ x = x;
//   - the store of a ⊔ b equals the store of b ⊔ a (the filters in general differ: apbf-union.ts);
//   - a dot held by both sides survives; a dot is dropped only on a positive answer of the other
//     side's list, else its filter, so an add concurrent with everything is lost only by a false
//     positive;
//   - a remove is not undone by a stale replica while the remover's filter still holds the dot
//     (no false negatives inside the window: fewer than l+1 shifts since the remove).
// What is probabilistic: lost adds (false positives, rate ≈ the filter's estimatedFp) and
// resurrected removes (forgotten tombstones, once the window has moved on).
//
// Filters of two shapes. A key's filter parameters are chosen by the Add that creates it, so two
// nodes creating the same key at once with different parameters hold filters that cannot be
// unioned. The join then keeps the filter of the greater shape (compareShapes), so every replica
// ends with the same one: ⊥ adopts the other side whole; otherwise (a) and (b) run with both
// filters' answers, the dots (a) drops go into the filter that is kept, and the smaller shape's
// filter is dropped. What that loses: removes known only to the dropped filter whose dots
// another replica still holds live come back once.
import { Apbf, checkCompatible } from "./apbf.js";
import { unionInPlace } from "./apbf-union.js";
import { type ApbfParams, apbfByteSize, sameParams } from "./apbf-params.js";
import { type ElementKey, elementBytes, elementKey } from "./awset.js";

export type { ElementKey } from "./awset.js";

/** An anonymous dot: an unsigned 64-bit random id. */
export type ProbDot = bigint;
/** A dot as callers may pass it: a bigint in [0, 2^64) or 8 bytes (little-endian). */
export type DotInput = bigint | Uint8Array;

const DOT_LIMIT = 1n << 64n;

export function toDot(x: DotInput): ProbDot {
  if (typeof x === "bigint") {
    if (x < 0n || x >= DOT_LIMIT) throw new RangeError(`a dot must be in [0, 2^64), got ${x}`);
    return x;
  }
  if (x.length !== 8) throw new RangeError(`a dot must be 8 bytes, got ${x.length}`);
  return new DataView(x.buffer, x.byteOffset, 8).getBigUint64(0, true);
}

/** The 8 little-endian bytes a dot is hashed (and encoded) as. */
export function dotBytes(d: ProbDot): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, d, true);
  return out;
}

/** dotBytes into one reused buffer, for walks that ask a filter about many dots (valid until the next call). */
export class DotBuffer {
  private readonly bytes = new Uint8Array(8);
  private readonly view = new DataView(this.bytes.buffer);

  of(d: ProbDot): Uint8Array {
    this.view.setBigUint64(0, d, true);
    return this.bytes;
  }
}

export class AWSetProb {
  /** The dot store: element key → live dots (non-empty). */
  readonly entries: Map<ElementKey, Set<ProbDot>>;
  /** The removed dots (replaced only when a join adopts a filter of a greater shape). */
  tombstones: Apbf;
  /**
   * A delta's removed dots, listed: what its removes took, exactly (each one also went into its
   * filter, which may have forgotten it since, in a long delta-group). Undefined on a state,
   * whose removes are known from its filter only. A join of a delta that lists them asks the
   * list, not the filter, whether a dot was removed: the filter of a delta that removed a
   * generation's worth of dots reports other dots at about its false-positive rate, and each such
   * delta would otherwise be a fresh chance for every live element of the receiving set to be
   * dropped.
   */
  removed: Set<ProbDot> | undefined;
  /** dot → element key for every live dot; built on first use. */
  private ownerIndex: Map<ProbDot, ElementKey> | undefined;
  /** Dots taken in or dropped by this object so far: what reads return changed when this moved. */
  private entryChanges = 0;
  /**
   * Set on the delta of a batch (awset-prob-operations.ts): the deltas its operation joined into
   * the state in turn, which is what a state log must replay. Joining this one delta, their join,
   * need not give the same state: the join is not associative. Not encoded, not cloned.
   */
  steps?: readonly AWSetProb[];

  /**
   * The joins this delta stands for, in order (itself, unless it is a batch's), handed over once:
   * the delta then keeps no reference to them (a batch of removes holds a filter per element,
   * and the delta may wait in a gossip buffer long after).
   */
  takeSteps(): readonly AWSetProb[] {
    const steps = this.steps ?? [this];
    this.steps = undefined;
    return steps;
  }

  private constructor(entries: Map<ElementKey, Set<ProbDot>>, tombstones: Apbf, removed?: Set<ProbDot>) {
    this.entries = entries;
    this.tombstones = tombstones;
    this.removed = removed;
  }

  static bottom(params: ApbfParams): AWSetProb {
    return new AWSetProb(new Map(), Apbf.create(params));
  }

  /**
   * Build from parts (the caller guarantees: non-empty dot sets, no dot under two elements, no
   * listed removed dot live).
   */
  static fromParts(entries: Map<ElementKey, Set<ProbDot>>, tombstones: Apbf, removed?: Set<ProbDot>): AWSetProb {
    return new AWSetProb(entries, tombstones, removed);
  }

  clone(): AWSetProb {
    const entries = new Map<ElementKey, Set<ProbDot>>();
    for (const [k, dots] of this.entries) entries.set(k, new Set(dots));
    return new AWSetProb(entries, this.tombstones.clone(), this.removed === undefined ? undefined : new Set(this.removed));
  }

  get params(): ApbfParams {
    return this.tombstones.params;
  }

  get size(): number {
    return this.entries.size;
  }

  has(element: Uint8Array): boolean {
    return this.entries.has(elementKey(element));
  }

  /** Elements in byte order. */
  elements(): Buffer[] {
    return [...this.entries.keys()].sort().map(elementBytes);
  }

  /** Live dots of an element, ascending. */
  dotsOf(element: Uint8Array): ProbDot[] {
    return sortedDots(this.entries.get(elementKey(element)));
  }

  /** Moves whenever this object takes in or drops a live dot (compare two readings of one object). */
  get readVersion(): number {
    return this.entryChanges;
  }

  /** Does the store hold this dot? */
  holds(d: ProbDot): boolean {
    return this.owner.has(d);
  }

  dotCount(): number {
    return this.owner.size;
  }

  /** No element and no tombstone (filters with no bit set count as empty whatever their alignment). */
  isBottom(): boolean {
    return this.entries.size === 0 && this.tombstones.isEmpty();
  }

  /**
   * Can this dot be used for a new add? Not if the store holds it or the tombstone filter reports
   * it (a reuse, or a false positive that would make the add vanish on the join). Draw another.
   */
  isFreshDot(dot: DotInput): boolean {
    const d = toDot(dot);
    return !this.owner.has(d) && !this.tombstones.query(dotBytes(d));
  }

  // ------------------------------------------------------------ delta mutators (pure)

  /** add^δ(e, d): e with the new dot, and e's current dots as tombstones. */
  addDelta(element: Uint8Array, dot: DotInput): AWSetProb {
    const d = toDot(dot);
    const k = elementKey(element);
    const delta = this.tombstoneDelta(this.entries.get(k) ?? []);
    delta.entries.set(k, new Set([d]));
    return delta;
  }

  /** remove^δ(e): e's current dots as tombstones. */
  removeDelta(element: Uint8Array): AWSetProb {
    return this.tombstoneDelta(this.entries.get(elementKey(element)) ?? []);
  }

  /** clear^δ(): every live dot as a tombstone. */
  clearDelta(): AWSetProb {
    const all: ProbDot[] = [];
    for (const dots of this.entries.values()) for (const d of dots) all.push(d);
    return this.tombstoneDelta(all);
  }

  /**
   * The reply of this replica to incoming (join step (b) refuses these dots): a delta whose filter
   * holds the live dots of incoming that this store lacks and its tombstones report, undefined
   * when there are none (or the shapes differ). The refusal is this replica's alone: where it is a
   * false positive, the replicas that hold the dot would keep it for good, and the sets never
   * agree. Spread as this replica's own remove, it makes them drop the dot too (the add is lost
   * everywhere, as it already is here). Joining it here changes no answer of this state.
   */
  refusalOf(incoming: AWSetProb): AWSetProb | undefined {
    if (incoming.entries.size === 0 || this.tombstones.isEmpty() || !sameParams(this.params, incoming.params)) return undefined;
    const { refused } = this.sortUnheld(incoming);
    return refused.length === 0 ? undefined : this.tombstoneDelta(refused);
  }

  /** A delta with no entries whose filter (same shape as ours) and list hold the given dots. */
  private tombstoneDelta(dots: Iterable<ProbDot>): AWSetProb {
    const filter = Apbf.create(this.params);
    const sorted = sortedDots(dots);
    for (const d of sorted) filter.insert(dotBytes(d));
    return new AWSetProb(new Map(), filter, new Set(sorted));
  }

  // ------------------------------------------------------------ join

  /** Join other into this state in place (see the header); true when this state changed. */
  joinInPlace(other: AWSetProb): boolean {
    if (!sameParams(this.params, other.params)) return this.joinOtherShape(other);
    return this.joinSameShape(other).changed;
  }

  /**
   * Join other into this state (same shape) and say what of it was new here: the dots adopted, the
   * dots dropped, and other's filter when it dropped a dot or set a bit. This state before, joined
   * with that part listing the dots dropped, gives the same state, provided other's filter
   * reports none of other's own live dots (the lattice's difference covers that case and other
   * shapes). Listed, not left to the filter: a whole state's filter reports dots nobody removed
   * (false positives) that this join kept because other holds them too.
   */
  joinSameShape(other: AWSetProb): { changed: boolean; adopted: [ProbDot, ElementKey][]; dropped: ProbDot[]; filterNew: boolean } {
    checkCompatible(this.tombstones, other.tombstones); // refuse before changing anything
    const drop = this.droppedBy(other);
    const { adopt } = this.sortUnheld(other);
    return this.apply(other, drop, adopt);
  }

  /**
   * Of a listed delta's removes, those this state does not know of yet: live here, or not
   * reported by its filter. Asked before a join whose new part is passed on: a group lists every
   * remove of its interval, most of them known here already.
   */
  unknownRemoves(delta: AWSetProb): ProbDot[] {
    const out: ProbDot[] = [];
    if (delta.removed === undefined) return out;
    const reported = this.tombstones.querier();
    const dot = new DotBuffer();
    for (const d of delta.removed) if (this.owner.has(d) || !reported(dot.of(d))) out.push(d);
    return out;
  }

  /**
   * Join a later delta into this delta-group (Lattice.joinGroupInPlace): step (a) as in a join,
   * step (b) without refusals, every live dot of later this group lacks is taken, then (c). The
   * replica that made the group took each of its deltas into its own state, whose filter is not
   * this group's: an earlier delta of the group may carry a filter that reports a dot the replica
   * found fresh, or adopted (a false positive, or a remove its partial union never learned). A
   * group that refused such a dot would leave it on that replica alone. Where the replica did
   * refuse a dot, its refusal reply (refusalOf) follows in the group and drops it by step (a).
   */
  joinGroupInPlace(later: AWSetProb): boolean {
    if (!sameParams(this.params, later.params)) return this.joinOtherShape(later);
    checkCompatible(this.tombstones, later.tombstones);
    const drop = this.droppedBy(later);
    const adopt: [ProbDot, ElementKey][] = [];
    for (const [k, dots] of later.entries) for (const d of dots) if (!this.owner.has(d)) adopt.push([d, k]);
    return this.apply(later, drop, adopt).changed;
  }

  /**
   * Steps (a)-(c) with the answers taken: drop, adopt, then union the filters. The filter takes
   * what it took before deltas were listed (the dots dropped, then the union), so that it fills
   * and forgets as the seed's does. A list here (this is a delta) takes other's, or is lost when
   * other has none.
   */
  private apply(other: AWSetProb, drop: ProbDot[], adopt: [ProbDot, ElementKey][]): { changed: boolean; adopted: [ProbDot, ElementKey][]; dropped: ProbDot[]; filterNew: boolean } {
    for (const d of drop) {
      this.deleteDot(d);
      this.tombstones.insert(dotBytes(d));
      this.removed?.add(d);
    }
    for (const [d, k] of adopt) {
      this.addDot(k, d);
      this.removed?.delete(d);
    }
    const filterChanged = unionInPlace(this.tombstones, other.tombstones).changed;
    if (this.removed !== undefined) {
      if (other.removed === undefined) this.removed = undefined;
      else for (const d of other.removed) if (!this.owner.has(d)) this.removed.add(d);
    }
    return { changed: drop.length > 0 || adopt.length > 0 || filterChanged, adopted: adopt, dropped: drop, filterNew: drop.length > 0 || filterChanged };
  }

  /**
   * Step (a) of the join: our live dots the other side does not hold and reports removed (its
   * list, else its filter), sorted (insertion order decides where a generation ends).
   */
  private droppedBy(other: AWSetProb): ProbDot[] {
    const drop: ProbDot[] = [];
    if (other.removed !== undefined) {
      for (const d of other.removed) if (this.owner.has(d) && !other.owner.has(d)) drop.push(d);
      return drop.sort(compareDots);
    }
    // A filter with no bit set reports no dot: the delta of an add of a new element has one, and
    // walking every live dot here for it made each Add cost the size of the set (26 ms at 20k).
    if (other.tombstones.isEmpty()) return drop;
    const reports = other.tombstones.querier();
    const dot = new DotBuffer();
    for (const dots of this.entries.values()) {
      for (const d of dots) if (!other.owner.has(d) && reports(dot.of(d))) drop.push(d);
    }
    return drop.sort(compareDots);
  }

  /**
   * Step (b) of the join: the live dots of other this store lacks, adopted unless this side
   * reports them removed (its list when it is a delta that has one, else its filter), refused
   * otherwise (what refusalOf answers). Asking a delta's list on this side and other's list in
   * step (a) keeps the joined store the same both ways.
   */
  private sortUnheld(other: AWSetProb): { adopt: [ProbDot, ElementKey][]; refused: ProbDot[] } {
    const adopt: [ProbDot, ElementKey][] = [];
    const refused: ProbDot[] = [];
    if (other.entries.size === 0) return { adopt, refused };
    // A delta answers from its list, a state from its filter.
    const list = this.removed;
    const reports = list === undefined ? this.tombstones.querier() : undefined;
    const dot = new DotBuffer();
    for (const [k, dots] of other.entries) {
      for (const d of dots) {
        if (this.owner.has(d)) continue;
        if (list !== undefined ? list.has(d) : reports!(dot.of(d))) refused.push(d);
        else adopt.push([d, k]);
      }
    }
    return { adopt, refused };
  }

  /** The join of a state whose filter has another shape (see the header). */
  private joinOtherShape(other: AWSetProb): boolean {
    if (other.isBottom()) return false;
    if (this.isBottom()) {
      for (const [k, dots] of other.entries) for (const d of dots) this.addDot(k, d);
      this.tombstones = other.tombstones.clone();
      if (this.removed !== undefined) this.removed = other.removed === undefined ? undefined : new Set(other.removed);
      return true;
    }
    const drop = this.droppedBy(other);
    const { adopt } = this.sortUnheld(other);
    const theirs = compareShapes(other.params, this.params) > 0;
    for (const d of drop) {
      this.deleteDot(d);
      if (!theirs) this.tombstones.insert(dotBytes(d)); // the kept filter must remember the remove
    }
    for (const [d, k] of adopt) this.addDot(k, d);
    if (theirs) this.tombstones = other.tombstones.clone();
    // A list, kept only when both sides are listed deltas (then it lists every remove of both).
    if (this.removed !== undefined && other.removed !== undefined) {
      for (const d of drop) this.removed.add(d);
      for (const [d] of adopt) this.removed.delete(d);
      for (const d of other.removed) if (!this.owner.has(d)) this.removed.add(d);
    } else this.removed = undefined;
    return theirs || drop.length > 0 || adopt.length > 0;
  }

  /** Same store, the same filter state, and the same list of removed dots (or none on either). */
  equals(o: AWSetProb): boolean {
    if (this.isBottom() && o.isBottom()) return true;
    if (this.entries.size !== o.entries.size || !this.tombstones.equals(o.tombstones)) return false;
    if ((this.removed === undefined) !== (o.removed === undefined)) return false;
    if (this.removed !== undefined && (this.removed.size !== o.removed!.size || [...this.removed].some((d) => !o.removed!.has(d)))) return false;
    for (const [k, dots] of this.entries) {
      const theirs = o.entries.get(k);
      if (theirs === undefined || theirs.size !== dots.size) return false;
      for (const d of dots) if (!theirs.has(d)) return false;
    }
    return true;
  }

  private get owner(): Map<ProbDot, ElementKey> {
    if (this.ownerIndex === undefined) {
      const index = new Map<ProbDot, ElementKey>();
      for (const [k, dots] of this.entries) for (const d of dots) index.set(d, k);
      this.ownerIndex = index;
    }
    return this.ownerIndex;
  }

  private addDot(k: ElementKey, d: ProbDot): void {
    let dots = this.entries.get(k);
    if (dots === undefined) {
      dots = new Set();
      this.entries.set(k, dots);
    }
    dots.add(d);
    this.owner.set(d, k);
    this.entryChanges++;
  }

  private deleteDot(d: ProbDot): void {
    const k = this.owner.get(d);
    if (k === undefined) return;
    this.owner.delete(d);
    const dots = this.entries.get(k)!;
    dots.delete(d);
    if (dots.size === 0) this.entries.delete(k);
    this.entryChanges++;
  }
}

/**
 * A total order of filter shapes, for joins of filters that cannot be unioned: the larger filter
 * (bytes), then k, l, m and the union strategy. Positive when a is the greater.
 */
export function compareShapes(a: ApbfParams, b: ApbfParams): number {
  return apbfByteSize(a) - apbfByteSize(b) || a.k - b.k || a.l - b.l || a.m - b.m || a.strategy - b.strategy;
}

export function compareDots(a: ProbDot, b: ProbDot): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortedDots(dots: Iterable<ProbDot> | undefined): ProbDot[] {
  return dots === undefined ? [] : [...dots].sort(compareDots);
}
