// The bigset layout of an add-wins set (seed 004): a header with the context and the live-element
// count, one record per live element (its dots) and a dot index (dot → element). A join loads
// only the elements it can touch into an AWSet window (element-window.ts) and runs the set's own
// join on it (AWSet.joinInPlace): the elements the incoming state carries, and those holding the
// dots its context removes (found through the dot index, or by one scan of the object when
// there are many). Then it writes back what changed, and applies the deferred removes the join
// made applicable (pending-removes.ts).
import {
  AWSet,
  AWSetLattice,
  type CausalContext,
  type DotSet,
  type ElementKey,
  ObjectType,
  awsetEntrySize,
  chunkSliceContext,
  elementKey,
  removedDots,
  sameDot,
} from "../crdt/index.js";
import type { JoinResult, ObjectLayout, ObjectSlot, StoreEnv } from "./layout.js";
import { elementRange, elementRecordKey, unescapeBytes } from "./keys.js";
import { decodeDots } from "./records.js";
import { verifyObject } from "./verify.js";
import { emptyLiveDigest } from "./live-digest.js";
import { loadOwners, sameDots, unheldDots, windowOf, writeBack } from "./element-window.js";
import { CausalContext as Ctx } from "../crdt/causal-context.js";

async function join(o: ObjectSlot, env: StoreEnv, incoming: AWSet, wantNewPart: boolean): Promise<JoinResult<AWSet>> {
  const removed = removedDots(incoming);
  // Nothing new, decided from the header alone: every dot the incoming state names was seen here
  // already, and it removes none (each dot of its context is one of its live dots). Such a join
  // adds nothing (its dots are here or were removed here) and removes nothing, so no element
  // record need be read. Gossip brings many of these: a delta a node already got from its origin
  // arrives again through the other neighbours.
  if (removed.isEmpty() && incoming.ctx.leq(o.h.ctx)) return { changed: false, newPart: AWSet.bottom() };
  // The awaits are skipped when there is nothing to read (a local add or remove has read its
  // elements already): each costs a turn of the event loop on the write path.
  const unread = [...incoming.entries.keys()].filter((ek) => !o.view.isLoaded(ek));
  if (unread.length > 0) await o.view.prefetch(unread);
  const unheld = removed.isEmpty() ? undefined : unheldDots(o, removed);
  if (unheld !== undefined) await loadOwners(o, env, unheld);
  const window = windowOf(o);
  // Δ(incoming, X) must be taken against X as it was before the join.
  const newPart = wantNewPart ? AWSetLattice.difference(incoming, window) : AWSet.bottom();
  const changed = window.joinInPlace(incoming, removed);
  writeBack(o, window);
  const settled = env.pending.has(o.key) ? await settlePending(o, env) : undefined;
  return { changed, newPart, settled: asSettled(settled) };
}

/** A remove this node made while joining, as a JoinResult's settled delta. */
function asSettled(remove: AWSet | undefined): JoinResult<AWSet>["settled"] {
  return remove === undefined ? undefined : { type: ObjectType.AWSET, delta: remove };
}

/**
 * Join a delta this node's own mutator made from window (the set as load() read it, over the
 * header's context). Everything the general join would look up is in the window already: the
 * delta names only elements load() read, and the dots its context removes are theirs. So nothing
 * is read, and only the elements it names (touched) are written back. Same join
 * (AWSet.joinInPlace), same result as join(); the deferred removes it makes applicable are
 * returned as settled, like join() does.
 */
export async function joinOwnDelta(o: ObjectSlot, env: StoreEnv, window: AWSet, delta: AWSet, touched: Iterable<ElementKey>): Promise<{ changed: boolean; settled?: AWSet }> {
  const changed = window.joinInPlace(delta);
  for (const ek of touched) {
    const after = window.entries.get(ek) ?? [];
    if (!sameDots(o.view.loadedDots(ek), after)) o.view.setDots(ek, after, o.h);
  }
  const settled = env.pending.has(o.key) ? await settlePending(o, env) : undefined;
  return { changed, settled };
}

/**
 * Apply the deferred removes of the key that the join just made applicable (pending-removes.ts):
 * their dots leave the element. Returns the remove delta this node thereby made (undefined when
 * none): the caller spreads it as a local delta, this node being its origin.
 */
async function settlePending(o: ObjectSlot, env: StoreEnv): Promise<AWSet | undefined> {
  if (!env.pending.has(o.key)) return undefined;
  const hits = await env.pending.settle(o.key, (ek) => o.view.dots(ek), o.h.ctx, o.view.otherRecords);
  if (hits.size === 0) return undefined;
  const removed = new Ctx();
  for (const [ek, dots] of hits) {
    const mine = await o.view.dots(ek);
    o.view.setDots(ek, mine.filter((d) => !dots.some((x) => sameDot(x, d))), o.h);
    for (const d of dots) removed.addDot(d);
  }
  return AWSet.fromParts(new Map(), removed);
}

export const elementLayout: ObjectLayout<AWSet> = {
  lattice: AWSetLattice,
  emptyBody: () => new Uint8Array(),
  emptyLive: emptyLiveDigest,

  async load(o, _env, elements) {
    await o.view.loadBytes(elements);
    return windowOf(o);
  },

  join,

  async applyChunk(o, env, chunk) {
    const slice = chunk.slice;
    // The receiver's elements inside the chunk's range: those the chunk carries, and those it
    // lacks (listed from the database, then read through the write view with any queued writes).
    const range = elementRange(o.prefix);
    const gte = chunk.rangeStart.length > 0 ? elementRecordKey(o.prefix, chunk.rangeStart) : range.gte;
    const bounds = chunk.rangeOpen ? { gte, lt: range.lt } : { gte, lte: elementRecordKey(o.prefix, chunk.rangeEnd) };
    const offset = o.prefix.length + 1;
    const inRange = [...slice.entries.keys()];
    for await (const k of env.db.keys(bounds)) {
      const ek = elementKey(unescapeBytes(k, offset).bytes);
      if (!slice.entries.has(ek)) inRange.push(ek);
    }
    await o.view.prefetch(inRange);
    const sliceCtx = chunkSliceContext(slice.entries.values(), inRange.map((ek) => o.view.loadedDots(ek)), chunk.senderCtx);
    return join(o, env, AWSet.fromParts(slice.entries, sliceCtx), true);
  },

  async finishKey(o, env, senderCtx: CausalContext) {
    // Every element arrived through applyChunk; what is left of the join is the context.
    const fresh = senderCtx.subtract(o.h.ctx);
    if (!fresh.isEmpty()) o.h.ctx.joinInPlace(fresh);
    const settled = await settlePending(o, env);
    return { changed: !fresh.isEmpty(), newPart: AWSet.fromParts(new Map(), fresh), settled: asSettled(settled) };
  },

  async *stateChunks(_env, prefix, h, it, limits) {
    const offset = prefix.length + 1;
    let start: Buffer = Buffer.alloc(0);
    let firstChunk = true;
    /** Records read past the last chunk's byte bound: the next chunk starts with them. */
    let carried: Array<[Buffer, Buffer]> = [];
    while (true) {
      const entries = new Map<ElementKey, DotSet>();
      let last: Buffer = start;
      let bytes = 0;
      let ended = false;
      let full = false;
      while (!full && entries.size < limits.maxEntries) {
        // nextv may return fewer entries than asked before the end (classic-level bounds each read
        // by bytes): only an empty read means the end. Treating a short read as the end would mark
        // this chunk's range open and make the receiver drop every later element.
        const more = carried.length > 0 ? carried : await it.nextv(limits.maxEntries - entries.size);
        carried = [];
        if (more.length === 0) {
          ended = true;
          break;
        }
        for (let i = 0; i < more.length; i++) {
          const [k, v] = more[i]!;
          const element = unescapeBytes(k, offset).bytes;
          const ek = elementKey(element);
          const dots = decodeDots(v);
          const size = awsetEntrySize(ek, dots);
          // Bounded in bytes too: a thousand elements of 64 KiB would not fit in one message. A
          // chunk holds at least one entry.
          if (entries.size > 0 && bytes + size > limits.maxBytes) {
            carried = more.slice(i);
            full = true;
            break;
          }
          entries.set(ek, dots);
          bytes += size;
          last = element;
        }
      }
      yield {
        type: ObjectType.AWSET,
        ctx: firstChunk ? h.ctx : undefined,
        rangeStart: start,
        rangeEnd: last,
        rangeOpen: ended,
        slice: AWSet.fromParts(entries, new Ctx()),
        keyDone: ended,
      };
      if (ended) return;
      firstChunk = false;
      // The next range starts just after the last element sent: last + 0x00 is its successor.
      start = Buffer.concat([last, Buffer.from([0])]);
    }
  },

  async readState(env, prefix, h) {
    const entries = new Map<ElementKey, DotSet>();
    const offset = prefix.length + 1;
    for await (const [k, v] of env.db.iterator(elementRange(prefix))) entries.set(elementKey(unescapeBytes(k, offset).bytes), decodeDots(v));
    return AWSet.fromParts(entries, h.ctx.clone());
  },

  verify: (h, records) => verifyObject({ size: h.size, ctx: h.ctx, live: h.live, records }),
};
