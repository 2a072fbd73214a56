// The product of two lattices: pairs ordered componentwise. Join, leq, equality and bottom are the
// components' own; a join-decomposition is each component's irreducibles paired with the other's
// bottom (an irreducible of a product is irreducible in exactly one component); Δ(a, b) is the
// pair of the components' differences. Used for a COUNTER key, whose state is a PN-counter and
// the retry filter of its request ids (pncounter.ts), so that one stored state, one delta and one
// gossip message carry both. The codec is the product's own: it is not derived here.
import type { Lattice } from "./lattice.js";

export interface ProductParts<P, A, B> {
  readonly first: Lattice<A>;
  readonly second: Lattice<B>;
  /** The components of a pair (may share structure with it: they are only read). */
  split(p: P): [A, B];
  /** A pair of these components (owns them). */
  make(a: A, b: B): P;
  /** Make target (in place) equal to joined, a pair above it: how joinInPlace stores its result. */
  assign(target: P, joined: P): void;
}

/** The lattice operations of a product (everything but type, name, context and codec). */
export function productOps<P, A, B>(
  parts: ProductParts<P, A, B>,
): Pick<Lattice<P>, "bottom" | "isBottom" | "clone" | "join" | "joinInPlace" | "leq" | "equals" | "decompose" | "difference"> {
  const { first: L1, second: L2, split, make } = parts;
  const ops = {
    bottom: () => make(L1.bottom(), L2.bottom()),
    isBottom: (p: P) => {
      const [a, b] = split(p);
      return L1.isBottom(a) && L2.isBottom(b);
    },
    clone: (p: P) => {
      const [a, b] = split(p);
      return make(L1.clone(a), L2.clone(b));
    },
    join: (p: P, q: P) => {
      const [a1, b1] = split(p);
      const [a2, b2] = split(q);
      return make(L1.join(a1, a2), L2.join(b1, b2));
    },
    joinInPlace: (t: P, o: P) => {
      const [a1, b1] = split(t);
      const [a2, b2] = split(o);
      // Join into copies first: a throwing component join (a refused join) leaves t unchanged.
      const a = L1.clone(a1);
      const b = L2.clone(b1);
      const c1 = L1.joinInPlace(a, a2);
      const c2 = L2.joinInPlace(b, b2);
      if (c1 || c2) parts.assign(t, make(a, b));
      return c1 || c2;
    },
    leq: (p: P, q: P) => {
      const [a1, b1] = split(p);
      const [a2, b2] = split(q);
      return L1.leq(a1, a2) && L2.leq(b1, b2);
    },
    equals: (p: P, q: P) => {
      const [a1, b1] = split(p);
      const [a2, b2] = split(q);
      return L1.equals(a1, a2) && L2.equals(b1, b2);
    },
    decompose: (p: P) => {
      const [a, b] = split(p);
      return [...L1.decompose(a).map((x) => make(x, L2.bottom())), ...L2.decompose(b).map((y) => make(L1.bottom(), y))];
    },
    difference: (p: P, q: P) => {
      const [a1, b1] = split(p);
      const [a2, b2] = split(q);
      return make(L1.difference(a1, a2), L2.difference(b1, b2));
    },
  };
  return ops;
}
