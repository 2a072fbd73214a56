// Receiving a full-state stream (Gossip/PushState): each key's chunks are checked against the
// protocol (context first, ranges tiling in order, only the last one open: chunk-order.ts), joined
// into the store under the key's transfer hold, a key's delta (catch-up.ts) joined as an Import
// joins one, and each partition handed to the engine, with its new parts, once its end marker
// arrives. A malformed or out-of-order chunk refuses the stream; a delta cut against contexts this
// node no longer vouches for (another boot, a drop since) too.
import { status } from "@grpc/grpc-js";
import { AWSet, type CausalContext, DecodeError, ObjectType, JoinConflictError, UnknownTypeError, StateLimitError, contextFromProto, decodeBoundOf, decodeSlice, elementKey, joinGroupInPlace, latticeFor, sizeOf } from "../crdt/index.js";
import type { PartitionDrop, StateChunk, StateReply } from "../gen/deltaset/v1/gossip.js";
import { PayloadKind } from "../gen/deltaset/v1/gossip.js";
import type { Store } from "../store/store.js";
import type { JoinResult } from "../store/layout.js";
import { TypeMismatchError } from "../store/errors.js";
import { type Answer, type Refusal, ackToProto } from "./answer.js";
import type { Ack, ReceivedItem } from "./engine.js";
import type { KeyedState, KeyedStates } from "./keyed-states.js";
import { type ChunkHeader, ChunkOrderError, KeyChunkSequence } from "./chunk-order.js";
import type { LocalGate } from "./local-gate.js";
import type { PartitionClaims } from "./catch-up.js";
import { partitionOf } from "./partition.js";
import { PieceError, PieceGatherer, type PieceShape } from "../common/chunk-pieces.js";

/** Default of ExchangeOptions.maxBufferedStateElements. */
export const MAX_BUFFERED_STATE_ELEMENTS = 10_000;

/** How a StateChunk is cut into pieces and gathered back (common/chunk-pieces.ts). */
const STATE_CHUNK_PIECES: PieceShape<StateChunk> = {
  key: (c) => c.key,
  continued: (c) => c.continued,
  payload: (c) => c.slice?.payload ?? new Uint8Array(0),
  offset: (c) => (c.pieceOffset === undefined ? undefined : Number(c.pieceOffset)),
  digest: (c) => c.payloadSha256,
  whole: (first, last, payload) => ({ ...first, keyDone: last.keyDone, continued: false, slice: { type: first.type, payload }, pieceOffset: undefined, payloadSha256: undefined }),
};

/** What a received stream needs of the exchange (exchange.ts) that receives it. */
export interface StateReceiveHost {
  o: { partitions: number; boot: bigint; store: Store; accepts?: (partition: number, from: string) => boolean; onPartitionWhole?: (partition: number, from: string, startedMs: number) => void; maxBufferedStateElements?: number; maxFilterBytes?: number; maxStateBytes?: number };
  self: string;
  counters: {
    stateStreamsReceived: number;
    chunksRejected: number;
    notOwnedRefused: number;
    catchUpStale: number;
    stateBytesApplied: number;
    chunksApplied: number;
    typeConflicts: number;
    freshPartsNotBuffered: number;
  };
  gate: Pick<LocalGate<unknown>, "openGate" | "closeGate">;
  claims: PartitionClaims;
  checkPeer(cluster: string, from: string, partitions: number): { refused: Refusal } | undefined;
  noticeBoot(peer: string, boot: bigint): boolean;
  refuse(code: status, details: string, from: string): { refused: Refusal };
  /** This node's drop count for partition p (see PartitionDrop). */
  ownDrops(p: number): number;
  /** The engine's onFrame: the acks owed for these items. */
  onFrame(from: string, items: ReceivedItem<KeyedStates>[]): Ack[];
  /** A state chunk's payload of this many bytes arrived (the engine's bytesReceived.state). */
  recordStateBytesReceived(bytes: number): void;
  spreadSettled(key: string, settled: JoinResult<unknown>["settled"]): void;
  /** A mark of the store's changes so far, taken before a join, for holdRefused. */
  changeMark(): number;
  /** A state the store refused to join (a counter out of int64): held to be joined again once its key changes (refused-joins.ts). */
  holdRefused(key: string, type: ObjectType, state: unknown, from: string, mark: number): void;
  changedHere(key: string, type: ObjectType): void;
  dropped(): PartitionDrop[];
  /** A key whose state is above o.maxFilterBytes or o.maxStateBytes: left out (counted, logged). */
  skipOversized(key: string, reason: string, from: string): void;
  /** A key whose state does not decode here: left out (counted, logged); its partition goes unacked. */
  skipUndecodable(key: string, reason: string, from: string): void;
  /** A key whose type or parameters conflict with this node's (a join refused it): left out (counted, logged). */
  skipConflict(key: string, reason: string): void;
}

/**
 * A full-state stream: each key's chunks must follow the protocol (context first, ranges tiling
 * in order, only the last one open: KeyChunkSequence) and a partition completes only after its
 * keys did. Other merges into a key wait while its chunks arrive (Store.beginTransfer).
 * `sender`: the node id the call names beside its chunks (STATE_SENDER_HEADER), when it does.
 */
export async function receiveStateStream(
  h: StateReceiveHost,
  chunks: AsyncIterable<StateChunk> | Iterable<StateChunk>,
  sender?: string,
): Promise<Answer<StateReply>> {
  h.counters.stateStreamsReceived++;
  let from = "";
  let count = 0;
  const acks: Ack[] = [];
  const sequences = new Map<string, { partition: number; order: KeyChunkSequence; delta: boolean }>();
  const fresh = new Map<number, Map<string, KeyedState>>();
  const freshElements = new Map<number, number>();
  const holds = new Map<string, () => void>();
  const accepted = new Map<number, boolean>();
  // Per partition: local changes made while its chunks are joined wait for its new parts (local-gate.ts).
  const gates = new Map<number, number>();
  // Per partition: when its first chunk arrived (Date.now), and those with a key left out (not whole here).
  const startedAt = new Map<number, number>();
  const leftOut = new Set<number>();
  const rejectChunk = (details: string) => {
    h.counters.chunksRejected++;
    return h.refuse(status.INVALID_ARGUMENT, details, from);
  };
  // What received states are decoded under (--max-filter-bytes, --max-state-bytes).
  const bound = decodeBoundOf(h.o);
  // Keys left out part-way (a conflict, an undecodable chunk): their remaining chunks are dropped up to the last.
  const skipped = new Set<string>();
  // Partitions with a key that did not decode: applied but not acknowledged (skipUndecodable).
  const unacked = new Set<number>();
  /** A key's chunks are over (its last one applied, or the key left out): its transfer hold ends. */
  const endKey = (key: string) => {
    sequences.delete(key);
    holds.get(key)?.();
    holds.delete(key);
  };
  // Pieces of a state stored whole, gathered into its one chunk (common/chunk-pieces.ts).
  const pieces = new PieceGatherer<StateChunk>(STATE_CHUNK_PIECES, h.o.maxStateBytes ?? Number.MAX_SAFE_INTEGER, (key, why) => {
    leftOut.add(partitionOf(key, h.o.partitions));
    h.skipOversized(key, why, from);
  });
  try {
    for await (const piece of chunks) {
      let c = piece;
      if (count === 0) {
        const bad = h.checkPeer(c.cluster, c.from, c.partitions);
        if (bad) return bad;
        from = c.from;
        h.noticeBoot(from, c.boot);
      }
      count++;
      if (c.partition >= h.o.partitions) return h.refuse(status.INVALID_ARGUMENT, `partition ${c.partition} out of range`, from);
      // Decided once per partition and stream, so a partition is taken or left whole.
      let taken = accepted.get(c.partition);
      if (taken === undefined) accepted.set(c.partition, (taken = h.o.accepts === undefined || h.o.accepts(c.partition, from)));
      if (!taken) {
        h.counters.notOwnedRefused++;
        continue;
      }
      if (!gates.has(c.partition)) {
        startedAt.set(c.partition, Date.now());
        gates.set(c.partition, h.gate.openGate(c.partition));
        h.claims.pushing(c.partition, from);
      }
      if (c.partitionDone) {
        const open = [...sequences].find(([, s]) => s.partition === c.partition);
        if (open !== undefined) return rejectChunk(`partition ${c.partition} ended before the last chunk of key "${open[0]}"`);
        if (pieces.pending !== undefined) return rejectChunk(`partition ${c.partition} ended before the last piece of key "${pieces.pending}"`);
        // Planned against what this node said it held (keys it held alike were left out): not
        // whole here, nor acknowledged, if it may have lost part of that since.
        if (c.delta && (c.sinceBoot !== h.o.boot || Number(c.sinceDrops) !== h.ownDrops(c.partition))) {
          h.counters.catchUpStale++;
          return h.refuse(status.FAILED_PRECONDITION, `partition ${c.partition} was sent against contexts this node no longer vouches for (restarted or dropped the partition since): push full state`, from);
        }
        const item: ReceivedItem<KeyedStates> = {
          partition: c.partition,
          kind: PayloadKind.STATE,
          seq: Number(c.seq),
          fresh: fresh.get(c.partition),
          tooLarge: tooLargeToBuffer(h, freshElements.get(c.partition) ?? 0),
        };
        const owed = h.onFrame(from, [item]);
        if (!unacked.delete(c.partition)) {
          acks.push(...owed);
          if (!leftOut.has(c.partition)) h.o.onPartitionWhole?.(c.partition, from, startedAt.get(c.partition)!);
        }
        fresh.delete(c.partition);
        freshElements.delete(c.partition);
        h.gate.closeGate(gates.get(c.partition)!);
        gates.delete(c.partition);
        h.claims.done(c.partition, from);
        continue;
      }
      if (partitionOf(c.key, h.o.partitions) !== c.partition || c.slice === undefined || c.slice.type !== c.type) {
        return rejectChunk(`chunk for key "${c.key}" is malformed`);
      }
      let payload: Uint8Array;
      try {
        const whole = pieces.take(c);
        if (whole === undefined) continue;
        c = whole;
        payload = whole.slice!.payload;
        // Counted as it arrives, as the sender counts it as it goes out.
        h.recordStateBytesReceived(payload.length);
      } catch (err) {
        if (err instanceof PieceError) return rejectChunk(err.message);
        throw err;
      }
      if (skipped.has(c.key)) {
        if (c.keyDone) skipped.delete(c.key);
        continue;
      }
      if (c.delta && c.type !== ObjectType.AWSET) return rejectChunk(`chunk for key "${c.key}" is a delta of a type sent whole`);
      if (c.removed !== undefined && !(c.delta && c.keyDone)) return rejectChunk(`chunk for key "${c.key}" carries removes but is not a delta's last chunk`);
      let slice: unknown;
      let ctx: CausalContext;
      let removed: CausalContext | undefined;
      let header: ChunkHeader;
      try {
        let s = sequences.get(c.key);
        if (s === undefined) {
          // A key's delta was cut against what this node named in its Contexts answer: refused
          // if this node may have lost part of it since (another boot, or a drop meanwhile).
          if (c.delta && (c.sinceBoot !== h.o.boot || Number(c.sinceDrops) !== h.ownDrops(c.partition))) {
            h.counters.catchUpStale++;
            return h.refuse(status.FAILED_PRECONDITION, `the delta of key "${c.key}" was cut against contexts this node no longer vouches for (restarted or dropped the partition since): push full state`, from);
          }
          sequences.set(c.key, (s = { partition: c.partition, order: new KeyChunkSequence(), delta: c.delta }));
        } else if (s.delta !== c.delta) return rejectChunk(`chunks of key "${c.key}" mix a delta and a full state`);
        if (c.removed !== undefined) removed = contextFromProto(c.removed);
        header = {
          rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined,
          rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd),
          rangeOpen: c.rangeOpen,
          context: c.context === undefined ? undefined : contextFromProto(c.context),
          keyDone: c.keyDone,
        };
        ctx = s.order.accept(header);
        if (c.context !== undefined && !holds.has(c.key)) holds.set(c.key, await h.o.store.beginTransfer(c.key));
      } catch (err) {
        const what = err instanceof ChunkOrderError ? `chunks of key "${c.key}" out of order` : "undecodable chunk";
        return rejectChunk(`${what}: ${(err as Error).message}`);
      }
      try {
        slice = decodeSlice(c.type, payload, ctx, header, h.o.store.now(), bound);
      } catch (err) {
        // A type stored whole travels in one chunk: the key is left out, the stream goes on.
        if (err instanceof StateLimitError && c.keyDone) {
          leftOut.add(c.partition);
          h.skipOversized(c.key, err.message, from);
          endKey(c.key);
          continue;
        }
        // The key is left out from here on (chunks applied before stay: each joined on its own
        // range), the stream goes on, and the partition is not acknowledged.
        if (err instanceof DecodeError || err instanceof UnknownTypeError) {
          h.skipUndecodable(c.key, err.message, from);
          unacked.add(c.partition);
          endKey(c.key);
          if (!c.keyDone) skipped.add(c.key);
          continue;
        }
        return rejectChunk(`undecodable chunk: ${(err as Error).message}`);
      }
      try {
        const parts: unknown[] = [];
        h.counters.stateBytesApplied += payload.length;
        const mark = h.changeMark();
        const r = await h.o.store.applyChunk(c.key, { type: c.type, senderCtx: ctx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice });
        h.spreadSettled(c.key, r.settled);
        // Only a type stored whole refuses, and it travels in one chunk: slice is its whole state.
        if (r.refused !== undefined) h.holdRefused(c.key, c.type, slice, from, mark);
        if (r.changed) parts.push(r.newPart);
        if (r.changed && r.readChanged !== false) h.changedHere(c.key, c.type);
        if (c.keyDone) {
          const f = await h.o.store.finishKey(c.key, c.type, ctx);
          h.spreadSettled(c.key, f.settled);
          if (f.changed) parts.push(f.newPart);
          endKey(c.key);
          // A delta's removes join like a merge, which waits for the key's transfer: after it.
          if (removed !== undefined && !removed.isEmpty()) {
            const m = await h.o.store.merge(c.key, ObjectType.AWSET, AWSet.fromParts(new Map(), removed));
            h.spreadSettled(c.key, m.settled);
            if (m.changed) parts.push(m.newPart);
            if (m.changed && m.readChanged !== false) h.changedHere(c.key, c.type);
          }
        }
        h.counters.chunksApplied++;
        collectFresh(h, fresh, freshElements, c.partition, c.key, c.type, parts);
      } catch (err) {
        if (err instanceof TypeMismatchError || err instanceof JoinConflictError) {
          // The key is left out whole: its other chunks are dropped, and the stream goes on.
          leftOut.add(c.partition);
          h.skipConflict(c.key, err.message);
          endKey(c.key);
          if (!c.keyDone) skipped.add(c.key);
          continue;
        }
        throw err;
      }
    }
    return { reply: { from: h.self, acks: acks.map(ackToProto), chunks: BigInt(count), boot: h.o.boot, dropped: h.dropped() } };
  } finally {
    for (const release of holds.values()) release();
    for (const g of gates.values()) h.gate.closeGate(g);
    // A stream that sent nothing (its partitions all held alike) names its sender only by the
    // call's STATE_SENDER_HEADER; its claims end too.
    const ended = from !== "" ? from : sender;
    if (ended !== undefined && ended !== "") h.claims.streamEnded(ended);
  }
}

/**
 * Call metadata of a PushState stream naming its sender's node id, so that a stream without any
 * chunk still ends its sender's Contexts claims (PartitionClaims.streamEnded). It proves nothing:
 * a caller that could forge it could as well send chunks under that name.
 */
export const STATE_SENDER_HEADER = "deltaset-state-sender";

/** A received state's new part of this many elements is forwarded by full state, not buffered. */
function tooLargeToBuffer(h: StateReceiveHost, elements: number): boolean {
  return elements > (h.o.maxBufferedStateElements ?? MAX_BUFFERED_STATE_ELEMENTS);
}

/** Gather the new parts of a received full state for the delta buffer, unless they grow too big. */
function collectFresh(
  h: StateReceiveHost,
  fresh: Map<number, Map<string, KeyedState>>,
  counts: Map<number, number>,
  partition: number,
  key: string,
  type: ObjectType,
  parts: unknown[],
): void {
  if (parts.length === 0) return;
  const before = counts.get(partition) ?? 0;
  const n = before + parts.reduce<number>((s, p) => s + sizeOf(type, p), 0);
  counts.set(partition, n);
  if (tooLargeToBuffer(h, n)) {
    // Too big to hold in memory: the engine forwards this partition by full state instead
    // (Algorithm 2 is transitive; the others must not depend on the sender surviving).
    fresh.delete(partition);
    if (!tooLargeToBuffer(h, before)) h.counters.freshPartsNotBuffered++;
    return;
  }
  const m = fresh.get(partition) ?? new Map<string, KeyedState>();
  const l = latticeFor(type);
  const cur = m.get(key);
  // The new parts in the order the store took them: a delta-group (the state is this map's own).
  const state = cur === undefined ? l.clone(parts[0]!) : cur.state;
  for (const p of cur === undefined ? parts.slice(1) : parts) joinGroupInPlace(l, state, p);
  m.set(key, { type, state });
  fresh.set(partition, m);
}
