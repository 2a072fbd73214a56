// Dot stores and their causal join (Almeida, Shoker, Baquero; seed 000 section 3.2).
//
// A causal state is (store, context). A dot in the context but absent from the store means
// "removed", so no per-element tombstones are needed. Every join takes both contexts:
//   DotSet:  (s ∩ s') ∪ (s \ c') ∪ (s' \ c)
//   DotFun:  common dots joined by value, plus each side's dots the other has not seen
//   DotMap:  per key, the inner join under the *whole* contexts; bottom values dropped
// Stores here are immutable values; the joins return new stores.
import type { CausalContext } from "./causal-context.js";
import { type Dot, compareDots, dotKey, sameDot } from "./dot.js";

export interface DotStoreKind<S> {
  bottom(): S;
  isBottom(s: S): boolean;
  dots(s: S): Iterable<Dot>;
  join(a: S, ca: CausalContext, b: S, cb: CausalContext): S;
  equals(a: S, b: S): boolean;
}

/** A lattice of values held under a dot (for DotFun). */
export interface ValueLattice<V> {
  join(a: V, b: V): V;
  equals(a: V, b: V): boolean;
}

// ---------------------------------------------------------------- DotSet

/** A set of dots, sorted by compareDots, no duplicates. */
export type DotSet = readonly Dot[];

export function joinDotSets(a: DotSet, ca: CausalContext, b: DotSet, cb: CausalContext): DotSet {
  const out: Dot[] = [];
  let i = 0;
  let j = 0;
  // Both sides are sorted: a merge walk keeps the result sorted.
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    const cmp = x === undefined ? 1 : y === undefined ? -1 : compareDots(x, y);
    if (cmp === 0) {
      out.push(x!);
      i++;
      j++;
    } else if (cmp < 0) {
      if (!cb.containsDot(x!)) out.push(x!);
      i++;
    } else {
      if (!ca.containsDot(y!)) out.push(y!);
      j++;
    }
  }
  return out;
}

export const DotSetStore: DotStoreKind<DotSet> = {
  bottom: () => [],
  isBottom: (s) => s.length === 0,
  dots: (s) => s,
  join: joinDotSets,
  equals: (a, b) => a.length === b.length && a.every((d, i) => sameDot(d, b[i]!)),
};

// ---------------------------------------------------------------- DotFun

export interface DotFunEntry<V> {
  readonly dot: Dot;
  readonly value: V;
}

/** A map from dot to a lattice value, keyed by dotKey. */
export type DotFun<V> = ReadonlyMap<string, DotFunEntry<V>>;

export function dotFunStore<V>(values: ValueLattice<V>): DotStoreKind<DotFun<V>> {
  return {
    bottom: () => new Map(),
    isBottom: (s) => s.size === 0,
    dots: (s) => [...s.values()].map((e) => e.dot),
    join(a, ca, b, cb) {
      const out = new Map<string, DotFunEntry<V>>();
      for (const [k, e] of a) {
        const other = b.get(k);
        if (other !== undefined) out.set(k, { dot: e.dot, value: values.join(e.value, other.value) });
        else if (!cb.containsDot(e.dot)) out.set(k, e);
      }
      for (const [k, e] of b) {
        if (!a.has(k) && !ca.containsDot(e.dot)) out.set(k, e);
      }
      return out;
    },
    equals(a, b) {
      if (a.size !== b.size) return false;
      for (const [k, e] of a) {
        const o = b.get(k);
        if (o === undefined || !values.equals(e.value, o.value)) return false;
      }
      return true;
    },
  };
}

// ---------------------------------------------------------------- DotMap

/** A map from a key (a latin1 string of the key bytes, so string order = byte order) to a store. */
export type DotMap<V> = ReadonlyMap<string, V>;

export function dotMapStore<V>(inner: DotStoreKind<V>): DotStoreKind<DotMap<V>> {
  return {
    bottom: () => new Map(),
    isBottom: (s) => s.size === 0,
    *dots(s) {
      for (const v of s.values()) yield* inner.dots(v);
    },
    join(a, ca, b, cb) {
      const out = new Map<string, V>();
      const bottom = inner.bottom();
      for (const [k, v] of a) {
        const joined = inner.join(v, ca, b.get(k) ?? bottom, cb);
        if (!inner.isBottom(joined)) out.set(k, joined);
      }
      for (const [k, v] of b) {
        if (a.has(k)) continue;
        const joined = inner.join(bottom, ca, v, cb);
        if (!inner.isBottom(joined)) out.set(k, joined);
      }
      return out;
    },
    equals(a, b) {
      if (a.size !== b.size) return false;
      for (const [k, v] of a) {
        const o = b.get(k);
        if (o === undefined || !inner.equals(v, o)) return false;
      }
      return true;
    },
  };
}
