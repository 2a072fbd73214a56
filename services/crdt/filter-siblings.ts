// A filter key's siblings: the filters of one key built with different parameters.
//
// A filter key takes its parameters from its first Add. Two nodes can both take a first Add of the
// same key at once, with different parameters: their bits (or fingerprints) mean different things
// and cannot be joined, so until now each node kept its own filter and answered the other's
// elements absent for good, a false negative no filter may give. Here the key holds both filters,
// as siblings: the state is a map from parameters to a filter of those parameters, joined
// pointwise (a lattice: a product of the filters' own lattices, keyed by parameters). So every
// node converges to the same siblings, and no acknowledged element is ever answered absent:
//   - contains: "maybe present" when any sibling says so (the rate is about the sum of theirs);
//   - add: into the main sibling only (the one of most bytes, then of the least parameter key, the
//     same choice on every node), so the others stop growing;
//   - remove (ORCF, SCORCF): from every sibling holding the element, as observed-remove asks.
// A key of one filter encodes exactly as that filter did; several encode as a list (SIBLINGS kind).
// At most MAX_SIBLINGS: a join past it is refused as a conflict (gossip skips the key, Merge
// answers FAILED_PRECONDITION), so a writer cannot multiply a key's memory without bound.
//
// Beside its filters a key holds the retry filter of its Adds' request ids (retry-filter.ts, as a
// counter does): a cuckoo filter stores one more copy per Add, so an Add retried after a timeout
// would otherwise be stored twice, and one Remove would leave a copy. The key's state is the
// product of the siblings and that filter (joined component by component); a key never added to
// with an id has a bottom retry filter and encodes exactly as before (else: WITH_RETRY kind).
import { CausalContext } from "./causal-context.js";
import { HASH_FAMILY } from "./element-hash.js";
import { DecodeError, JoinConflictError } from "./errors.js";
import { ByteReader, ByteWriter, FilterKind, FILTER_FORMAT, readHeader, writeHeader } from "./filter-common.js";
import { type DecodeBound, type Lattice, joinIntoCopy } from "./lattice.js";
import type { ClientOperations, StateFigures } from "./operations.js";
import { type ReplicatedFbf, RetryFilterLattice, pruneInPlace, retryIdDelta } from "./retry-filter.js";

/** Most siblings a key holds: concurrent first Adds with as many different parameters. */
export const MAX_SIBLINGS = 4;

/** What the siblings need of a filter type beyond its lattice. */
export interface SiblingKind<F> {
  /** The filter's parameters (a flat record), null for the parameterless bottom. */
  params(f: F): object | null;
  /** Bytes a full filter of f's parameters takes: the largest sibling is the main one. */
  bytes(f: F): number;
}

/** The filters of one key, each with parameters, no two alike: the main one first, then the others in the same order. */
export class FilterSiblings<F> {
  constructor(
    readonly filters: F[],
    /** The request ids of the key's Adds (bottom when no Add carried one). */
    public retry: ReplicatedFbf = RetryFilterLattice.bottom(),
  ) {}

  get main(): F | undefined {
    return this.filters[0];
  }
}

/** A join would leave a key more than MAX_SIBLINGS filters. Nothing was changed. */
export class TooManySiblingsError extends JoinConflictError {
  override readonly name = "TooManySiblingsError";
}

/** paramsKey of each parameters object met (they are never changed once made): joins ask often. */
const keys = new WeakMap<object, string>();

/** A canonical text of flat parameters: the same on every node, whatever order the fields were set in. */
function paramsKey(p: object): string {
  let k = keys.get(p);
  if (k === undefined) keys.set(p, (k = JSON.stringify(Object.entries(p).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))));
  return k;
}

/** The lattice of a filter type's keys: siblings of filters of that type (see the header). */
export function siblingLattice<F>(L: Lattice<F>, kind: SiblingKind<F>): Lattice<FilterSiblings<F>> {
  const keyOf = (f: F) => paramsKey(kind.params(f)!);
  const order = (a: F, b: F) => {
    const bytes = kind.bytes(b) - kind.bytes(a);
    if (bytes !== 0) return bytes;
    const ka = keyOf(a);
    const kb = keyOf(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  };
  // A filter with nothing in it (an add's delta for an element already present) adds nothing, as in
  // the filters' own joins: only the live siblings count, in every law and in the codec.
  const live = (s: FilterSiblings<F>) => s.filters.filter((f) => !L.isBottom(f));
  const withParams = (fs: F[]) => fs.filter((f) => kind.params(f) !== null);
  const same = (s: FilterSiblings<F>, f: F): F | undefined => {
    const k = keyOf(f);
    return s.filters.find((g) => keyOf(g) === k);
  };
  const tooMany = (n: number) =>
    new TooManySiblingsError(`a ${L.name} key created with ${n} different parameter sets at once; a key keeps at most ${MAX_SIBLINGS}`);

  function joinInPlace(t: FilterSiblings<F>, o: FilterSiblings<F>): boolean {
    const incoming = live(o);
    const added = incoming.filter((f) => same(t, f) === undefined);
    if (t.filters.length + added.length > MAX_SIBLINGS) throw tooMany(t.filters.length + added.length);
    let changed = false;
    for (const f of incoming) {
      const g = same(t, f);
      if (g !== undefined) changed = L.joinInPlace(g, f) || changed;
    }
    if (added.length > 0) {
      t.filters.push(...added.map((f) => L.clone(f)));
      t.filters.sort(order);
      changed = true;
    }
    // Last: the retry filter's join never refuses, so a refused join above changed nothing.
    return RetryFilterLattice.joinInPlace(t.retry, o.retry) || changed;
  }

  const R = RetryFilterLattice;
  const of = (fs: F[], retry = R.bottom()) => new FilterSiblings(withParams(fs).sort(order), retry);
  const clone = (s: FilterSiblings<F>) => new FilterSiblings(s.filters.map((f) => L.clone(f)), R.clone(s.retry));

  /** The key's state with a retry filter: its filters' encoding and the retry filter's, behind a WITH_RETRY header. */
  function encode(s: FilterSiblings<F>): Uint8Array {
    if (R.isBottom(s.retry)) return encodeFilters(s);
    const w = new ByteWriter();
    writeHeader(w, FilterKind.WITH_RETRY, HASH_FAMILY, true);
    w.varint(L.type);
    const filters = encodeFilters(s);
    const retry = R.encode(s.retry);
    w.varint(filters.length).bytes(filters).varint(retry.length).bytes(retry);
    return w.finish();
  }

  function decode(bytes: Uint8Array, nowMs?: number, bound?: DecodeBound): FilterSiblings<F> {
    if (bytes.length < 2 || bytes[1] !== FilterKind.WITH_RETRY) return decodeFilters(bytes, nowMs, bound);
    const r = new ByteReader(bytes);
    readHeader(r, FilterKind.WITH_RETRY, HASH_FAMILY);
    const type = r.varint("key type");
    if (type !== L.type) throw new DecodeError(`${L.name} with retry filter: the key is of type ${type}`);
    const s = decodeFilters(r.bytes(r.varint("filters length"), "filters"), nowMs, bound);
    s.retry = R.decode(r.bytes(r.varint("retry filter length"), "retry filter"), nowMs, bound);
    if (R.isBottom(s.retry)) throw new DecodeError(`${L.name} with retry filter: the retry filter is empty (a key without one encodes as its filters)`);
    r.end(`${L.name} with retry filter`);
    return s;
  }

  function encodeFilters(s: FilterSiblings<F>): Uint8Array {
    const fs = s.filters.length === 1 ? s.filters : live(s);
    if (fs.length <= 1) return L.encode(fs[0] ?? L.bottom());
    const w = new ByteWriter();
    writeHeader(w, FilterKind.SIBLINGS, HASH_FAMILY, true);
    w.varint(L.type).varint(fs.length);
    for (const f of fs) {
      const b = L.encode(f);
      w.varint(b.length).bytes(b);
    }
    return w.finish();
  }

  function decodeFilters(bytes: Uint8Array, nowMs?: number, bound?: DecodeBound): FilterSiblings<F> {
    if (bytes.length < 2 || bytes[1] !== FilterKind.SIBLINGS) return of([L.decode(bytes, nowMs, bound)]);
    const r = new ByteReader(bytes);
    readHeader(r, FilterKind.SIBLINGS, HASH_FAMILY);
    const type = r.varint("sibling type");
    if (type !== L.type) throw new DecodeError(`${L.name} siblings: the list is of type ${type}`);
    const n = r.varint("sibling count", MAX_SIBLINGS);
    if (n < 2) throw new DecodeError(`${L.name} siblings: a list of ${n} (one filter encodes as itself)`);
    const filters: F[] = [];
    for (let i = 0; i < n; i++) {
      const f = L.decode(r.bytes(r.varint("sibling length"), `sibling ${i}`), nowMs, bound);
      if (kind.params(f) === null || L.isBottom(f)) throw new DecodeError(`${L.name} siblings: sibling ${i} is empty`);
      if (i > 0 && order(filters[i - 1]!, f) >= 0) throw new DecodeError(`${L.name} siblings: not in their order, or two with the same parameters, at ${i}`);
      filters.push(f);
    }
    r.end(`${L.name} siblings`);
    return new FilterSiblings(filters);
  }

  return {
    type: L.type,
    name: L.name,
    bottom: () => new FilterSiblings<F>([]),
    isBottom: (s) => live(s).length === 0 && R.isBottom(s.retry),
    clone,
    join: joinIntoCopy(clone, joinInPlace),
    joinInPlace,
    leq: (a, b) =>
      R.leq(a.retry, b.retry) &&
      live(a).every((f) => {
        const g = same(b, f);
        return g !== undefined && L.leq(f, g);
      }),
    equals(a, b) {
      const la = live(a);
      const lb = live(b);
      return la.length === lb.length && la.every((f, i) => keyOf(f) === keyOf(lb[i]!) && L.equals(f, lb[i]!)) && R.equals(a.retry, b.retry);
    },
    decompose: (s) => [
      ...live(s).flatMap((f) => L.decompose(f).map((d) => new FilterSiblings([d]))),
      ...R.decompose(s.retry).map((r) => new FilterSiblings<F>([], r)),
    ],
    difference(a, b) {
      const parts = live(a).map((f) => {
        const g = same(b, f);
        return g === undefined ? L.clone(f) : L.difference(f, g);
      });
      return of(parts.filter((d) => !L.isBottom(d)), R.difference(a.retry, b.retry));
    },
    context(s) {
      if (s.filters.length <= 1) return s.filters[0] === undefined ? new CausalContext() : L.context(s.filters[0]);
      const c = new CausalContext();
      for (const f of s.filters) c.joinInPlace(L.context(f));
      return c;
    },
    encode,
    encodedSize: (s) => (s.filters.length <= 1 && R.isBottom(s.retry) ? L.encodedSize(s.filters[0] ?? L.bottom()) : encode(s).length),
    decode,
    size: (s) => s.filters.reduce((n, f) => n + (L.size?.(f) ?? 1), 0),
  };
}

/** A filter type's client operations over its siblings (see the header). */
export function siblingOperations<F>(ops: ClientOperations<F>): ClientOperations<FilterSiblings<F>> {
  const containsAny = (s: FilterSiblings<F>, elements: readonly Uint8Array[]) => {
    const out = elements.map(() => false);
    for (const f of s.filters) ops.contains(f, elements).forEach((p, i) => (out[i] ||= p));
    return out;
  };
  const remove = ops.remove;
  const stateBytes = ops.stateBytes;
  return {
    create: (p) => new FilterSiblings([ops.create(p)]),
    sizeOf: (p) => ops.sizeOf(p),
    stateBytes: stateBytes === undefined ? undefined : (s) => s.filters.reduce((n, f) => n + stateBytes(f), 0),
    add: (s, elements, env) => new FilterSiblings([ops.add(s.main!, elements, env)]),
    addOnce(s, elements, env, retry) {
      const ids = retryIdDelta(s.retry, retry, "the key's");
      if (ids === null) return { duplicate: true };
      // The id goes in with the add: one delta, one write. Epochs past the window are dropped here.
      const delta = new FilterSiblings([ops.add(s.main!, elements, env)], ids);
      pruneInPlace(s.retry, retry.now);
      RetryFilterLattice.joinInPlace(s.retry, delta.retry);
      return { duplicate: false, delta };
    },
    remove:
      remove === undefined
        ? undefined
        : (s, elements, env) => {
            const deltas: F[] = [];
            for (const f of s.filters) {
              const held = ops.contains(f, elements);
              const here = elements.filter((_, i) => held[i]);
              if (here.length > 0) deltas.push(remove(f, here, env));
            }
            return new FilterSiblings(deltas);
          },
    retryIds: (s) => (s.retry.params === null ? undefined : s.retry),
    contains: containsAny,
    probabilistic: ops.probabilistic,
    describe(s): StateFigures {
      // A key made by a Merge of an empty filter holds none: nothing in it, no parameters yet.
      if (s.main === undefined) return { estimatedFalsePositiveRate: 0, loadFactor: 0, estimatedCount: 0, parameters: null };
      const main = ops.describe(s.main);
      if (s.filters.length === 1) return main;
      const others = s.filters.slice(1).map((f) => ops.describe(f));
      const all = [main, ...others];
      return {
        // Maybe present when any sibling says so.
        estimatedFalsePositiveRate: 1 - all.reduce((q, d) => q * (1 - d.estimatedFalsePositiveRate), 1),
        // The main filter's, where adds go.
        loadFactor: main.loadFactor,
        estimatedCount: all.reduce((n, d) => n + d.estimatedCount, 0),
        parameters: { ...(main.parameters as object), concurrentlyCreated: others.map((d) => d.parameters) },
      };
    },
    isUnset: (s) => s.main === undefined || ops.isUnset(s.main),
  };
}
