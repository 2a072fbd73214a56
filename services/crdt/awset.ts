// AWSet: the optimized add-wins observed-remove set, Causal<DotMap<element, DotSet>>
// (Bieniusa et al.; seed 000 section 3.5).
//
//   add^δ(e)    = ({e ↦ {d}}, {d} ∪ m(e))      d = next dot of the replica
//   remove^δ(e) = ({}, m(e))                   (or m(e) ∩ c for a client-supplied context c)
//   clear^δ()   = ({}, dots(m))
//   elements    = dom m
//
// Time to live (seed 002 §3.4). An add may carry an expiry (Dot.expiresAt, on the local clock);
// expire(now) removes the dots whose time has come from the store and keeps them in the context,
// which is exactly a remove of those dots: an inflation, so expiry needs no coordination and
// joins stay joins. Expiry is per copy: copies travel with their remaining TTL (time stops in
// transit), so a copy expires a little after the original; and the context never expires, so the
// remove that observed an add can never be outlived by it (the theorem's hazard, an add outliving
// its remove, cannot arise: removes are not tuples with a TTL here).
//
// Elements are byte strings; internally they are keyed by their latin1 decoding so that string
// order equals byte order. Besides the dot store and the context, an AWSet keeps an index from
// dot to element, so that joining a small delta (say a remove, whose store is empty) costs
// O(size of the delta), not O(size of the set).
import { CausalContext } from "./causal-context.js";
import { type Dot, dotKey, mintCounters, sameDot } from "./dot.js";
import { type DotSet, DotSetStore, dotMapStore, joinDotSets } from "./dot-store.js";

export type ElementKey = string;

/** Buffer's own latin1 decoder, below toString's argument handling (half the cost per element). */
const latin1Slice = (Buffer.prototype as unknown as { latin1Slice?: (this: Buffer, start: number, end: number) => string }).latin1Slice;

export function elementKey(element: Uint8Array): ElementKey {
  if (latin1Slice !== undefined && element instanceof Buffer) return latin1Slice.call(element, 0, element.length);
  return Buffer.from(element.buffer, element.byteOffset, element.byteLength).toString("latin1");
}

export function elementBytes(key: ElementKey): Buffer {
  return Buffer.from(key, "latin1");
}

const awsetStore = dotMapStore(DotSetStore);

export class AWSet {
  /** The dot store: element key → dots (sorted, non-empty). */
  readonly entries: Map<ElementKey, DotSet>;
  /** The causal context. */
  readonly ctx: CausalContext;
  /** dotKey → element key, for every dot in the store. */
  /** Built on first use: deltas that are only encoded or stored never need it. */
  private ownerIndex: Map<string, ElementKey> | undefined;

  private constructor(entries: Map<ElementKey, DotSet>, ctx: CausalContext) {
    this.entries = entries;
    this.ctx = ctx;

  }

  static bottom(): AWSet {
    return new AWSet(new Map(), new CausalContext());
  }

  /** Build from a store and a context (the caller guarantees consistency, e.g. the codec). */
  static fromParts(entries: Map<ElementKey, DotSet>, ctx: CausalContext): AWSet {
    return new AWSet(entries, ctx);
  }

  clone(): AWSet {
    return new AWSet(new Map(this.entries), this.ctx.clone());
  }

  get size(): number {
    return this.entries.size;
  }

  has(element: Uint8Array): boolean {
    return this.entries.has(elementKey(element));
  }

  dotsOf(element: Uint8Array): DotSet {
    return this.entries.get(elementKey(element)) ?? [];
  }

  /** Element keys in byte order. */
  sortedKeys(): ElementKey[] {
    return [...this.entries.keys()].sort();
  }

  elements(): Buffer[] {
    return this.sortedKeys().map(elementBytes);
  }

  /** Number of dots in the store. */
  dotCount(): number {
    return this.owner.size;
  }

  /** Which element holds this dot, if any. */
  ownerOf(d: Dot): ElementKey | undefined {
    return this.owner.get(dotKey(d));
  }

  isBottom(): boolean {
    return this.entries.size === 0 && this.ctx.isEmpty();
  }

  // ------------------------------------------------------------ delta mutators (pure)

  /**
   * add^δ for each element (duplicates in the call are added once); dots are minted in order.
   * expiresAt: the new adds expire then (local ms); absent, they do not expire.
   */
  addDelta(replica: string, elements: Iterable<Uint8Array>, expiresAt?: number): AWSet {
    const keys: ElementKey[] = [];
    for (const el of elements) keys.push(elementKey(el));
    return this.addDeltaOfKeys(replica, keys, expiresAt);
  }

  /** addDelta for elements given by their keys (callers that have computed them already). */
  addDeltaOfKeys(replica: string, keys: Iterable<ElementKey>, expiresAt?: number): AWSet {
    const entries = new Map<ElementKey, DotSet>();
    const ctx = new CausalContext();
    const first = this.ctx.max(replica) + 1;
    let next = first - 1;
    for (const k of keys) {
      if (entries.has(k)) continue;
      entries.set(k, [expiresAt === undefined ? { replica, counter: ++next } : { replica, counter: ++next, expiresAt }]);
      for (const old of this.entries.get(k) ?? []) ctx.addDot(old);
    }
    // Checked once the count is known: nothing was changed yet (entries and ctx are new).
    mintCounters(replica, first - 1, next - first + 1);
    // The new dots are consecutive: one range, not one insertion each.
    if (next >= first) ctx.addRange(replica, first, next);
    return new AWSet(entries, ctx);
  }

  /** remove^δ: the observed dots of each element, or only those the given context covers. */
  removeDelta(elements: Iterable<Uint8Array>, observed?: CausalContext): AWSet {
    const removed: Dot[] = [];
    for (const el of elements) {
      for (const d of this.entries.get(elementKey(el)) ?? []) {
        if (observed === undefined || observed.containsDot(d)) removed.push(d);
      }
    }
    return new AWSet(new Map(), CausalContext.of(removed));
  }

  /** clear^δ: every observed dot (or those the given context covers). */
  clearDelta(observed?: CausalContext): AWSet {
    const removed: Dot[] = [];
    for (const dots of this.entries.values()) {
      for (const d of dots) if (observed === undefined || observed.containsDot(d)) removed.push(d);
    }
    return new AWSet(new Map(), CausalContext.of(removed));
  }

  /** The dots whose expiry is at or before now. */
  expiredDots(now: number): Dot[] {
    const out: Dot[] = [];
    for (const dots of this.entries.values()) for (const d of dots) if (d.expiresAt !== undefined && d.expiresAt <= now) out.push(d);
    return out;
  }

  /**
   * Expire in place: drop the dots whose time has come (the context keeps them, as after a
   * remove). Returns what a remove of them would spread: ({}, {expired dots}).
   */
  expire(now: number): AWSet {
    const gone = this.expiredDots(now);
    const delta = new AWSet(new Map(), CausalContext.of(gone));
    if (gone.length > 0) this.joinInPlace(delta);
    return delta;
  }

  // ------------------------------------------------------------ full mutators (pure)
  // Written directly, not via the deltas, so that X ⊔ m^δ(X) = m(X) is a real check.

  add(replica: string, elements: Iterable<Uint8Array>): AWSet {
    const out = this.clone();
    const max = out.ctx.max(replica);
    let next = max;
    const seen = new Set<ElementKey>();
    for (const el of elements) {
      const k = elementKey(el);
      if (seen.has(k)) continue;
      seen.add(k);
      const d: Dot = { replica, counter: ++next };
      out.setDots(k, [d]);
      out.ctx.addDot(d);
    }
    // out is a copy: a refusal changes nothing.
    mintCounters(replica, max, next - max);
    return out;
  }

  remove(elements: Iterable<Uint8Array>, observed?: CausalContext): AWSet {
    const out = this.clone();
    for (const el of elements) {
      const k = elementKey(el);
      const dots = out.entries.get(k);
      if (dots === undefined) continue;
      out.setDots(k, observed === undefined ? [] : dots.filter((d) => !observed.containsDot(d)));
    }
    return out;
  }

  clear(observed?: CausalContext): AWSet {
    return this.remove(this.elements(), observed);
  }

  // ------------------------------------------------------------ join

  /**
   * Join other into this state in place. Returns true when this state changed. othersRemovals:
   * removedDots(other), when the caller has computed it already.
   * Cost: O(|other|) plus, for the dots other's context removes, an index lookup each (or one
   * scan of this state when that is cheaper).
   */
  joinInPlace(other: AWSet, othersRemovals?: CausalContext): boolean {
    const ctxGrows = !other.ctx.leq(this.ctx);
    let storeChanged = false;
    // 1. Elements other holds: the DotSet join under both contexts.
    for (const [k, theirs] of other.entries) {
      const mine = this.entries.get(k);
      if (mine === undefined) {
        // A new element here (an add's usual case): their dots this context has not seen.
        // Their dots are usually all fresh: the array is copied only when one is not.
        const fresh = theirs.some((d) => this.ctx.containsDot(d)) ? theirs.filter((d) => !this.ctx.containsDot(d)) : theirs;
        if (fresh.length > 0) {
          this.setDots(k, fresh);
          storeChanged = true;
        }
        continue;
      }
      const joined = joinDotSets(mine, this.ctx, theirs, other.ctx);
      if (!DotSetStore.equals(mine, joined)) {
        this.setDots(k, joined);
        storeChanged = true;
      }
    }
    // 2. Elements other does not hold: drop our dots that other's context has seen.
    const removed = othersRemovals ?? removedDots(other);
    if (!removed.isEmpty()) {
      const hits = this.dotsCoveredBy(removed);
      for (const d of hits) {
        const k = this.owner.get(dotKey(d));
        if (k === undefined || other.entries.has(k)) continue; // handled in step 1
        const dots = this.entries.get(k)!;
        this.setDots(
          k,
          dots.filter((x) => !sameDot(x, d)),
        );
        storeChanged = true;
      }
    }
    // 3. Contexts.
    if (ctxGrows) this.ctx.joinInPlace(other.ctx);
    return ctxGrows || storeChanged;
  }

  /** Replace the dots of one element, keeping the index in step. Empty dots delete it. */
  private get owner(): Map<string, ElementKey> {
    if (this.ownerIndex === undefined) {
      const index = new Map<string, ElementKey>();
      for (const [k, dots] of this.entries) for (const d of dots) index.set(dotKey(d), k);
      this.ownerIndex = index;
    }
    return this.ownerIndex;
  }

  private setDots(k: ElementKey, dots: DotSet): void {
    // The index is derived: kept in step once built, and built from the entries when first needed,
    // so that joins that never look a dot up (adds of new elements) never pay for it.
    const index = this.ownerIndex;
    if (index !== undefined) for (const d of this.entries.get(k) ?? []) index.delete(dotKey(d));
    if (dots.length === 0) {
      this.entries.delete(k);
      return;
    }
    this.entries.set(k, dots);
    if (index !== undefined) for (const d of dots) index.set(dotKey(d), k);
  }

  /** Dots of this store that the context covers (index lookups or one scan, whichever is cheaper). */
  dotsCoveredBy(c: CausalContext): Dot[] {
    const out: Dot[] = [];
    if (c.dotCount() <= this.owner.size) {
      for (const d of c.dots()) if (this.owner.has(dotKey(d))) out.push(d);
    } else {
      for (const dots of this.entries.values()) for (const d of dots) if (c.containsDot(d)) out.push(d);
    }
    return out;
  }

  /** Structural equality (same store, same context). */
  equals(other: AWSet): boolean {
    return awsetStore.equals(this.entries, other.entries) && this.ctx.equals(other.ctx);
  }

  /** Join via the generic DotMap<DotSet> join (reference implementation, for tests). */
  static referenceJoin(a: AWSet, b: AWSet): AWSet {
    return new AWSet(
      new Map(awsetStore.join(a.entries, a.ctx, b.entries, b.ctx)),
      a.ctx.join(b.ctx),
    );
  }
}

/** The dots a state's context has seen but its store no longer holds (its removals). */
export function removedDots(s: AWSet): CausalContext {
  if (s.entries.size === 0) return s.ctx;
  // Every live dot is in the context: as many dots as live ones means none was removed (an add
  // delta of new elements), which spares building and subtracting a context.
  let liveCount = 0;
  for (const dots of s.entries.values()) liveCount += dots.length;
  if (liveCount === s.ctx.dotCount()) return new CausalContext();
  const live: Dot[] = [];
  for (const dots of s.entries.values()) for (const d of dots) live.push(d);
  return s.ctx.subtract(CausalContext.of(live));
}
