// Applying an Export stream (Import) to a key, chunk by chunk, through the store path a node's
// full-state gossip takes: each chunk is checked and decoded whole before it is applied (order
// and tiling by KeyChunkSequence, dots against the stream's context, element sizes against the
// limits), joined only over its own element range (Store.applyChunk), and the stream's context is
// folded in after the last chunk (Store.finishKey), then a delta's removes are joined. Other
// merges into the key wait while its chunks arrive (Store.beginTransfer). What changed is handed
// to notify, to spread like any local change.
import {
  AWSet,
  type CausalContext,
  DecodeError,
  StateLimitError,
  decodeBoundOf,
  ObjectType,
  UnknownTypeError,
  contextFromProto,
  decodeSlice,
  elementKey,
  latticeFor,
} from "../crdt/index.js";
import type { ExportChunk, ImportResponse } from "../gen/deltaset/v1/replica.js";
import { ChunkOrderError, KeyChunkSequence } from "../gossip/chunk-order.js";
import type { JoinResult } from "../store/layout.js";
import { TypeMismatchError } from "../store/errors.js";
import type { Store } from "../store/store.js";
import { invalid, outOfRange, tooLarge } from "./errors.js";
import { PieceError, PieceGatherer, PiecesTooLargeError, type PieceShape } from "../common/chunk-pieces.js";
import type { Limits } from "./limits.js";
import { checkKey } from "./validation.js";
import { listedSize } from "./key-calls.js";
import type { Asked, WriteCopies } from "./copies.js";

export interface ImportDeps {
  store: Store;
  limits: Limits;
  notify: (key: string, type: ObjectType, delta: unknown) => void;
  /** How far the exporting node's clock may be behind this one's (ms): that much of a wait is not counted. */
  clockSkewBoundMs: number;
  /** A client's Import: the write concern its first chunk may ask for (copies.ts), within its call's deadline. */
  copies?: { writes: WriteCopies; call: { getDeadline(): Date | number } };
}

/** One chunk, checked and decoded: nothing of it has been applied yet. */
interface Checked {
  senderCtx: CausalContext;
  slice: unknown;
  removed: CausalContext | undefined;
}

/** How an ExportChunk is cut into pieces and gathered back: one key per stream (key()), named on its first chunk only. */
const exportChunkPieces = (key: () => string): PieceShape<ExportChunk> => ({
  key,
  continued: (c) => c.continued,
  payload: (c) => c.slice?.payload ?? new Uint8Array(0),
  offset: (c) => (c.pieceOffset === undefined ? undefined : Number(c.pieceOffset)),
  digest: (c) => c.payloadSha256,
  whole: (first, last, payload) => ({ ...first, last: last.last, continued: false, slice: { type: first.type, payload }, pieceOffset: undefined, payloadSha256: undefined }),
});

export async function applyImport(deps: ImportDeps, chunks: AsyncIterable<ExportChunk>): Promise<ImportResponse> {
  const { store } = deps;
  const order = new KeyChunkSequence();
  let key = "";
  let type = ObjectType.OBJECT_TYPE_UNSPECIFIED;
  let count = 0;
  let changed = false;
  let release: (() => void) | undefined;
  // A whole-state type's export larger than a chunk comes in pieces (common/chunk-pieces.ts).
  const pieces = new PieceGatherer<ExportChunk>(exportChunkPieces(() => key), deps.limits.maxStateBytes);
  let started = false;
  let asked: Asked | undefined;
  const spread = (r: JoinResult<unknown>, t: ObjectType) => {
    if (r.refused !== undefined) throw outOfRange(`${r.refused}; ${count} chunk(s) before this one were applied, this one was not`);
    if (r.changed) {
      changed = true;
      deps.notify(key, t, r.newPart);
    }
    // A change of this node's own made by the join (deferred removes, a probabilistic set's refusal).
    if (r.settled !== undefined) deps.notify(key, r.settled.type, r.settled.delta);
  };
  try {
    for await (const piece of chunks) {
      if (order.done) throw invalid(`a chunk after the last one (chunk ${count}): an Import stream carries one export`);
      if (!started) {
        ({ key, type } = await firstChunk(deps, piece));
        // Before anything is applied: copies that cannot be had now import nothing.
        asked = deps.copies?.writes.asked(piece.copies, key);
        release = await store.beginTransfer(key);
        started = true;
      } else if ((piece.key !== "" && piece.key !== key) || piece.type !== type) {
        throw invalid(`chunk ${count} names key "${piece.key}" of type ${ObjectType[piece.type] ?? piece.type}; the stream started with key "${key}" of type ${ObjectType[type]}`);
      }
      let c: ExportChunk | undefined;
      try {
        c = pieces.take(piece);
      } catch (err) {
        if (err instanceof PiecesTooLargeError) throw tooLarge(`${err.message}; nothing of it was applied`);
        // Pieces that do not make the state they were cut from (common/chunk-pieces.ts).
        if (err instanceof PieceError) throw invalid(`chunk ${count}: ${err.message}; nothing of it was applied`);
        throw err;
      }
      if (c === undefined) continue;
      const k = check(deps, order, c, type, count);
      spread(await store.applyChunk(key, { type, senderCtx: k.senderCtx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: k.slice }), type);
      count++;
      if (!c.last) continue;
      spread(await store.finishKey(key, type, k.senderCtx), type);
      // The removes join like a Merge, which waits for transfers of the key: end this one first.
      release?.();
      release = undefined;
      if (k.removed !== undefined) spread(await store.merge(key, ObjectType.AWSET, AWSet.fromParts(new Map(), k.removed)), ObjectType.AWSET);
    }
  } finally {
    release?.();
  }
  if (!started) throw invalid("the stream has no chunk: send the chunks of an Export, the first naming the key");
  if (!order.done) {
    throw invalid(`the stream ended before its last chunk: ${count} chunk(s) were applied (each is safe alone), the export's context was not; import the whole export again`);
  }
  const size = BigInt(listedSize(await store.keyInfo(key)));
  const copies = deps.copies === undefined ? 0 : await deps.copies.writes.held(key, asked, deps.copies.call, "import");
  return { key, changed, chunks: BigInt(count), size, copies };
}

/** The key and type a stream's first chunk names, checked against the key as stored here. */
async function firstChunk(deps: ImportDeps, c: ExportChunk): Promise<{ key: string; type: ObjectType }> {
  if (c.key === "") throw invalid("the first chunk must name the key to import into (key)");
  checkKey(c.key, deps.limits);
  if (c.type === ObjectType.OBJECT_TYPE_UNSPECIFIED) throw invalid("type must be set on every chunk (the exported key's type)");
  try {
    latticeFor(c.type);
  } catch (err) {
    if (err instanceof UnknownTypeError) throw invalid(err.message);
    throw err;
  }
  const existing = await deps.store.typeOf(c.key);
  if (existing !== undefined && existing !== c.type) throw new TypeMismatchError(c.key, existing, c.type);
  return { key: c.key, type: c.type };
}

/** Check and decode one chunk whole (order, contexts, slice, element sizes); throws INVALID_ARGUMENT. */
function check(deps: ImportDeps, order: KeyChunkSequence, c: ExportChunk, type: ObjectType, i: number): Checked {
  if (c.slice === undefined || c.slice.type !== type) throw invalid(`chunk ${i}: slice must be set, of the chunk's type`);
  try {
    const range = {
      rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined,
      rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd),
      rangeOpen: c.rangeOpen,
    };
    const context = c.context === undefined ? undefined : contextFromProto(c.context);
    let removed: CausalContext | undefined;
    if (c.removed !== undefined) {
      if (!c.last || type !== ObjectType.AWSET) throw new DecodeError("removed is carried by the last chunk of an AWSET export only");
      removed = contextFromProto(c.removed);
    }
    const senderCtx = order.accept({ ...range, context, keyDone: c.last });
    const slice = decodeSlice(type, c.slice.payload, senderCtx, range, ttlClock(deps, c), decodeBoundOf(deps.limits));
    if (type === ObjectType.AWSET) {
      for (const k of (slice as AWSet).entries.keys()) {
        if (k.length > deps.limits.maxElementBytes) throw tooLarge(`chunk ${i}: an element has ${k.length} bytes; the limit is ${deps.limits.maxElementBytes}`);
      }
    }
    return { senderCtx, slice, removed: removed?.isEmpty() ? undefined : removed };
  } catch (err) {
    if (err instanceof ChunkOrderError) throw invalid(`chunk ${i} is out of order: ${err.message}; nothing of it was applied`);
    if (err instanceof DecodeError) throw invalid(`chunk ${i} is malformed: ${err.message}; nothing of it was applied`);
    if (err instanceof StateLimitError) throw tooLarge(`chunk ${i}: ${err.message}; nothing of it was applied`);
    throw err;
  }
}

/**
 * The time the chunk's remaining times to live count from: now, less how long the export waited
 * since the exporting node read them (exported_at_ms), less the clock skew bound. An expiry then
 * falls at most that bound after the original's, never before it while clocks agree within it.
 */
function ttlClock(deps: ImportDeps, c: ExportChunk): number {
  const now = deps.store.now();
  if (c.exportedAtMs === 0n) return now;
  if (c.exportedAtMs > BigInt(Number.MAX_SAFE_INTEGER)) throw new DecodeError(`exported_at_ms ${c.exportedAtMs} is not a time in ms`);
  return now - Math.max(0, now - Number(c.exportedAtMs) - deps.clockSkewBoundMs);
}
