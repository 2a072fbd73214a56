// The part of a stored set one operation works on, as an in-memory AWSet: the elements the write
// view has read, and the object's whole context (shared with the working header, so the join's
// context change lands in the header). The set's join and delta mutators run on this window; the
// changes are then written back through the write view (element records, dot index, size).
import { AWSet, CausalContext, type Dot, type DotSet, type ElementKey, elementKey, sameDot } from "../crdt/index.js";
import type { ObjectSlot, StoreEnv } from "./layout.js";
import { elementRange, unescapeBytes } from "./keys.js";
import { decodeDots } from "./records.js";

/** An AWSet of every element the view has read (live ones), over the header's context. */
export function windowOf(o: ObjectSlot): AWSet {
  const entries = new Map<ElementKey, DotSet>();
  o.view.forEachLoaded((ek, dots) => {
    if (dots.length > 0) entries.set(ek, dots);
  });
  return AWSet.fromParts(entries, o.h.ctx);
}

/** Write the window's elements that changed back through the view. */
export function writeBack(o: ObjectSlot, window: AWSet): void {
  const changed: Array<[ElementKey, DotSet]> = [];
  o.view.forEachLoaded((ek, dots) => {
    const after = window.entries.get(ek) ?? [];
    if (!sameDots(dots, after)) changed.push([ek, after]);
  });
  for (const [ek, after] of changed) o.view.setDots(ek, after, o.h);
}

/**
 * Read into the view every element holding a dot of c (the dots an incoming context removes), so
 * the window holds all the join can drop. Dots of elements already read need no lookup; the rest
 * are found through the dot index, or, past the lookup limit, by one scan of the object.
 */
/** Whether every dot of c is held by an element the view has read (nothing to look up). */
export function heldByLoaded(o: ObjectSlot, c: CausalContext): boolean {
  const n = c.dotCount();
  let found = 0;
  o.view.forEachLoaded((_, dots) => {
    for (const d of dots) if (c.containsDot(d)) found++;
  });
  return found === n;
}

export async function loadOwners(o: ObjectSlot, env: StoreEnv, c: CausalContext): Promise<void> {
  let rest = c;
  const found: Dot[] = [];
  o.view.forEachLoaded((_, dots) => {
    for (const d of dots) if (c.containsDot(d)) found.push(d);
  });
  if (found.length === c.dotCount()) return; // all held by elements already read (a re-add, a remove)
  if (found.length > 0) rest = c.subtract(CausalContext.of(found));
  const owners = new Set<ElementKey>();
  if (rest.dotCount() <= env.removeLookupLimit) {
    await o.view.loadOwners(rest.dots());
    for (const d of rest.dots()) {
      const ek = await o.view.ownerOf(d);
      if (ek !== undefined) owners.add(ek);
    }
  } else {
    // Many dots: one pass over the object's elements is cheaper than a lookup each.
    await env.commit.drain();
    const offset = o.prefix.length + 1;
    for await (const [k, v] of env.db.iterator(elementRange(o.prefix))) {
      const ek = elementKey(unescapeBytes(k, offset).bytes);
      if (o.view.isLoaded(ek)) continue;
      if (decodeDots(v).some((d) => rest.containsDot(d))) owners.add(ek);
    }
  }
  await o.view.prefetch([...owners]);
}

function sameDots(a: readonly Dot[], b: readonly Dot[]): boolean {
  return a.length === b.length && a.every((d, i) => sameDot(d, b[i]!));
}
