// Chunked full-state transfer of one AWSET key, without the data-loss trap.
//
// A causal context says "I have seen these dots". A receiver that joined the sender's whole
// context before it had every element the context covers would read the elements still in
// flight as removed, and drop its own copies of them for good (delta_crdt_ex lost data exactly
// so; shared/notes/anchors.md section 5). So:
//  - the sender splits its state in element order into chunks whose ranges tile the whole
//    element space: chunk i covers (end of chunk i-1, end of chunk i], the last one is open;
//    each chunk carries every sender entry inside its range, the first one also the context;
//  - applyChunk joins only the elements inside the chunk's range: a local dot in the range is
//    dropped only if the sender's context covers it and the chunk does not carry it (the sender
//    removed it); a chunk dot the local context has not seen is added, and only that dot is
//    added to the local context, so every local store dot stays covered by the local context;
//  - finishKey folds the sender's whole context in, after the last chunk, in one step.
// A stream cut after any chunk leaves a state between local and local ⊔ sender.
//
// Sender side: take the context BEFORE reading the elements (or read both from one snapshot).
// Then any dot the context covers that a later chunk lacks was really removed at the sender.
// Receiver side: between a key's first chunk and finishKey, do not interleave other joins into
// the same key. A dot such a join brought into an already-applied range, if the sender had
// removed it, would survive finishKey: the element would stay on the receiver alone, for good
// (test/unit/store-transfer-hold.test.ts shows it). Chunks of one key are contiguous in a
// stream, so holding that key's other merges until key_done is enough: Store.beginTransfer
// does it (NodeGossip takes the hold at a key's first chunk and releases it after finishKey or
// when the stream ends). Local Adds and Removes need no hold: a fresh local dot is one no sender
// can have removed, and a remove only removes.
import {
  AWSet,
  CausalContext,
  type DotSet,
  DecodeError,
  type ElementKey,
  ObjectType,
  awsetEntrySize,
  chunkSliceContext,
  compareBytes,
  contextEncodedSize,
  contextFromProto,
  contextToProto,
  decodeMessage,
  dotFromProto,
  dotToProto,
  elementBytes,
  elementKey,
} from "../crdt/index.js";
import { AWSetState, type EncodedState } from "../gen/deltaset/v1/types.js";
import type { StateChunk } from "../gen/deltaset/v1/gossip.js";

export interface AWSetChunk {
  /** Inclusive lower bound (element key); undefined means from the first element. */
  readonly rangeStart: ElementKey | undefined;
  /** Inclusive upper bound; undefined when the range is open. */
  readonly rangeEnd: ElementKey | undefined;
  /** The range extends to the last element. Exactly the last chunk of a key is open. */
  readonly rangeOpen: boolean;
  /** The sender's entries inside the range. */
  readonly entries: ReadonlyMap<ElementKey, DotSet>;
  /** The sender's whole context: on the first chunk only. */
  readonly context: CausalContext | undefined;
  /** Last chunk of the key. */
  readonly keyDone: boolean;
}

export interface ChunkLimits {
  /** At most this many entries per chunk (default unlimited). */
  maxEntries?: number;
  /**
   * At most about this many bytes of entries per chunk (exact protobuf sizes of the entries; the
   * first chunk also counts its context). A single entry larger than this still makes one chunk.
   */
  maxBytes?: number;
}

/** The smallest element key above k: ranges are inclusive, so chunk i+1 starts here. */
export function successorKey(k: ElementKey): ElementKey {
  return k + "\u0000";
}

export function inChunkRange(chunk: Pick<AWSetChunk, "rangeStart" | "rangeEnd" | "rangeOpen">, k: ElementKey): boolean {
  if (chunk.rangeStart !== undefined && k < chunk.rangeStart) return false;
  return chunk.rangeOpen || (chunk.rangeEnd !== undefined && k <= chunk.rangeEnd);
}

/** Split a state into chunks in element order. An empty set still gives one (open) chunk. */
export function chunkAWSet(state: AWSet, limits: ChunkLimits = {}): AWSetChunk[] {
  const maxEntries = limits.maxEntries ?? Infinity;
  const maxBytes = limits.maxBytes ?? Infinity;
  if (!(maxEntries >= 1)) throw new RangeError(`maxEntries must be at least 1, got ${maxEntries}`);
  if (!(maxBytes >= 1)) throw new RangeError(`maxBytes must be at least 1, got ${maxBytes}`);
  const groups: ElementKey[][] = [];
  let cur: ElementKey[] = [];
  let curBytes = maxBytes === Infinity ? 0 : contextEncodedSize(state.ctx);
  for (const k of state.sortedKeys()) {
    const size = maxBytes === Infinity ? 0 : awsetEntrySize(k, state.entries.get(k)!);
    if (cur.length > 0 && (cur.length >= maxEntries || curBytes + size > maxBytes)) {
      groups.push(cur);
      cur = [];
      curBytes = 0;
    }
    cur.push(k);
    curBytes += size;
  }
  groups.push(cur);
  return groups.map((keys, i) => {
    const last = i === groups.length - 1;
    return {
      rangeStart: i === 0 ? undefined : successorKey(groups[i - 1]!.at(-1)!),
      rangeEnd: last ? undefined : keys.at(-1)!,
      rangeOpen: last,
      entries: new Map(keys.map((k) => [k, state.entries.get(k)!] as const)),
      context: i === 0 ? state.ctx.clone() : undefined,
      keyDone: last,
    };
  });
}

/**
 * Join one chunk into the local state, touching only elements inside the chunk's range.
 * Mutates local; returns true when it changed. Throws RangeError if the chunk carries an entry
 * outside its own range.
 */
export function applyChunk(local: AWSet, chunk: AWSetChunk, senderCtx: CausalContext): boolean {
  for (const k of chunk.entries.keys()) {
    if (!inChunkRange(chunk, k)) throw new RangeError("chunk entry outside the chunk's range");
  }
  const localInRange: DotSet[] = [];
  for (const [k, dots] of local.entries) if (inChunkRange(chunk, k)) localInRange.push(dots);
  const sliceCtx = chunkSliceContext(chunk.entries.values(), localInRange, senderCtx);
  return local.joinInPlace(AWSet.fromParts(new Map(chunk.entries), sliceCtx));
}


/** After the key's last chunk: fold the sender's whole context into the local context. */
export function finishKey(local: AWSet, senderCtx: CausalContext): boolean {
  if (senderCtx.leq(local.ctx)) return false;
  local.ctx.joinInPlace(senderCtx);
  return true;
}

/** A chunk stream broke the protocol (order, tiling, missing context). Nothing was applied. */
export class ChunkOrderError extends Error {
  override readonly name = "ChunkOrderError";
}

/**
 * Checks that the chunks of one key arrive as the sender makes them (NodeGossip checks every
 * received state stream with it): the first one carries the
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

  accept(chunk: AWSetChunk): CausalContext {
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

// ------------------------------------------------------------------ proto mapping

export type StateChunkFields = Pick<
  StateChunk,
  "type" | "context" | "rangeStart" | "rangeEnd" | "rangeOpen" | "slice" | "keyDone"
>;

/** The chunk's fields of a StateChunk (the transport adds cluster, from, partition, seq, key...). */
export function chunkToProto(chunk: AWSetChunk): StateChunkFields {
  const keys = [...chunk.entries.keys()].sort();
  const slice: EncodedState = {
    type: ObjectType.AWSET,
    payload: Buffer.from(
      AWSetState.encode({
        entries: keys.map((k) => ({ element: elementBytes(k), dots: chunk.entries.get(k)!.map(dotToProto) })),
        context: undefined,
      }).finish(),
    ),
  };
  return {
    type: ObjectType.AWSET,
    context: chunk.context === undefined ? undefined : contextToProto(chunk.context),
    rangeStart: chunk.rangeStart === undefined ? Buffer.alloc(0) : elementBytes(chunk.rangeStart),
    rangeEnd: chunk.rangeEnd === undefined ? Buffer.alloc(0) : elementBytes(chunk.rangeEnd),
    rangeOpen: chunk.rangeOpen,
    slice,
    keyDone: chunk.keyDone,
  };
}

/**
 * A StateChunk's fields → chunk, validating the slice (sorted unique elements, non-empty sorted
 * dot lists, no dot under two elements, every entry inside the range). Throws DecodeError.
 * Dot coverage by the context is not required: a sender reading its store while it changes may
 * ship dots newer than the context it took first, which are still valid adds.
 */
export function chunkFromProto(msg: StateChunkFields): AWSetChunk {
  if (msg.type !== ObjectType.AWSET) throw new DecodeError(`chunk type ${msg.type} is not AWSET`);
  if (msg.slice === undefined || msg.slice.type !== ObjectType.AWSET) {
    throw new DecodeError("chunk without an AWSET slice");
  }
  const state = decodeMessage("AWSetState", () => AWSetState.decode(msg.slice!.payload));
  if (state.context !== undefined) throw new DecodeError("a chunk slice carries no context");
  const rangeOpen = msg.rangeOpen;
  const chunk = {
    rangeStart: msg.rangeStart.length === 0 ? undefined : elementKey(msg.rangeStart),
    rangeEnd: rangeOpen ? undefined : elementKey(msg.rangeEnd),
    rangeOpen,
    context: msg.context === undefined ? undefined : contextFromProto(msg.context),
    keyDone: msg.keyDone,
  };
  const entries = new Map<ElementKey, DotSet>();
  const seen = new Set<string>();
  let prev: Uint8Array | undefined;
  for (const [i, e] of state.entries.entries()) {
    if (prev !== undefined && compareBytes(prev, e.element) >= 0) {
      throw new DecodeError(`slice entries[${i}]: elements not sorted and unique`);
    }
    prev = e.element;
    if (e.dots.length === 0) throw new DecodeError(`slice entries[${i}]: an element with no dots`);
    const dots = e.dots.map((d, j) => dotFromProto(d, `slice entries[${i}].dots[${j}]`));
    for (let j = 0; j < dots.length; j++) {
      const d = dots[j]!;
      const id = `${d.counter}@${d.replica}`;
      if (seen.has(id)) throw new DecodeError(`slice entries[${i}]: dot appears twice`);
      seen.add(id);
      const p = dots[j - 1];
      if (p !== undefined && (p.replica > d.replica || (p.replica === d.replica && p.counter >= d.counter))) {
        throw new DecodeError(`slice entries[${i}]: dots not sorted and unique`);
      }
    }
    const k = elementKey(e.element);
    if (!inChunkRange(chunk, k)) throw new DecodeError(`slice entries[${i}]: element outside the chunk's range`);
    entries.set(k, dots);
  }
  return { ...chunk, entries };
}

/** Apply a whole chunk stream of one key (test and simulation helper). */
export function applyChunks(local: AWSet, chunks: readonly AWSetChunk[]): void {
  const seq = new KeyChunkSequence();
  for (const c of chunks) {
    const ctx = seq.accept(c);
    applyChunk(local, c, ctx);
    if (c.keyDone) finishKey(local, ctx);
  }
  if (!seq.done) throw new ChunkOrderError("stream ended before the key's last chunk");
}
