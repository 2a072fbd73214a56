// The chunks of an Export: a key's state (or its delta since a context) read from one snapshot of
// the store, regrouped into chunks of bounded entries and bytes, encoded as ExportChunk messages.
// An AWSET streams in element order (crdt/since-cut.ts cuts the delta, crdt/chunk-regroup.ts
// bounds the chunks); the other types are stored whole and travel whole, as one chunk.
import {
  AWSet,
  type CausalContext,
  ChunkRegrouper,
  type EntryChunk,
  ObjectType,
  SinceCut,
  awsetEntrySize,
  contextToProto,
  latticeFor,
} from "../crdt/index.js";
import { CausalContext as Ctx } from "../crdt/causal-context.js";
import type { ExportChunk } from "../gen/deltaset/v1/replica.js";
import type { Store } from "../store/store.js";

export interface ExportOptions {
  maxEntries: number;
  /** Most bytes of a chunk's encoded slice (a chunk holds at least one entry). */
  maxBytes: number;
  /** Export only what the key holds outside this context (AWSET; the other types travel whole). */
  since?: CausalContext;
}

// An AWSET slice is its entries plus an empty context field (2 bytes): see awsetEncodedSize.
const EMPTY_CONTEXT_FIELD = 2;

/** The export of key, chunk by chunk as they are pulled; nothing when the key does not exist. */
export async function* exportChunks(store: Store, key: string, opts: ExportOptions): AsyncGenerator<ExportChunk> {
  const regroup = new ChunkRegrouper({
    maxEntries: opts.maxEntries,
    maxBytes: Math.max(1, opts.maxBytes - EMPTY_CONTEXT_FIELD),
    entryBytes: awsetEntrySize,
  });
  let cut: SinceCut | undefined;
  // The key's context (on the store's first chunk), sent with the first chunk given out.
  let keyCtx: CausalContext | undefined;
  let first = true;
  for await (const c of store.stateChunks(key, opts.maxEntries)) {
    if (c.type !== ObjectType.AWSET) {
      // A whole-state type: its complete state, whatever since says.
      const ctx = contextToProto(c.ctx!);
      yield {
        key,
        type: c.type,
        context: ctx,
        rangeStart: Buffer.alloc(0),
        rangeEnd: Buffer.alloc(0),
        rangeOpen: true,
        slice: { type: c.type, payload: Buffer.from(c.encoded ?? latticeFor(c.type).encode(c.slice, store.now())) },
        last: true,
        removed: undefined,
        delta: false,
        nextSince: ctx,
      };
      return;
    }
    if (c.ctx !== undefined) {
      keyCtx = c.ctx;
      cut = opts.since === undefined ? undefined : new SinceCut(c.ctx, opts.since);
    }
    const slice = c.slice as AWSet;
    const part: EntryChunk = {
      rangeStart: c.rangeStart,
      rangeEnd: c.rangeEnd,
      rangeOpen: c.rangeOpen,
      entries: cut === undefined ? slice.entries : cut.entries(slice.entries),
    };
    for (const out of regroup.push(part)) {
      yield encode(key, out, first ? keyCtx : undefined, cut, store.now());
      first = false;
    }
  }
}

/** One AWSET chunk as a message: the contexts on the first, the removes of a delta on the last. */
function encode(key: string, c: EntryChunk, keyCtx: CausalContext | undefined, cut: SinceCut | undefined, nowMs: number): ExportChunk {
  const removed = c.rangeOpen && cut !== undefined ? cut.removed() : undefined;
  return {
    key,
    type: ObjectType.AWSET,
    context: keyCtx === undefined ? undefined : contextToProto(cut === undefined ? keyCtx : cut.context()),
    rangeStart: c.rangeStart,
    rangeEnd: c.rangeEnd,
    rangeOpen: c.rangeOpen,
    slice: { type: ObjectType.AWSET, payload: Buffer.from(latticeFor(ObjectType.AWSET).encode(AWSet.fromParts(c.entries, new Ctx()), nowMs)) },
    last: c.rangeOpen,
    removed: removed === undefined || removed.isEmpty() ? undefined : contextToProto(removed),
    delta: keyCtx !== undefined && cut !== undefined,
    nextSince: keyCtx === undefined ? undefined : contextToProto(keyCtx),
  };
}
