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
 * The dots of c (the dots an incoming context removes) that no element the view has read holds,
 * or undefined when there are none: only those need a lookup (none, for a local re-add or remove).
 */
export function unheldDots(o: ObjectSlot, c: CausalContext): CausalContext | undefined {
  const found: Dot[] = [];
  o.view.forEachLoaded((_, dots) => {
    for (const d of dots) if (c.containsDot(d)) found.push(d);
  });
  if (found.length === c.dotCount()) return undefined;
  return found.length > 0 ? c.subtract(CausalContext.of(found)) : c;
}

/**
 * Read into the view every element holding a dot of rest (from unheldDots), so the window holds
 * all the join can drop: through the dot index, or, past the lookup limit, by one scan of the object.
 */
export async function loadOwners(o: ObjectSlot, env: StoreEnv, rest: CausalContext): Promise<void> {
  const owners = new Set<ElementKey>();
  if (rest.dotCount() <= env.removeLookupLimit) {
    await o.view.loadOwners(rest.dots());
    for (const d of rest.dots()) {
      const ek = await o.view.ownerOf(d);
      if (ek !== undefined) owners.add(ek);
    }
  } else {
    // Many dots: one pass over the object's elements is cheaper than a lookup each.
    await env.commit.written(); // the key's queued writes (none can queue under its lock) are in the database
    const offset = o.prefix.length + 1;
    for await (const [k, v] of env.db.iterator(elementRange(o.prefix))) {
      const ek = elementKey(unescapeBytes(k, offset).bytes);
      if (o.view.isLoaded(ek)) continue;
      if (decodeDots(v).some((d) => rest.containsDot(d))) owners.add(ek);
    }
  }
  await o.view.prefetch([...owners]);
}

export function sameDots(a: readonly Dot[], b: readonly Dot[]): boolean {
  return a.length === b.length && a.every((d, i) => sameDot(d, b[i]!));
}
