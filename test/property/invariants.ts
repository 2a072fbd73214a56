// Invariant checkers for kernel states, written independently of the kernel's own validation
// (linear scans over the context's ranges, plain string sets), so that a bug in the codec's
// checks is not mirrored here.
import type { AWSet, CausalContext, Dot, PNCounter } from "../../services/crdt/index.js";

const key = (d: Dot) => `${d.replica}\u0000${d.counter}`;

function covered(ctx: CausalContext, d: Dot): boolean {
  for (const [first, last] of ctx.rangesOf(d.replica)) if (first <= d.counter && d.counter <= last) return true;
  return false;
}

/** The context's ranges are canonical: integers >= 1, ascending, disjoint, not adjacent. */
export function contextProblems(ctx: CausalContext): string[] {
  const out: string[] = [];
  for (const r of ctx.replicas()) {
    if (r.length === 0) out.push("empty replica id in context");
    const ranges = ctx.rangesOf(r);
    if (ranges.length === 0) out.push(`replica ${r} listed with no ranges`);
    let prevLast = -1;
    for (const [first, last] of ranges) {
      if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last)) out.push(`${r}: non-integer range`);
      if (first < 1 || last < first) out.push(`${r}: bad range ${first}..${last}`);
      if (prevLast >= 0 && first <= prevLast + 1) out.push(`${r}: range ${first}..${last} overlaps or touches previous`);
      prevLast = last;
    }
  }
  return out;
}

function sortedStrictly(dots: readonly Dot[]): boolean {
  for (let i = 1; i < dots.length; i++) {
    const a = dots[i - 1]!;
    const b = dots[i]!;
    if (a.replica > b.replica || (a.replica === b.replica && a.counter >= b.counter)) return false;
  }
  return true;
}

export function awsetProblems(s: AWSet): string[] {
  const out = contextProblems(s.ctx);
  const seen = new Map<string, string>();
  let total = 0;
  for (const [k, dots] of s.entries) {
    for (let i = 0; i < k.length; i++) if (k.charCodeAt(i) > 255) out.push(`element key ${JSON.stringify(k)} is not latin1`);
    if (dots.length === 0) out.push(`element ${JSON.stringify(k)} has no dots`);
    if (!sortedStrictly(dots)) out.push(`element ${JSON.stringify(k)}: dots not sorted/unique`);
    for (const d of dots) {
      total++;
      if (!covered(s.ctx, d)) out.push(`dot (${d.replica},${d.counter}) not covered by the context`);
      const other = seen.get(key(d));
      if (other !== undefined && other !== k) out.push(`dot (${d.replica},${d.counter}) under two elements`);
      seen.set(key(d), k);
      if (s.ownerOf(d) !== k) out.push(`dot index: (${d.replica},${d.counter}) not indexed to its element`);
    }
  }
  if (s.dotCount() !== total) out.push(`dot index holds ${s.dotCount()} dots, store holds ${total}`);
  return out;
}

export function counterProblems(c: PNCounter): string[] {
  const out = contextProblems(c.ctx);
  const replicas = new Set<string>();
  for (const e of c.entries.values()) {
    if (!covered(c.ctx, e.dot)) out.push(`dot (${e.dot.replica},${e.dot.counter}) not covered by the context`);
    if (replicas.has(e.dot.replica)) out.push(`two entries for replica ${e.dot.replica}`);
    replicas.add(e.dot.replica);
    if (e.value.positive < 0n || e.value.negative < 0n) out.push("negative total");
  }
  return out;
}
