// The chunks of an Export: a key's state (or its delta since a context) read from one snapshot of
// the store, regrouped into chunks of bounded entries and bytes, encoded as ExportChunk messages.
// An AWSET streams in element order (store/set-chunks.ts cuts and bounds the chunks); the other
// types are stored whole and travel whole, as one chunk.
import { type CausalContext, ObjectType, contextToProto } from "../crdt/index.js";
import type { ExportChunk } from "../gen/deltaset/v1/replica.js";
import { chunkPayload } from "../store/chunk-payload.js";
import { cutIntoPieces } from "../common/chunk-pieces.js";
import { type SetChunk, setChunksSince } from "../store/set-chunks.js";
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
  const limits = { maxEntries: opts.maxEntries, maxBytes: Math.max(1, opts.maxBytes - EMPTY_CONTEXT_FIELD) };
  for await (const c of setChunksSince(store, key, opts.since, limits)) {
    if ("whole" in c) {
      // A whole-state type: its complete state, whatever since says, in pieces of at most
      // maxBytes when larger (common/chunk-pieces.ts), the first with the chunk's fields, each
      // with its offset in the whole and the last with the whole's digest.
      const w = c.whole;
      const ctx = contextToProto(w.ctx!);
      const pieces = cutIntoPieces(chunkPayload(w, store.now()), opts.maxBytes);
      for (const [i, piece] of pieces.entries()) {
        const first = i === 0;
        const last = i === pieces.length - 1;
        yield {
          key,
          type: w.type,
          context: first ? ctx : undefined,
          rangeStart: Buffer.alloc(0),
          rangeEnd: Buffer.alloc(0),
          rangeOpen: true,
          slice: { type: w.type, payload: piece.payload },
          last,
          removed: undefined,
          delta: false,
          nextSince: first ? ctx : undefined,
          continued: !last,
          exportedAtMs: BigInt(store.now()),
          pieceOffset: piece.offset === undefined ? undefined : BigInt(piece.offset),
          payloadSha256: piece.digest,
        };
      }
      return;
    }
    // Read after the chunk's payload: a later time only makes an Import count less of the wait.
    yield encode(key, c, opts.since !== undefined, store.now());
  }
}

/** One AWSET chunk as a message: the contexts on the first, the removes of a delta on the last. */
function encode(key: string, c: SetChunk, since: boolean, now: number): ExportChunk {
  return {
    key,
    type: ObjectType.AWSET,
    context: c.context === undefined ? undefined : contextToProto(c.context),
    rangeStart: c.range.rangeStart,
    rangeEnd: c.range.rangeEnd,
    rangeOpen: c.range.rangeOpen,
    slice: { type: ObjectType.AWSET, payload: Buffer.from(c.payload) },
    last: c.range.rangeOpen,
    removed: c.removed === undefined ? undefined : contextToProto(c.removed),
    delta: c.keyCtx !== undefined && since,
    nextSince: c.keyCtx === undefined ? undefined : contextToProto(c.keyCtx),
    continued: false,
    exportedAtMs: BigInt(now),
  };
}
