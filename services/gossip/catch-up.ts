// Catch-up by contexts: before a partition's full state goes to a neighbour, the sender asks what
// the neighbour holds there (Gossip/Contexts) and sends each key only what it lacks.
//  - An AWSET key the neighbour holds with context C goes as its delta since C (crdt/since-cut.ts,
//    as Export's `since`): the entries holding dots outside C, the sender's context minus C, and
//    on the last chunk the dots inside C the sender has seen and no longer holds (its removes).
//    Nothing goes when that delta is empty: a neighbour back with everything it had gets nothing.
//    When the sender's context lies within C and both copies' live digests agree
//    (store/live-digest.ts), that delta is known to be empty without reading the set.
//  - A key stored whole goes whole, unless the neighbour's digest of its state equals the sender's.
//  - A key the neighbour did not list (it lacks it) goes whole, as a plain full state. An answer
//    cut at its size limit is continued page by page (start_after) as the push reaches its end.
//  - A partition another neighbour is pushing there at that moment (a wiped node, caught up by
//    all its neighbours at once) waits for a later period (Algorithm 2), when the answer shows
//    what that push brought: about one copy of the data moves instead of one per neighbour.
// Joined into a copy whose context still includes C, a key's delta since C gives exactly what its
// full state would, so the partition's acknowledgement means what it always means. The neighbour
// refuses the stream if it may have lost part of C since it answered: its boot id or its drop
// count for the partition changed (StateChunk.since_boot, since_drops).
import { type CausalContext, ObjectType, contextFromProto, contextToProto } from "../crdt/index.js";
import { KeyContext } from "../gen/deltaset/v1/gossip.js";
import { type SetChunk, setChunksSince } from "../store/set-chunks.js";
import type { Store } from "../store/store.js";
import { type LiveDigest, decodeLiveDigest, encodeLiveDigest, sameLiveDigest } from "../store/live-digest.js";

/** What a neighbour said it holds of one partition (its ContextsReply, decoded). */
export interface Holdings {
  /** Its boot id and drop count for the partition when it answered. */
  boot: bigint;
  drops: number;
  keys: Map<string, { type: ObjectType; ctx?: CausalContext; digest?: Buffer; live?: LiveDigest }>;
  /** Another neighbour is pushing the partition there: push it in a later period. */
  busy?: boolean;
  /** The last key listed, when keys after it were left out (the answer's size limit): ask for the next page from it. */
  more?: string;
}

/** Whether key a sorts after key b in the store's key order (UTF-8 bytes). */
export function keyAfter(a: string, b: string): boolean {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")) > 0;
}

/**
 * The keys of one partition with their contexts (AWSET) or digests (types stored whole), in key
 * order, until their encoded size would pass maxBytes (at least one key). complete: all listed.
 * Answered once what it read is durable: reads see queued writes, and a neighbour skips sending
 * what the answer says is held here.
 */
export async function partitionHoldings(store: Store, partition: number, maxBytes: number, after?: string): Promise<{ keys: KeyContext[]; complete: boolean }> {
  const listed = await listHoldings(store, partition, maxBytes, after);
  await store.written();
  return listed;
}

async function listHoldings(store: Store, partition: number, maxBytes: number, after?: string): Promise<{ keys: KeyContext[]; complete: boolean }> {
  const keys: KeyContext[] = [];
  let bytes = 0;
  for await (const key of after === undefined || after === "" ? store.keys(partition) : store.keysWithPrefix(partition, "", after)) {
    const d = await store.describe(key);
    if (d === undefined) continue;
    let kc: KeyContext;
    if (d.type === ObjectType.AWSET) {
      const liveDigest = d.live === undefined ? Buffer.alloc(0) : encodeLiveDigest(d.live);
      kc = { key, type: d.type, context: contextToProto(d.ctx), digest: Buffer.alloc(0), liveDigest };
    } else {
      const digest = await store.wholeStateDigest(key);
      if (digest === undefined) continue;
      kc = { key, type: d.type, context: undefined, digest, liveDigest: Buffer.alloc(0) };
    }
    const size = KeyContext.encode(kc).finish().length + 4;
    if (keys.length > 0 && bytes + size > maxBytes) return { keys, complete: false };
    keys.push(kc);
    bytes += size;
  }
  return { keys, complete: true };
}

/** A neighbour's answer as Holdings. Throws a DecodeError-like error on a malformed context. */
export function holdingsFrom(r: { boot: bigint; drops: bigint; keys: readonly KeyContext[]; busy: boolean; complete: boolean }): Holdings {
  const m: Holdings["keys"] = new Map();
  for (const k of r.keys) {
    m.set(k.key, k.type === ObjectType.AWSET ? { type: k.type, ctx: contextFromProto(k.context), live: decodeLiveDigest(k.liveDigest) } : { type: k.type, digest: Buffer.from(k.digest) });
  }
  const more = r.complete || r.busy || r.keys.length === 0 ? undefined : r.keys.at(-1)!.key;
  return { boot: r.boot, drops: Number(r.drops), keys: m, busy: r.busy, more };
}

/**
 * Whether a set whose context and live digest are ours holds nothing a neighbour holding `held`
 * lacks: our context lies within its and the live dots (with their elements) are the same, so the
 * delta since its context is empty. False when either digest is not known.
 */
export function heldAlike(ours: { ctx: CausalContext; live?: LiveDigest }, held: { ctx?: CausalContext; live?: LiveDigest }): boolean {
  return ours.live !== undefined && held.live !== undefined && held.ctx !== undefined && sameLiveDigest(ours.live, held.live) && ours.ctx.leq(held.ctx);
}

/**
 * A key's delta since `since`, chunk by chunk (store/set-chunks.ts, one snapshot). Yields nothing
 * when the delta is empty (no entry outside since, no context outside it, no remove inside it),
 * or when the key is not a set here.
 */
export async function* deltaChunks(store: Store, key: string, since: CausalContext, limits: { maxEntries: number; maxBytes: number }): AsyncGenerator<SetChunk> {
  let first = true;
  for await (const c of setChunksSince(store, key, since, limits)) {
    if ("whole" in c) return;
    // Only the last chunk can be empty (the regrouper closes a chunk at an entry).
    if (first && c.range.rangeOpen && c.range.entries.size === 0 && c.context!.isEmpty() && c.removed === undefined) return;
    first = false;
    yield c;
  }
}

/**
 * Which neighbour is pushing each partition here (Contexts' busy). A neighbour answered Contexts
 * for a partition claims it for `claimMs`; its push's first chunk of the partition holds the claim
 * until the push finishes the partition or ends. Another neighbour asking meanwhile is told busy.
 * When a push stream ends, every claim of its sender ends with it: a push asks about partitions
 * ahead of its stream and may send nothing of some (it ended at its byte budget or failed first,
 * or they were all deferred), and those claims would otherwise turn every other neighbour away
 * for claimMs.
 */
export class PartitionClaims {
  private readonly claims = new Map<number, { from: string; until: number }>();

  constructor(private readonly claimMs: number) {}

  /** A neighbour asks about partition p at `now`: true (busy) when another one holds it; else it is now this one's. */
  ask(p: number, from: string, now: number): boolean {
    const c = this.claims.get(p);
    if (c !== undefined && c.from !== from && c.until > now) return true;
    this.claims.set(p, { from, until: now + this.claimMs });
    return false;
  }

  /** A push of partition p by `from` started arriving: held until done(). */
  pushing(p: number, from: string): void {
    this.claims.set(p, { from, until: Infinity });
  }

  /** The push of p by `from` finished it, or ended. */
  done(p: number, from: string): void {
    if (this.claims.get(p)?.from === from) this.claims.delete(p);
  }

  /** A push stream of `from` ended: none of its claims holds any longer. */
  streamEnded(from: string): void {
    for (const [p, c] of this.claims) if (c.from === from) this.claims.delete(p);
  }
}
