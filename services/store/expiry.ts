// Time to live: the sweep that garbage-collects expired adds from storage. The expiry index
// (keys.ts, 0x02) lists, in time order, the elements holding a dot that expires; a sweep reads the
// entries due by now and, under each key's lock, drops the dots whose time has come (the element
// record, its dot-index entries, the live count), which is a remove of those dots: the context
// keeps them, so no copy arriving later brings them back. Nothing is gossiped: every replica
// expires its own copies. Reads hide an expired dot before the sweep reaches it (liveDots).
import { AWSet, CausalContext, type Dot } from "../crdt/index.js";
import type { ObjectSlot } from "./layout.js";
import { elementKey } from "../crdt/index.js";

/** The dots of an element that have not expired at now. */
export function liveDots(dots: Dot[], now: number): Dot[] {
  return dots.some((d) => d.expiresAt !== undefined && d.expiresAt <= now) ? dots.filter((d) => d.expiresAt === undefined || d.expiresAt > now) : dots;
}

/**
 * Drop the expired dots of these elements of one object (under its lock). Returns the remove
 * delta it amounts to, ({}, {expired dots}), for the change feed.
 */
export async function expireElements(o: ObjectSlot, elements: Uint8Array[], now: number): Promise<AWSet> {
  const eks = await o.view.loadBytes(elements);
  const gone: Dot[] = [];
  for (const ek of new Set(eks)) {
    const dots = o.view.loadedDots(ek);
    const keep = liveDots(dots, now);
    if (keep.length === dots.length) continue;
    for (const d of dots) if (!keep.includes(d)) gone.push(d);
    o.view.setDots(ek, keep, o.h);
  }
  return AWSet.fromParts(new Map(), CausalContext.of(gone));
}

/** Group due expiry entries by object key, keeping each element once. */
export function groupByKey(entries: Iterable<{ key: string; element: Buffer }>): Map<string, Buffer[]> {
  const out = new Map<string, Map<string, Buffer>>();
  for (const e of entries) {
    let m = out.get(e.key);
    if (m === undefined) out.set(e.key, (m = new Map()));
    m.set(elementKey(e.element), e.element);
  }
  return new Map([...out].map(([k, m]) => [k, [...m.values()]]));
}
