// Outgoing full-state streams (Gossip/PushState): the chunks of the partitions a period plans to
// push to a neighbour, read from the store as the stream pulls them, each set cut to what the
// neighbour lacks when it said what it holds (catch-up.ts), within a byte budget per stream.
import { type CausalContext, ObjectType, contextEncodedSize, contextToProto } from "../crdt/index.js";
import type { StateChunk } from "../gen/deltaset/v1/gossip.js";
import type { Store } from "../store/store.js";
import { chunkPayload } from "../store/chunk-payload.js";
import { NO_MAC } from "../common/trailing-mac.js";
import { cutIntoPieces } from "../common/chunk-pieces.js";
import { type Holdings, deltaChunks, heldAlike, keyAfter } from "./catch-up.js";
import { CONTEXTS_AHEAD, type HoldingsOf, prefetchedHoldings } from "./holdings-prefetch.js";

/** What a stream is built from: the exchange's options, identity, counters and byte count. */
export interface StateStreamSource {
  o: {
    cluster: string;
    partitions: number;
    boot: bigint;
    store: Store;
    stateChunkEntries: number;
    stateStreamBytes?: number;
    maxMessageBytes: number;
    sync: { algorithm: 1 | 2 };
    /** Contexts questions out at once ahead of the stream (holdings-prefetch.ts); default CONTEXTS_AHEAD. */
    contextsAhead?: number;
  };
  self: string;
  counters: { stateStreamsSent: number; catchUpBusyDeferred: number; catchUpDeltaKeys: number; catchUpKeysSkipped: number; catchUpKeysUnread: number };
  recordStateBytesSent(bytes: number): void;
}

/** The fields of a StateChunk that is not part of a key's delta (catch-up.ts). */
const NOT_DELTA = { delta: false, removed: undefined, sinceBoot: 0n, sinceDrops: 0n, continued: false } as const;

/**
 * The chunks of a full-state stream of these partitions, read from the store as they are
 * pulled: each key in element order, its context on its first chunk; after each partition an
 * end marker, which the receiver acknowledges (Algorithm 1 wants no ack, so none then).
 *
 * The stream ends after the partition whose chunks bring it to stateStreamBytes, and returns
 * how many of the partitions it covered: the caller streams the rest in a new stream once this
 * one is answered. The receiver acknowledges only when a stream ends, so one stream of many
 * gigabytes would hold every acknowledgement (and every delta of its partitions to that peer)
 * until its very end, lose them all if it broke, and, started over from its first partition,
 * might never get to its last ones. A partition always goes whole in one stream.
 *
 * With askHoldings, each partition's keys go as catch-up.ts says (what the receiver holds); a
 * planHolds that turns false (the receiver's acks were reset meanwhile) ends the stream before
 * the partition it was asked for. Only partitions holding a key here are asked about, ahead of
 * the stream (holdings-prefetch.ts): nothing of an empty one is sent, and a question costs a
 * round trip and claims the partition at the receiver (Contexts' busy).
 *
 * Only Algorithm 2 asks. Its full states are catch-ups (a neighbour's restart or reset, a new
 * neighbour, a delta buffer that no longer covers one), rare and often large, where knowing what
 * the neighbour holds saves nearly all of it. Algorithm 1 ships full state as its routine (every
 * period in the full-state mode, every k-th with periodic state): asking first there added a
 * round trip and the answering work to every push (eval:types' full-state cells at 9 nodes: p50
 * 0.49-1.82 s asking, 0.35-1.00 s not, two runs the same day; README).
 */
export async function* stateStream(
  src: StateStreamSource,
  parts: ReadonlyArray<{ partition: number; seq: number }>,
  askHoldings?: HoldingsOf<Holdings | undefined>,
  planHolds?: () => boolean,
): AsyncGenerator<StateChunk, number> {
  src.counters.stateStreamsSent++;
  const budget = src.o.stateStreamBytes ?? Infinity;
  let streamed = 0;
  let covered = 0;
  let first = true;
  const head = () => {
    // mac: set by the peer signer on the way out, with a cluster key (node/peer-interceptors.ts).
    const h = first
      ? { cluster: src.o.cluster, from: src.self, partitions: src.o.partitions, boot: src.o.boot, mac: NO_MAC }
      : { cluster: "", from: "", partitions: 0, boot: 0n, mac: NO_MAC };
    first = false;
    return h;
  };
  const scan = src.o.store.keyScan();
  const ask = src.o.sync.algorithm === 2 ? askHoldings : undefined;
  const withKeys = ask === undefined ? new Set<number>() : await partitionsHoldingKeys(src.o.store, parts);
  const holdingsOf = ask === undefined ? undefined : prefetchedHoldings([...withKeys], ask, src.o.contextsAhead ?? CONTEXTS_AHEAD);
  for (const { partition, seq } of parts) {
    let bytes = 0;
    // What the receiver holds here (catch-up.ts): keys it holds go as their delta, or not at all.
    // A partition that held no key when the stream began is not asked about: a key written since
    // goes whole.
    let holdings = holdingsOf === undefined || !withKeys.has(partition) ? undefined : await holdingsOf(partition);
    // The receiver's answer told of a restart (or a drop) this push was not planned on: stop;
    // the next period plans on its new acks, and asks it again.
    if (planHolds?.() === false) break;
    if (holdings?.busy === true && src.o.sync.algorithm === 2) {
      // Not acknowledged, so planned again next period (see Holdings.busy).
      src.counters.catchUpBusyDeferred++;
      covered++;
      continue;
    }
    // What the receiver said it held when this partition was planned against it: the end marker
    // carries it, so a receiver that dropped the partition since does not count the keys left out
    // as held (nor acknowledge them).
    const vouched = holdings === undefined ? undefined : { boot: holdings.boot, drops: holdings.drops };
    for await (const key of scan.keys(partition)) {
      // Past the last key of a page that was not the last: the next page, from there.
      while (holdings?.more !== undefined && keyAfter(key, holdings.more)) {
        holdings = await holdingsOf!(partition, holdings.more);
        if (planHolds?.() === false) return covered;
        if (holdings?.busy === true) holdings = undefined;
      }
      const held = holdings?.keys.get(key);
      const ours = held?.ctx === undefined ? undefined : await src.o.store.describe(key);
      if (held?.ctx !== undefined && ours?.type === ObjectType.AWSET) {
        if (heldAlike(ours, held)) {
          // The same live dots, and nothing seen here it has not: no delta, and no read.
          src.counters.catchUpKeysSkipped++;
          src.counters.catchUpKeysUnread++;
          continue;
        }
        let sent = false;
        for await (const { chunk, size } of deltaKeyChunks(src, key, held.ctx, holdings!, partition, seq)) {
          sent = true;
          bytes += size;
          // Counted as each chunk goes out: a stream that ends early has still sent these.
          src.recordStateBytesSent(size);
          yield { ...chunk, ...head() };
        }
        if (sent) src.counters.catchUpDeltaKeys++;
        else src.counters.catchUpKeysSkipped++;
        continue;
      }
      // A key stored whole that the receiver holds alike (its digest is kept per version here).
      if (held?.digest !== undefined && (await src.o.store.wholeStateDigest(key))?.equals(held.digest) === true) {
        src.counters.catchUpKeysSkipped++;
        continue;
      }
      const limits = chunkLimits(src);
      for await (const c of src.o.store.stateChunks(key, limits)) {
        const payload = chunkPayload(c, src.o.store.now());
        bytes += payload.length;
        src.recordStateBytesSent(payload.length);
        // A state stored whole may be larger than a message: it goes in pieces (chunk-pieces.ts).
        const pieces = cutIntoPieces(payload, limits.maxBytes);
        for (const [i, piece] of pieces.entries()) {
          yield {
            ...head(),
            ...NOT_DELTA,
            partition,
            seq: BigInt(seq),
            key,
            type: c.type,
            context: c.ctx === undefined || i > 0 ? undefined : contextToProto(c.ctx),
            rangeStart: c.rangeStart,
            rangeEnd: c.rangeEnd,
            rangeOpen: c.rangeOpen,
            slice: { type: c.type, payload: piece.payload },
            keyDone: c.keyDone,
            partitionDone: false,
            continued: i < pieces.length - 1,
            pieceOffset: piece.offset === undefined ? undefined : BigInt(piece.offset),
            payloadSha256: piece.digest,
          };
        }
      }
    }
    streamed += bytes;
    covered++;
    if (seq !== 0) yield {
      ...head(),
      ...NOT_DELTA,
      partition,
      seq: BigInt(seq),
      key: "",
      type: ObjectType.OBJECT_TYPE_UNSPECIFIED,
      context: undefined,
      rangeStart: Buffer.alloc(0),
      rangeEnd: Buffer.alloc(0),
      rangeOpen: true,
      slice: undefined,
      keyDone: false,
      partitionDone: true,
      ...(vouched === undefined ? {} : { delta: true, sinceBoot: vouched.boot, sinceDrops: BigInt(vouched.drops) }),
      continued: false,
    };
    if (streamed >= budget) break;
  }
  return covered;
}

/**
 * A state chunk's bounds: --state-chunk-entries entries, and half a message of entries (the rest
 * leaves room for the context the first chunk carries and the framing).
 */
function chunkLimits(src: StateStreamSource): { maxEntries: number; maxBytes: number } {
  return { maxEntries: src.o.stateChunkEntries, maxBytes: Math.max(1, Math.floor(src.o.maxMessageBytes / 2)) };
}

/** Which of these partitions hold at least one key here, in the order given. */
async function partitionsHoldingKeys(store: Store, parts: ReadonlyArray<{ partition: number }>): Promise<Set<number>> {
  // One scan: a seek that finds the next key also tells which partitions before it are empty.
  const scan = store.keyScan();
  const held = new Set<number>();
  for (const { partition } of parts) {
    const keys = scan.keys(partition);
    if ((await keys.next()).done !== true) held.add(partition);
    await keys.return(undefined);
  }
  return held;
}

/**
 * A key's delta since what the receiver holds (catch-up.ts), as StateChunk messages, each with the
 * state bytes it carries (its slice, and on the last the encoded removes).
 */
async function* deltaKeyChunks(
  src: StateStreamSource,
  key: string,
  since: CausalContext,
  holdings: Holdings,
  partition: number,
  seq: number,
): AsyncGenerator<{ chunk: StateChunk; size: number }> {
  const limits = chunkLimits(src);
  let first = true;
  for await (const d of deltaChunks(src.o.store, key, since, limits)) {
    const size = d.payload.length + (d.removed === undefined ? 0 : contextEncodedSize(d.removed));
    const chunk: StateChunk = {
      cluster: "",
      from: "",
      partitions: 0,
      boot: 0n,
      mac: NO_MAC,
      partition,
      seq: BigInt(seq),
      key,
      type: ObjectType.AWSET,
      context: d.context === undefined ? undefined : contextToProto(d.context),
      rangeStart: d.range.rangeStart,
      rangeEnd: d.range.rangeOpen ? Buffer.alloc(0) : d.range.rangeEnd,
      rangeOpen: d.range.rangeOpen,
      slice: { type: ObjectType.AWSET, payload: Buffer.from(d.payload) },
      keyDone: d.range.rangeOpen,
      partitionDone: false,
      delta: true,
      removed: d.removed === undefined ? undefined : contextToProto(d.removed),
      sinceBoot: first ? holdings.boot : 0n,
      sinceDrops: first ? BigInt(holdings.drops) : 0n,
      continued: false,
    };
    yield { chunk, size };
    first = false;
  }
}
