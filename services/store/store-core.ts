// The core of the store: the database and its group commit, the header cache, the key locks, the
// one write path every operation takes (mutate: under the key's lock, on a copy of the header,
// durable before it returns) and the change feed it reports to, and Algorithm 2's sequence
// numbers. Store (store.ts) adds the operations, reads, joins and state transfers on top.
import { createHash } from "node:crypto";
import { CausalContext, DotSpaceExhaustedError, ObjectType, encodeContext } from "../crdt/index.js";
import { approximateBytes, type StoreDb } from "./db.js";
import { StoreClosedError, TypeMismatchError } from "./errors.js";
import { DecodedStates } from "./decoded-states.js";
import { ElementPresence, presenceHash } from "./element-presence.js";
import { GroupCommit } from "./group-commit.js";
import { KeyLock } from "./key-lock.js";
import type { KeyTypeRule } from "./key-type-rules.js";
import type { JoinResult, ObjectSlot, StoreEnv } from "./layout.js";
import { layoutFor } from "./layouts.js";
import { PendingRemoves } from "./pending-removes.js";
import { OBJECTS, elementRange, headerKey, objectPrefix, unescapeBytes } from "./keys.js";
import { type Header, decodeHeader, encodeHeader, stateBytesOf } from "./records.js";
import { type LiveDigest, encodeLiveDigest, sameLiveDigest } from "./live-digest.js";
import { TransferHolds } from "./transfer-holds.js";
import { WriteView } from "./write-view.js";
import { partitionsWithObjects } from "./object-records.js";
import { loadSeqs, persistSeqs } from "./seq-records.js";


import type { StoreOptions, SyncPolicy } from "./store-options.js";
export type { StoreOptions, SyncPolicy } from "./store-options.js";

export abstract class StoreCore {
  protected readonly lock = new KeyLock();
  protected readonly commit: GroupCommit;
  protected readonly headers = new Map<string, Header>();
  protected readonly changeListeners = new Set<ChangeListener>();
  protected readonly env: StoreEnv;
  protected closed = false;
  protected joinsRefused = 0;
  /** Adds whose time to live ran out, removed from storage by expire(). */
  protected expiredDots = 0;
  protected retriesAbsorbed = 0;
  private filterRetriesAbsorbed = 0;
  protected readonly skewReports = { ahead: 0, behind: 0 };
  protected readonly transfers = new TransferHolds();
  /** Which elements of add-wins sets certainly have no record (element-presence.ts). */
  protected readonly presence: ElementPresence;
  /** Element reads that found no record, per set without a presence filter: when to scan one. */
  private readonly absentReads = new Map<string, number>();

  protected constructor(
    /** The database; a simulator keeps it to reopen the store after a simulated crash. */
    readonly db: StoreDb,
    readonly nodeId: string,
    /**
     * The id this store mints dots under: the node id plus a suffix drawn when the data directory
     * is created. A node that loses its disk and comes back under the same node id (a pod with a
     * new volume) then mints fresh dots instead of reusing counters its peers have already seen,
     * which would make them treat its new writes as already known and drop them.
     */
    public replicaId: string,
    readonly partitions: number,
    protected readonly opts: { sync: SyncPolicy; maxBatch: number; batchStartRecords: number; batchStartOperations: number; headerCacheSize: number; stateCacheBytes: number; presenceFilterBytes: number; presenceScanAfterReads: number; stateLogFromBytes: number; removeLookupLimit: number; clock: () => number; clockSkewBoundMs: number } & Pick<
      StoreOptions,
      "onCounterJoinRefused" | "partitionOf" | "onClockSkew" | "onWriteFailure" | "keyTypes"
    >,
    pending: PendingRemoves,
  ) {
    this.commit = new GroupCommit(db, { sync: opts.sync === "fsync", maxBatch: opts.maxBatch, syncReadMax: 8, startAtRecords: opts.batchStartRecords, startAtOperations: opts.batchStartOperations, onFailure: opts.onWriteFailure });
    this.presence = new ElementPresence(opts.presenceFilterBytes);
    this.env = {
      db,
      commit: this.commit,
      pending,
      decoded: new DecodedStates(opts.stateCacheBytes),
      stateLogFromBytes: opts.stateLogFromBytes,
      stateLogCounts: { appends: 0, compactions: 0 },
      removeLookupLimit: opts.removeLookupLimit,
      joinRefused: (key, reason) => {
        this.joinsRefused++;
        this.opts.onCounterJoinRefused?.({ key, reason });
      },
      now: () => this.opts.clock(),
      clockSkewBoundMs: opts.clockSkewBoundMs,
      clockSkew: (key, report) => {
        this.skewReports[report.direction]++;
        this.opts.onClockSkew?.({ key, report });
      },
    };
  }

  partitionOf(key: string): number {
    return this.opts.partitionOf(key, this.partitions);
  }

  /** close() has been called: work still running on the store ends with errors of the closing database. */
  get isClosed(): boolean {
    return this.closed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Refused from now on, before the drain: a write queued in a microtask between the drain's
    // end and the close would otherwise reach the closed database.
    this.commit.close();
    await this.commit.drain();
    await this.db.close();
  }

  /** Wait until every queued write is durable. */
  flush(): Promise<void> {
    return this.commit.drain();
  }

  /**
   * Resolves once every write queued so far is durable, not waiting for later ones; rejects when
   * one of them failed. An answer built from what reads see (queued writes included) waits for it.
   */
  written(): Promise<void> {
    return this.commit.written();
  }

  stats(): {
    batches: number;
    writes: number;
    /** Records a later operation of the same batch overwrote, left out of it. */
    supersededRecords: number;
    cachedHeaders: number;
    busyKeys: number;
    counterJoinsRefused: number;
    pendingRemoves: number;
    /** Bytes of the deferred-remove records (key, element and unseen context of each). */
    pendingRemoveBytes: number;
    /** Increments with a request id answered as retries, not applied again. */
    retriesAbsorbed: number;
    /** Adds to filter keys with a request id answered as retries, not applied again. */
    filterRetriesAbsorbed: number;
    /** Received retry filters that put their sender's clock beyond the skew bound, by direction. */
    clockSkewReports: { ahead: number; behind: number };
    /** Adds removed from storage because their time to live ran out. */
    expiredDots: number;
    /** The decoded states of keys stored whole kept in memory (decoded-states.ts). */
    stateCache: { entries: number; estimatedBytes: number; hits: number; misses: number };
    /** Deltas appended to the logs of large whole states, and logs folded into a new base. */
    stateLog: { appends: number; compactions: number };
    /** Presence filters of add-wins sets (element-presence.ts): element reads they spared, scans that built them. */
    presence: { filters: number; bytes: number; skipped: number; scans: number };
  } {
    return {
      batches: this.commit.batches,
      writes: this.commit.writes,
      supersededRecords: this.commit.superseded,
      cachedHeaders: this.headers.size,
      busyKeys: this.lock.busy,
      counterJoinsRefused: this.joinsRefused,
      pendingRemoves: this.env.pending.size(),
      pendingRemoveBytes: this.env.pending.bytes(),
      retriesAbsorbed: this.retriesAbsorbed,
      filterRetriesAbsorbed: this.filterRetriesAbsorbed,
      clockSkewReports: { ...this.skewReports },
      expiredDots: this.expiredDots,
      stateCache: { entries: this.env.decoded.size, estimatedBytes: this.env.decoded.estimatedBytes, hits: this.env.decoded.hits, misses: this.env.decoded.misses },
      stateLog: { ...this.env.stateLogCounts },
      presence: this.presence.stats(),
    };
  }

  /**
   * An Add to a filter key answered as a retry of one already applied (its request id was in the
   * key's retry filter): counted in stats().filterRetriesAbsorbed. The replica service runs the
   * filters' operations through update(), which does not know what they answered.
   */
  filterRetryAbsorbed(): void {
    this.filterRetriesAbsorbed++;
  }

  /** LevelDB's estimate of the bytes the replicated objects take on disk (cheap: index lookups); 0 in memory. */
  async approximateDataBytes(): Promise<number> {
    return (await approximateBytes(this.db, Buffer.from([OBJECTS]), Buffer.from([OBJECTS + 1]))) ?? 0;
  }

  // ------------------------------------------------------------ headers

  protected async loadHeader(key: string): Promise<Header | undefined> {
    const cached = this.headers.get(key);
    if (cached !== undefined) return cached;
    const raw = await this.commit.get(headerKey(objectPrefix(this.partitionOf(key), key)));
    if (raw === undefined) return undefined;
    const h = decodeHeader(raw);
    this.cacheHeader(key, h);
    return h;
  }

  protected cacheHeader(key: string, h: Header): void {
    if (this.headers.size >= this.opts.headerCacheSize) {
      // Evict the oldest entry (Map keeps insertion order). Safe: reads fall back to disk/overlay.
      const first = this.headers.keys().next().value;
      if (first !== undefined) this.headers.delete(first);
    }
    this.headers.set(key, h);
  }

  /** Elements of key whose remove waits for adds not yet received here. */
  pendingRemoves(key: string): number {
    return this.env.pending.size(key);
  }

  async typeOf(key: string): Promise<ObjectType | undefined> {
    return (await this.loadHeader(key))?.type;
  }

  /** The --key-types rule that gives the key its type, if one does. */
  keyTypeRule(key: string): KeyTypeRule | undefined {
    return this.opts.keyTypes?.ruleFor(key);
  }

  /** A key created as another type than its --key-types rule gives it is refused (local writes and peers' alike). */
  private checkKeyTypeRule(key: string, type: ObjectType): void {
    const rule = this.keyTypeRule(key);
    if (rule !== undefined && rule.type !== type) throw new TypeMismatchError(key, rule.type, type, rule.text);
  }

  /** The key's type when its header is cached (no read, no await), else undefined: ask typeOf. */
  cachedTypeOf(key: string): ObjectType | undefined {
    return this.headers.get(key)?.type;
  }

  /**
   * Encoded bytes of a key stored whole as it lies on disk (its record, or its base and the log of
   * deltas after it: at most an eighth more than the state); 0 for other keys and missing ones.
   */
  async storedStateBytes(key: string): Promise<number> {
    const h = await this.loadHeader(key);
    return h === undefined ? 0 : stateBytesOf(h);
  }

  /** Type, context, size and (sets) live digest of a key, when known; undefined when the key does not exist. */
  async describe(key: string): Promise<{ type: ObjectType; ctx: CausalContext; size: number; live?: LiveDigest } | undefined> {
    const h = await this.loadHeader(key);
    return h === undefined ? undefined : { type: h.type, ctx: h.ctx.clone(), size: h.size, live: h.live === undefined ? undefined : { ...h.live } };
  }

  /**
   * A key's type, live element count (sets) and state digest, from one header read; undefined
   * when it does not exist. The digest of a set (16 bytes): SHA-256 over its canonical context
   * encoding and its live digest, truncated; equal on two nodes exactly when they hold the same
   * state (short of a hash collision). None for other types, or for a set whose live digest is not
   * known (Store.keyInfo adds the sets stored whole).
   */
  async keyInfo(key: string): Promise<{ type: ObjectType; size: number; stateDigest?: Buffer } | undefined> {
    const h = await this.loadHeader(key);
    if (h === undefined) return undefined;
    const digest =
      h.type !== ObjectType.AWSET || h.live === undefined
        ? undefined
        : createHash("sha256").update(encodeContext(h.ctx)).update(encodeLiveDigest(h.live)).digest().subarray(0, 16);
    return { type: h.type, size: h.size, stateDigest: digest };
  }

  // ------------------------------------------------------------ sequence numbers (Algorithm 2)

  loadSeqs(): Promise<Map<number, number>> {
    return loadSeqs(this.db);
  }

  /** The partitions holding any object record (what a restart must ship before it looks caught up). */
  partitionsHoldingData(): Promise<Set<number>> {
    return partitionsWithObjects(this.db);
  }

  /** Durably record the sequence numbers of these partitions, in one atomic batch. */
  persistSeqs(seqs: ReadonlyMap<number, number>): Promise<void> {
    return persistSeqs(this.commit, seqs);
  }

  // ------------------------------------------------------------ the write path

  /**
   * Run fn under the key's lock on a working copy of the object (header and write view); queue
   * its writes and the header, and resolve after they are durable. fn's result is returned only then.
   */
  /**
   * Observe every durable change of any key: the key, its type, the delta of the change (a local
   * operation's delta, or the new part of a join: what a copy must join to follow) and the key's
   * context right after it (read-only). Called after the change is durable, in the order changes
   * of a key became durable. Returns the unsubscribe function. A listener must not throw or block.
   */
  onChange(listener: ChangeListener): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /**
   * The store's clock (ms): adds with a time to live expire on it, so states that carry them are
   * encoded and decoded with it (remaining TTLs on the wire).
   */
  now(): number {
    return this.opts.clock();
  }

  protected async mutate<T>(
    key: string,
    type: ObjectType,
    fn: (o: ObjectSlot) => Promise<T>,
    opts: { mustExist?: boolean; change?: (result: T) => unknown[] } = {},
  ): Promise<T> {
    try {
      return await this.mutateOnce(key, type, fn, opts);
    } catch (err) {
      // The key's context already holds this replica's last counter (a Merge or a peer brought it
      // there): nothing was changed; mint under a fresh replica id, which starts from 1 everywhere.
      if (!(err instanceof DotSpaceExhaustedError) || err.replica !== this.replicaId) throw err;
      await this.rotateReplicaId();
      return this.mutateOnce(key, type, fn, opts);
    }
  }

  /** Mint under a fresh replica id from now on (recorded durably first). */
  abstract rotateReplicaId(): Promise<string>;

  private async mutateOnce<T>(
    key: string,
    type: ObjectType,
    fn: (o: ObjectSlot) => Promise<T>,
    opts: { mustExist?: boolean; change?: (result: T) => unknown[] },
  ): Promise<T> {
    if (this.closed) throw new StoreClosedError();
    let durable!: Promise<void>;
    let ctxAfter: CausalContext | undefined;
    const result = await this.lock.run(key, async () => {
      const prefix = objectPrefix(this.partitionOf(key), key);
      const existing = await this.loadHeader(key);
      if (existing !== undefined && existing.type !== type) throw new TypeMismatchError(key, existing.type, type);
      const h: Header = existing ?? { type, ctx: new CausalContext(), size: 0, body: layoutFor(type).emptyBody(), live: layoutFor(type).emptyLive?.() };
      // Work on a copy: a failure half-way must not leave the cached header changed.
      const work: Header = { ...h, ctx: h.ctx.clone(), live: h.live === undefined ? undefined : { ...h.live } };
      const filter = this.presenceFilter(key, type, existing);
      const view = new WriteView(this.commit, prefix, h.ctx, filter && { filter, counts: this.presence });
      const out = await fn({ key, prefix, h: work, view });
      const ops = await view.finish();
      if (existing === undefined && opts.mustExist && ops.length === 0) {
        durable = this.commit.written();
        return out;
      }
      // Checked once the key is about to be created (an operation that creates nothing passes).
      if (existing === undefined) this.checkKeyTypeRule(key, type);
      const headerChanged =
        existing === undefined || !work.ctx.equals(h.ctx) || work.size !== h.size || work.body !== h.body || work.log !== h.log || !sameLiveDigest(work.live, h.live);
      if (headerChanged) ops.push({ type: "put", key: headerKey(prefix), value: encodeHeader(work) });
      this.cacheHeader(key, work);
      // The header is never changed in place once cached (the next operation works on a copy).
      ctxAfter = work.ctx;
      // An operation that writes nothing may still rest on writes not yet durable (a retry of a
      // Merge, a Remove of elements whose removal is queued, a frame already joined): it resolves
      // once everything queued before it is, so its answer never acknowledges what a crash loses.
      durable = ops.length === 0 ? this.commit.written() : this.commit.write(ops);
      // After this operation's write is queued: a scan starting now waits for it.
      if (filter === undefined && type === ObjectType.AWSET) this.noteAbsentReads(key, prefix, view.absentReads, work.size);
      return out;
    });
    await durable;
    if (opts.change !== undefined && this.changeListeners.size > 0 && ctxAfter !== undefined) {
      for (const delta of opts.change(result)) for (const l of this.changeListeners) l(key, type, delta, ctxAfter);
    }
    return result;
  }

  /**
   * The set's presence filter, a new empty one when it has no element record (no header, or
   * none live): trusted at once, since every record from now on is written through a view that has it.
   */
  private presenceFilter(key: string, type: ObjectType, existing: Header | undefined) {
    if (type !== ObjectType.AWSET || !this.presence.enabled) return undefined;
    const f = this.presence.get(key);
    if (f !== undefined) return f;
    if (existing === undefined || existing.size === 0) {
      this.absentReads.delete(key);
      return this.presence.startEmpty(key);
    }
    return undefined;
  }

  /**
   * Reads of elements that had no record, on a set with records and no filter: once they add up to
   * a quarter of its size (and at least presenceScanAfterReads), listing its records once costs less
   * than the reads it will spare, so a filter is built by a scan.
   */
  private noteAbsentReads(key: string, prefix: Buffer, n: number, size: number): void {
    if (n === 0 || !this.presence.enabled) return;
    const total = (this.absentReads.get(key) ?? 0) + n;
    if (total < Math.max(this.opts.presenceScanAfterReads, size / 4)) {
      if (this.absentReads.size >= 10_000) this.absentReads.clear();
      this.absentReads.set(key, total);
      return;
    }
    this.absentReads.delete(key);
    // Registered now, under the key's lock: no operation of the key is between its view and its
    // write, and every later view adds what it writes. The records written before are listed once
    // they are in the database.
    const f = this.presence.startScan(key, size);
    if (f === undefined) return;
    void (async () => {
      try {
        await this.commit.written();
        const offset = prefix.length + 1;
        for await (const k of this.db.keys(elementRange(prefix))) {
          if (f.dropped) return;
          f.add(presenceHash(unescapeBytes(k, offset).bytes));
        }
        this.presence.finishScan(f);
      } catch {
        // Closed or failed: that set's elements are read again.
        this.presence.dropFilter(f);
      }
    })();
  }
}

/** The deltas a join made: its new part when it changed something, and the removes it settled. */
export function joined(r: JoinResult<unknown>): unknown[] {
  const out: unknown[] = [];
  if (r.changed) out.push(r.newPart);
  if (r.settled !== undefined) out.push(r.settled.delta);
  return out;
}

/** See Store.onChange. */
export type ChangeListener = (key: string, type: ObjectType, delta: unknown, ctxAfter: CausalContext) => void;
