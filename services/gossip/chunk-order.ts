// Chunked full-state transfer of a key, without the data-loss trap, and the order checker every
// received state stream goes through.
//
// A causal context says "I have seen these dots". A receiver that joined the sender's whole
// context before it had every element the context covers would read the elements still in
// flight as removed, and drop its own copies of them for good (delta_crdt_ex lost data exactly
// so; shared/notes/anchors.md section 5). So:
//  - the sender (the store's element layout, Store.stateChunks) splits its state in element order
//    into chunks whose ranges tile the whole element space: chunk i covers (end of chunk i-1,
//    end of chunk i], the last one is open; each chunk carries every sender entry inside its
//    range, the first one also the context, all read from one snapshot;
//  - the receiver (Store.applyChunk) joins only the elements inside the chunk's range: a local dot
//    in the range is dropped only if the sender's context covers it and the chunk does not carry
//    it (the sender removed it); a chunk dot the local context has not seen is added, and only
//    that dot is added to the local context (crdt/chunk-slice.ts);
//  - Store.finishKey folds the sender's whole context in, after the last chunk, in one step.
// A stream cut after any chunk leaves a state between local and local ⊔ sender.
//
// Between a key's first chunk and finishKey no other join may go into the same key: a dot such a
// join brought into an already-applied range, if the sender had removed it, would survive
// finishKey, on the receiver alone, for good (test/unit/store-transfer-hold.test.ts shows it).
// Chunks of one key are contiguous in a stream, so holding that key's other merges until
// key_done is enough: the exchange takes Store.beginTransfer at a key's first chunk and releases
// it after finishKey or when the stream ends. Local Adds and Removes need no hold: a fresh local
// dot is one no sender can have removed, and a remove only removes.
import { type CausalContext, type ChunkRange, type ElementKey, successorKey } from "../crdt/index.js";

/** What the order check reads of a chunk. */
export interface ChunkHeader extends ChunkRange {
  /** The sender's whole context: on the first chunk only. */
  readonly context: CausalContext | undefined;
  /** Last chunk of the key. */
  readonly keyDone: boolean;
}

/** A chunk stream broke the protocol (order, tiling, missing context). Nothing of the chunk was applied. */
export class ChunkOrderError extends Error {
  override readonly name = "ChunkOrderError";
}

/**
 * Checks that the chunks of one key arrive as the sender makes them: the first one carries the
 * context and starts from the first element, each next one starts right after the previous end,
 * and only the last one (key_done) is open. Returns the sender context to apply each chunk with.
 */
export class KeyChunkSequence {
  private senderCtx: CausalContext | undefined;
  private nextStart: ElementKey | undefined;
  private finished = false;

  get done(): boolean {
    return this.finished;
  }

  accept(chunk: ChunkHeader): CausalContext {
    if (this.finished) throw new ChunkOrderError("chunk after the key's last chunk");
    if (this.senderCtx === undefined) {
      if (chunk.context === undefined) throw new ChunkOrderError("first chunk of a key without a context");
      if (chunk.rangeStart !== undefined) throw new ChunkOrderError("first chunk of a key must start at the first element");
      this.senderCtx = chunk.context;
    } else {
      if (chunk.context !== undefined) throw new ChunkOrderError("context on a chunk other than the first");
      if (chunk.rangeStart !== this.nextStart) throw new ChunkOrderError("chunk range does not follow the previous one");
    }
    if (chunk.rangeOpen !== chunk.keyDone) throw new ChunkOrderError("only the last chunk of a key is open");
    if (!chunk.rangeOpen) {
      if (chunk.rangeEnd === undefined) throw new ChunkOrderError("closed chunk without a range end");
      if (chunk.rangeStart !== undefined && chunk.rangeEnd < chunk.rangeStart) {
        throw new ChunkOrderError("chunk range ends before it starts");
      }
      this.nextStart = successorKey(chunk.rangeEnd);
    }
    this.finished = chunk.keyDone;
    return this.senderCtx;
  }
}
