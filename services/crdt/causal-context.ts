// Causal context: the set of dots (events) a replica has seen.
//
// Per replica the counters are kept as sorted, disjoint, non-adjacent closed ranges
// [first, last]. A range starting at 1 is the version-vector entry; the other ranges are the
// "dot cloud" of stragglers. Ranges (rather than single straggler dots) keep the difference of
// two contexts compact, which redundancy removal (RR) and deltas both need. Compaction is
// automatic: every insertion merges adjacent ranges, so the cloud folds into the prefix as soon
// as a gap fills.
import { type Dot, compareDots, makeDot, mintCounters } from "./dot.js";

/** Flat list [first0, last0, first1, last1, ...], sorted, disjoint, non-adjacent. */
type Ranges = number[];

export class CausalContext {
  private readonly byReplica: Map<string, Ranges>;

  constructor(byReplica?: Map<string, Ranges>) {
    this.byReplica = byReplica ?? new Map();
  }

  /** A context holding exactly the given dots. */
  static of(dots: Iterable<Dot>): CausalContext {
    // Sorted insertion keeps every addRange on its O(1) fast path; unsorted input (a store in
    // element order) would otherwise rebuild the range list per dot, O(n^2).
    const sorted = [...dots].sort(compareDots);
    const c = new CausalContext();
    for (const d of sorted) c.add(d.replica, d.counter);
    return c;
  }

  /** A context holding 1..counter for each replica in the vector. */
  static fromVector(vv: Iterable<[string, number]>): CausalContext {
    const c = new CausalContext();
    for (const [r, n] of vv) if (n > 0) c.addRange(r, 1, n);
    return c;
  }

  clone(): CausalContext {
    const m = new Map<string, Ranges>();
    for (const [r, ranges] of this.byReplica) m.set(r, ranges.slice());
    return new CausalContext(m);
  }

  contains(replica: string, counter: number): boolean {
    const ranges = this.byReplica.get(replica);
    if (ranges === undefined) return false;
    return rangeIndex(ranges, counter) >= 0;
  }

  containsDot(d: Dot): boolean {
    return this.contains(d.replica, d.counter);
  }

  /** Highest counter seen for the replica (0 if none). */
  max(replica: string): number {
    const ranges = this.byReplica.get(replica);
    return ranges === undefined || ranges.length === 0 ? 0 : ranges[ranges.length - 1]!;
  }

  /** The contiguous prefix 1..n seen for the replica (its version-vector entry). */
  prefix(replica: string): number {
    const ranges = this.byReplica.get(replica);
    return ranges !== undefined && ranges.length > 0 && ranges[0] === 1 ? ranges[1]! : 0;
  }

  /** The next dot the replica would mint: (replica, max + 1). */
  nextDot(replica: string): Dot {
    return makeDot(replica, mintCounters(replica, this.max(replica)));
  }

  add(replica: string, counter: number): void {
    this.addRange(replica, counter, counter);
  }

  addDot(d: Dot): void {
    this.addRange(d.replica, d.counter, d.counter);
  }

  /** Insert the closed range first..last, merging with neighbours. */
  addRange(replica: string, first: number, last: number): void {
    if (!(first >= 1 && last >= first)) throw new RangeError(`bad dot range ${first}..${last}`);
    let ranges = this.byReplica.get(replica);
    if (ranges === undefined) {
      this.byReplica.set(replica, [first, last]);
      return;
    }
    const n = ranges.length;
    // Fast path: extends or follows the last range (the common case of local events).
    if (first >= ranges[n - 2]!) {
      if (first <= ranges[n - 1]! + 1) {
        if (last > ranges[n - 1]!) ranges[n - 1] = last;
      } else {
        ranges.push(first, last);
      }
      return;
    }
    // General case: rebuild, merging overlapping or adjacent ranges.
    const out: Ranges = [];
    let placed = false;
    let f = first;
    let l = last;
    for (let i = 0; i < n; i += 2) {
      const a = ranges[i]!;
      const b = ranges[i + 1]!;
      if (b + 1 < f) {
        out.push(a, b);
      } else if (l + 1 < a) {
        if (!placed) {
          out.push(f, l);
          placed = true;
        }
        out.push(a, b);
      } else {
        f = Math.min(f, a);
        l = Math.max(l, b);
      }
    }
    if (!placed) out.push(f, l);
    ranges = out;
    this.byReplica.set(replica, ranges);
  }

  /** In-place union with another context. */
  joinInPlace(other: CausalContext): this {
    for (const [r, ranges] of other.byReplica) {
      const mine = this.byReplica.get(r);
      if (mine === undefined) this.byReplica.set(r, ranges.slice());
      else if (ranges.length === 2) this.addRange(r, ranges[0]!, ranges[1]!);
      else this.byReplica.set(r, mergeRanges(mine, ranges)); // linear, not one rebuild per range
    }
    return this;
  }

  /** Pure union. */
  join(other: CausalContext): CausalContext {
    return this.clone().joinInPlace(other);
  }

  /** Every dot of this context is in other. */
  leq(other: CausalContext): boolean {
    for (const [r, ranges] of this.byReplica) {
      const o = other.byReplica.get(r);
      if (o === undefined) return false;
      for (let i = 0; i < ranges.length; i += 2) {
        const k = rangeIndex(o, ranges[i]!);
        if (k < 0 || o[k + 1]! < ranges[i + 1]!) return false;
      }
    }
    return true;
  }

  equals(other: CausalContext): boolean {
    return this.leq(other) && other.leq(this);
  }

  /** The dots of this context that are not in other. */
  subtract(other: CausalContext): CausalContext {
    const out = new CausalContext();
    for (const [r, ranges] of this.byReplica) {
      const o = other.byReplica.get(r) ?? [];
      // One merge walk over both sorted lists: j skips other's ranges wholly below the current
      // range (they are below every later range too), so the cost is linear, not |this|·|other|.
      let j = 0;
      for (let i = 0; i < ranges.length; i += 2) {
        let cur = ranges[i]!;
        const end = ranges[i + 1]!;
        while (j < o.length && o[j + 1]! < cur) j += 2;
        for (let k = j; k < o.length && cur <= end; k += 2) {
          const oa = o[k]!;
          const ob = o[k + 1]!;
          if (oa > end) break;
          if (oa > cur) out.addRange(r, cur, oa - 1);
          cur = ob + 1;
        }
        if (cur <= end) out.addRange(r, cur, end);
      }
    }
    return out;
  }

  /**
   * Some dot is in both contexts. Costs about the smaller side: its replicas are looked up in the
   * other, and each of its ranges found there by binary search.
   */
  intersects(other: CausalContext): boolean {
    const [small, large] = this.byReplica.size <= other.byReplica.size ? [this, other] : [other, this];
    for (const [r, a] of small.byReplica) {
      const b = large.byReplica.get(r);
      if (b === undefined) continue;
      const [few, many] = a.length <= b.length ? [a, b] : [b, a];
      for (let i = 0; i < few.length; i += 2) if (overlaps(many, few[i]!, few[i + 1]!)) return true;
    }
    return false;
  }

  /** The dots in both contexts. */
  intersect(other: CausalContext): CausalContext {
    return this.subtract(this.subtract(other));
  }

  isEmpty(): boolean {
    return this.byReplica.size === 0;
  }

  /** Number of dots covered (may be large: a prefix 1..n counts n). */
  dotCount(): number {
    let n = 0;
    for (const ranges of this.byReplica.values()) {
      for (let i = 0; i < ranges.length; i += 2) n += ranges[i + 1]! - ranges[i]! + 1;
    }
    return n;
  }

  /** Size metric of the compact form: replicas plus ranges stored. */
  size(): { replicas: number; ranges: number } {
    let ranges = 0;
    for (const r of this.byReplica.values()) ranges += r.length / 2;
    return { replicas: this.byReplica.size, ranges };
  }

  /** Replica ids, sorted. */
  replicas(): string[] {
    return [...this.byReplica.keys()].sort();
  }

  /** The ranges of one replica as [first, last] pairs. */
  rangesOf(replica: string): Array<[number, number]> {
    const ranges = this.byReplica.get(replica) ?? [];
    const out: Array<[number, number]> = [];
    for (let i = 0; i < ranges.length; i += 2) out.push([ranges[i]!, ranges[i + 1]!]);
    return out;
  }

  /** Enumerate every dot (tests and decomposition of small contexts only). */
  *dots(): IterableIterator<Dot> {
    for (const r of this.replicas()) {
      const ranges = this.byReplica.get(r)!;
      for (let i = 0; i < ranges.length; i += 2) {
        for (let n = ranges[i]!; n <= ranges[i + 1]!; n++) yield makeDot(r, n);
      }
    }
  }
}

/** Union of two canonical range lists, canonical again (overlaps and adjacency merged). */
function mergeRanges(a: Ranges, b: Ranges): Ranges {
  const out: Ranges = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    let f: number;
    let l: number;
    if (j >= b.length || (i < a.length && a[i]! <= b[j]!)) {
      f = a[i]!;
      l = a[i + 1]!;
      i += 2;
    } else {
      f = b[j]!;
      l = b[j + 1]!;
      j += 2;
    }
    const n = out.length;
    if (n > 0 && f <= out[n - 1]! + 1) {
      if (l > out[n - 1]!) out[n - 1] = l;
    } else {
      out.push(f, l);
    }
  }
  return out;
}

/** Some range of the list meets first..last. */
function overlaps(ranges: Ranges, first: number, last: number): boolean {
  // The first range ending at or after first: it meets first..last unless it starts after last.
  let lo = 0;
  let hi = ranges.length / 2;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ranges[2 * mid + 1]! < first) lo = mid + 1;
    else hi = mid;
  }
  return lo < ranges.length / 2 && ranges[2 * lo]! <= last;
}

/** Index of the range containing x (even index into the flat list), or -1. */
function rangeIndex(ranges: Ranges, x: number): number {
  let lo = 0;
  let hi = ranges.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const a = ranges[2 * mid]!;
    const b = ranges[2 * mid + 1]!;
    if (x < a) hi = mid - 1;
    else if (x > b) lo = mid + 1;
    else return 2 * mid;
  }
  return -1;
}
