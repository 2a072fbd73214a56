// Before a node answers a read (Query, Scan, Export) of a key in a partition it came to own within
// --read-after-move-ms, it fetches the key from the members that held the partition before
// (Ownership.pullFrom) and joins what they have that it lacks. Until they have sent it the
// partition whole, the copy here may hold only part of the key: the chunks of a transfer still
// arriving, or only the writes taken here since the move. Answered from as it is, a set read as
// part of itself with nothing to tell the caller so. A join is safe whatever the holder's copy is
// (a stale one adds nothing a remove here has covered), so each holder is asked for the key's
// delta since the context here (Export with since) and it is imported as Import would.
// A holder that does not answer in --forward-timeout-ms is passed over: the read is answered from
// what this node has, as before.
import * as grpc from "@grpc/grpc-js";
import { ObjectType, contextToProto } from "../crdt/index.js";
import type { CausalContext } from "../crdt/index.js";
import type { ExportChunk, ExportRequest } from "../gen/deltaset/v1/replica.js";
import type { Ownership } from "../gossip/ownership.js";
import type { Logger } from "../common/logger.js";
import { logThrottle } from "../common/log-throttle.js";

/** Metadata of a fetch: its receiver answers from what it holds and fetches nothing itself. */
export const READ_PULL = "x-deltaset-read-pull";

/** How one fetch from a holder ended: it had something of the key, had nothing, or failed. */
export type PullOutcome = "joined" | "none" | "failed";

export interface ReadPullDeps {
  ownership: Ownership;
  /** --read-after-move-ms: reads fetch first for this long after this node came to own a partition. */
  windowMs: number;
  /** --forward-timeout-ms: how long one holder may take. */
  timeoutMs: number;
  /** The key's type and context here (Store.describe); undefined when absent. */
  describe(key: string): Promise<{ type: ObjectType; ctx: CausalContext } | undefined>;
  /** Export call to a holder. */
  exportFrom(address: string, req: ExportRequest, metadata: grpc.Metadata, options: Partial<grpc.CallOptions>): AsyncIterable<ExportChunk>;
  /** Joins an export into the store, as Import does; returns whether anything changed. */
  apply(chunks: AsyncIterable<ExportChunk>): Promise<boolean>;
  log: Logger;
  onPull?: (outcome: PullOutcome) => void;
  now?: () => number;
  /** Keys remembered as fetched (a larger set starts over); default 65,536. */
  maxRemembered?: number;
}

export class ReadPull {
  private readonly now: () => number;
  private readonly running = new Map<string, Promise<void>>();
  /** Keys fetched from every holder, with when: not fetched again for the same gain. */
  private readonly fetched = new Map<string, number>();
  private readonly warnings = logThrottle(10_000);
  /** Holders whose last fetch failed, with when: passed over for --forward-timeout-ms after. */
  private readonly failedAt = new Map<string, number>();

  constructor(private readonly d: ReadPullDeps) {
    this.now = d.now ?? Date.now;
  }

  /** Whether a call is itself a fetch (answered from what is here). */
  static isPull(metadata: grpc.Metadata): boolean {
    return metadata.get(READ_PULL).length > 0;
  }

  /**
   * Resolves once key is as complete here as its former holders can make it (at once when this
   * node did not come to own its partition lately). Never rejects: a failed fetch is logged.
   * authorization: the caller's bearer tokens (a fetch reads on its behalf); deadlineMs: the caller's.
   */
  before(key: string, authorization: grpc.MetadataValue[], deadlineMs = Infinity): Promise<void> {
    const o = this.d.ownership;
    if (o.full || this.d.windowMs <= 0 || key === "") return Promise.resolve();
    const p = o.partitionOf(key);
    const now = this.now();
    // A holder that failed lately is passed over for a while: a member that hangs would otherwise
    // hold every read of the partitions it held for the whole timeout.
    const holders = o.pullFrom(p, now - this.d.windowMs).filter((h) => !(now - (this.failedAt.get(h.nodeId) ?? -Infinity) < this.d.timeoutMs));
    if (holders.length === 0) return Promise.resolve();
    const at = this.fetched.get(key);
    if (at !== undefined && at >= o.gainedAt(p)) return Promise.resolve();
    const running = this.running.get(key);
    if (running !== undefined) return running;
    const started = now;
    const run = this.fetch(key, holders, authorization, Math.min(deadlineMs, now + this.d.timeoutMs))
      .then((complete) => {
        if (!complete) return;
        if (this.fetched.size >= (this.d.maxRemembered ?? 65_536)) this.fetched.clear();
        this.fetched.set(key, started);
      })
      .finally(() => this.running.delete(key));
    this.running.set(key, run);
    return run;
  }

  /** Fetch key from each holder at once; true when every one answered. */
  private async fetch(key: string, holders: Array<{ nodeId: string; address: string }>, authorization: grpc.MetadataValue[], deadline: number): Promise<boolean> {
    const here = await this.d.describe(key);
    // A set's delta since what is here; the other types travel whole whatever since says.
    const since = here?.type === ObjectType.AWSET ? contextToProto(here.ctx) : undefined;
    const outcomes = await Promise.all(
      holders.map(async (h) => {
        const metadata = new grpc.Metadata();
        for (const v of authorization) metadata.add("authorization", v);
        metadata.set(READ_PULL, this.d.ownership.self);
        try {
          const chunks = this.d.exportFrom(h.address, { key, maxEntries: 0, maxBytes: 0, since }, metadata, { deadline });
          const changed = await this.d.apply(chunks);
          this.failedAt.delete(h.nodeId);
          return changed ? "joined" : "none";
        } catch (err) {
          if ((err as grpc.ServiceError).code === grpc.status.NOT_FOUND) return "none";
          this.failedAt.set(h.nodeId, this.now());
          const admitted = this.warnings.admit(h.nodeId);
          if (admitted !== undefined) {
            this.d.log.warn("a read of a partition this node came to own lately could not fetch the key from a member that held it: answered from what this node holds, which may lack part of it", {
              key,
              holder: h.nodeId,
              err: (err as Error).message,
              ...admitted,
            });
          }
          return "failed";
        }
      }),
    );
    for (const x of outcomes) this.d.onPull?.(x as PullOutcome);
    return outcomes.every((x) => x !== "failed");
  }
}
