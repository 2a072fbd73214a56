// A stored key read out in bounded chunks, an add-wins set cut to its delta since a context when
// one is given (crdt/since-cut.ts) and regrouped within entry and byte limits (crdt/chunk-regroup.ts:
// the ranges still tile the element space in order). Export streams it to clients, and a gossip
// catch-up by contexts to a neighbour; both read it from one snapshot of the store.
import { AWSet, type CausalContext, ChunkRegrouper, type EntryChunk, ObjectType, SinceCut, awsetEntrySize, latticeFor } from "../crdt/index.js";
import { CausalContext as Ctx } from "../crdt/causal-context.js";
import type { StateChunk } from "./layout.js";
import type { Store } from "./store.js";

/** One chunk of a set, within the limits. */
export interface SetChunk {
  range: EntryChunk;
  /** The entries, encoded as a set with an empty context (the context travels apart). */
  payload: Uint8Array;
  /** First chunk: the key's context as stored. */
  keyCtx?: CausalContext;
  /** First chunk: the context to join the entries with (the key's, or the key's minus since). */
  context?: CausalContext;
  /** Last chunk, with since: the dots inside since the key has seen and no longer holds (its removes); undefined when none. */
  removed?: CausalContext;
}

/**
 * The key's chunks as they are pulled. A set yields SetChunks (at least one, the last with an open
 * range); a type stored whole yields its one stored chunk as `whole`. Nothing when the key does
 * not exist.
 */
export async function* setChunksSince(
  store: Store,
  key: string,
  since: CausalContext | undefined,
  limits: { maxEntries: number; maxBytes: number },
): AsyncGenerator<SetChunk | { whole: StateChunk }> {
  const regroup = new ChunkRegrouper({ maxEntries: limits.maxEntries, maxBytes: limits.maxBytes, entryBytes: awsetEntrySize });
  const codec = latticeFor(ObjectType.AWSET);
  let cut: SinceCut | undefined;
  let keyCtx: CausalContext | undefined;
  let first = true;
  for await (const c of store.stateChunks(key, limits)) {
    if (c.type !== ObjectType.AWSET) {
      yield { whole: c };
      return;
    }
    if (c.ctx !== undefined) {
      keyCtx = c.ctx;
      cut = since === undefined ? undefined : new SinceCut(c.ctx, since);
    }
    const entries = cut === undefined ? (c.slice as AWSet).entries : cut.entries((c.slice as AWSet).entries);
    for (const out of regroup.push({ rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, entries })) {
      const removed = out.rangeOpen ? cut?.removed() : undefined;
      yield {
        range: out,
        payload: codec.encode(AWSet.fromParts(out.entries, new Ctx()), store.now()),
        keyCtx: first ? keyCtx : undefined,
        context: first ? (cut === undefined ? keyCtx : cut.context()) : undefined,
        removed: removed === undefined || removed.isEmpty() ? undefined : removed,
      };
      first = false;
    }
  }
}
