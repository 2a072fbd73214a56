// Before a node answers a read (Query, Scan, Export) of a key in a partition it came to own within
// --read-after-move-ms, it fetches the key from the members that held the partition before
// (Ownership.pullFrom) and joins what they have that it lacks. Until they have sent it the
// partition whole, the copy here may hold only part of the key: the chunks of a transfer still
// arriving, or only the writes taken here since the move. Answered from as it is, a set read as
// part of itself with nothing to tell the caller so. A join is safe whatever the holder's copy is
// (a stale one adds nothing a remove here has covered), so each holder is asked for the key's
// delta since the context here (Export with since), and what it sends is joined as Import joins
// it, only once all of it has arrived: a fetch cut part-way leaves nothing. A key absent here is
// not fetched for a read: the read finds it absent and moves on to the next owner (routing.ts).
// A Delete and a Remove without context act on what this node observed of the key, and an
// Increment with a request id is applied once only if this node saw its earlier tries, so they
// fetch first too, a key absent here included (an owner only): served from part of the key, a
// Delete removed that part and the rest came back with the hand-off, and a retry counted twice.
//
// A holder may itself have come to own the partition lately (two moves in a row): asked by a
// fetch, it first fetches from its own former holders, one hop further at most (READ_PULL carries
// the hop), unless its own fetch of the key is running (it may be waiting on the asker). A holder that does not answer within --forward-timeout-ms is passed over for as long,
// and the read answers from what this node holds, as it did before fetches existed.
import * as grpc from "@grpc/grpc-js";
import { ObjectType, contextToProto } from "../crdt/index.js";
import type { CausalContext } from "../crdt/index.js";
import type { ExportChunk, ExportRequest } from "../gen/deltaset/v1/replica.js";
import type { Ownership } from "../gossip/ownership.js";
import type { Logger } from "../common/logger.js";
import { logThrottle } from "../common/log-throttle.js";

/** Metadata of a fetch, its value the hop (1: asked by the reading node): never forwarded. */
export const READ_PULL = "x-deltaset-read-pull";
/** A holder asked at this hop answers from what it holds, fetching nothing itself. */
const LAST_HOP = 2;

/** How one fetch from a holder ended: it had something of the key, had nothing, or failed. */
export type PullOutcome = "joined" | "none" | "failed";

export interface ReadPullDeps {
  ownership: Ownership;
  /** --read-after-move-ms: reads fetch first for this long after this node came to own a partition. */
  windowMs: number;
  /** --forward-timeout-ms: how long one fetch may take, and how long a holder that failed is passed over. */
  timeoutMs: number;
  /** Most bytes of one holder's answer held until it is complete (--max-state-bytes); a larger one is not joined. */
  maxBytes: number;
  /** The key's type and context here (Store.describe); undefined when absent. */
  describe(key: string): Promise<{ type: ObjectType; ctx: CausalContext } | undefined>;
  /** Export call to a holder. */
  exportFrom(address: string, req: ExportRequest, metadata: grpc.Metadata, options: Partial<grpc.CallOptions>): AsyncIterable<ExportChunk>;
  /** Joins an export into the store, as Import does; returns whether anything changed. */
  apply(chunks: AsyncIterable<ExportChunk>): Promise<boolean>;
  log: Logger;
  onPull?: (outcome: PullOutcome) => void;
  now?: () => number;
  /** Keys remembered as fetched (the oldest forgotten first); default 65,536. */
  maxRemembered?: number;
}

/** A fetch's failure that says nothing about the holder (a refused token, a conflict here): it is not passed over for it. */
class NotTheHolders extends Error {}

export class ReadPull {
  private readonly now: () => number;
  private readonly running = new Map<string, Promise<void>>();
  /** Keys fetched from every holder, with when: not fetched again for the same gain. */
  private readonly fetched = new Map<string, number>();
  private readonly warnings = logThrottle(10_000);
  /** Holders whose last fetch failed (unreachable, or too slow), with when: passed over for timeoutMs after. */
  private readonly failedAt = new Map<string, number>();

  constructor(private readonly d: ReadPullDeps) {
    this.now = d.now ?? Date.now;
  }

  /** The hop of a call that is itself a fetch (0: not a fetch). */
  static hopOf(metadata: grpc.Metadata): number {
    const v = metadata.get(READ_PULL);
    if (v.length === 0) return 0;
    const n = Number(v[0]);
    return Number.isInteger(n) && n >= 1 ? n : LAST_HOP;
  }

  /** Whether a call is itself a fetch (it is answered here, never forwarded). */
  static isPull(metadata: grpc.Metadata): boolean {
    return ReadPull.hopOf(metadata) > 0;
  }

  /**
   * Resolves once key is as complete here as its former holders can make it (at once when this
   * node did not come to own its partition lately, or when the call is a fetch at the last hop).
   * Never rejects: a failed fetch is logged and counted. authorization: the caller's bearer
   * tokens (a fetch reads on its behalf); hop: the calling fetch's (0 for a client's read).
   */
  async before(key: string, authorization: grpc.MetadataValue[], hop = 0, absentToo = false): Promise<void> {
    const o = this.d.ownership;
    if (o.full || this.d.windowMs <= 0 || key === "" || hop >= LAST_HOP) return;
    const p = o.partitionOf(key);
    // A fetch of a key absent here copies it here: only to an owner.
    const fetchAbsent = absentToo && o.owns(p);
    for (;;) {
      const running = this.running.get(key);
      if (running === undefined) break;
      // A fetch asking this node while its own fetch of the key runs is answered from what is
      // here: its own may be waiting on the asker (two new owners read at once fetch from each
      // other, and waited on each other until the timeout). The asker asks the others itself.
      if (hop > 0) return;
      await running;
      // A read's fetch skips a key absent here, which a write acting on what it observed needs.
      if (!fetchAbsent) return;
    }
    const now = this.now();
    const all = o.pullFrom(p, now - this.d.windowMs);
    if (all.length === 0) return;
    const at = this.fetched.get(key);
    if (at !== undefined && at >= o.gainedAt(p)) return;
    for (const [id, t] of this.failedAt) if (now - t >= this.d.timeoutMs) this.failedAt.delete(id);
    // A holder that failed lately is passed over for a while: a member that hangs would otherwise
    // hold every read of the partitions it held for the whole timeout.
    const holders = all.filter((h) => !this.failedAt.has(h.nodeId));
    if (holders.length === 0) return;
    const run = this.fetch(key, holders, authorization, hop, now + this.d.timeoutMs, fetchAbsent)
      .then((answered) => {
        // Remembered only when every holder answered (one passed over is asked next time).
        if (!answered || holders.length < all.length) return;
        this.fetched.delete(key);
        if (this.fetched.size >= (this.d.maxRemembered ?? 65_536)) this.fetched.delete(this.fetched.keys().next().value!);
        this.fetched.set(key, now);
      })
      .finally(() => this.running.delete(key));
    this.running.set(key, run);
    return run;
  }

  /** Fetch key from each holder at once; true when every one answered. */
  private async fetch(key: string, holders: Array<{ nodeId: string; address: string }>, authorization: grpc.MetadataValue[], hop: number, deadline: number, fetchAbsent: boolean): Promise<boolean> {
    const here = await this.d.describe(key);
    // A client's read of a key absent here fetches nothing: it finds the key absent and asks the
    // next owner, then the former ones (routing.ts), one call instead of moving the whole key here
    // first. A fetch asking an owner wants all it can get; one asking a node that lost the
    // partition since gets what that node holds, fetched through only if it holds part of it (a
    // node holding nothing of it would otherwise take a copy it does not own).
    // A write that acts on what this node observed (a Delete, a Remove without context, an
    // Increment with a request id) fetches a key absent here too (fetchAbsent, an owner only).
    if (here === undefined && !fetchAbsent && (hop === 0 || !this.d.ownership.owns(this.d.ownership.partitionOf(key)))) return false;
    // A set's delta since what is here; the other types travel whole whatever since says.
    const since = here?.type === ObjectType.AWSET ? contextToProto(here.ctx) : undefined;
    const outcomes = await Promise.all(
      holders.map(async (h): Promise<PullOutcome> => {
        const metadata = new grpc.Metadata();
        for (const v of authorization) metadata.add("authorization", v);
        metadata.set(READ_PULL, String(hop + 1));
        let chunks: ExportChunk[];
        try {
          chunks = await this.whole(this.d.exportFrom(h.address, { key, maxEntries: 0, maxBytes: 0, since }, metadata, { deadline }));
        } catch (err) {
          const code = (err as grpc.ServiceError).code;
          if (code === grpc.status.NOT_FOUND) return "none";
          if (code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED) this.failedAt.set(h.nodeId, this.now());
          this.warn(key, h.nodeId, err);
          return "failed";
        }
        this.failedAt.delete(h.nodeId);
        try {
          return (await this.d.apply(iterate(chunks))) ? "joined" : "none";
        } catch (err) {
          this.warn(key, h.nodeId, err);
          return "failed";
        }
      }),
    );
    for (const x of outcomes) this.d.onPull?.(x);
    return outcomes.every((x) => x !== "failed");
  }

  /** A holder's answer, all of it (or a NotTheHolders error past maxBytes). */
  private async whole(stream: AsyncIterable<ExportChunk>): Promise<ExportChunk[]> {
    const out: ExportChunk[] = [];
    let bytes = 0;
    for await (const c of stream) {
      bytes += c.slice?.payload.length ?? 0;
      if (bytes > this.d.maxBytes) throw new NotTheHolders(`the key's answer passed ${this.d.maxBytes} bytes (--max-state-bytes): not joined`);
      out.push(c);
    }
    return out;
  }

  private warn(key: string, holder: string, err: unknown): void {
    const admitted = this.warnings.admit(holder);
    if (admitted === undefined) return;
    this.d.log.warn("a read of a partition this node came to own lately could not fetch the key from a member that held it: answered from what this node holds, which may lack part of it", {
      key,
      holder,
      err: (err as Error).message,
      ...admitted,
    });
  }
}

async function* iterate<T>(items: T[]): AsyncGenerator<T> {
  yield* items;
}
