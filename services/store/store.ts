// Durable storage of replicated objects, decomposed as in Riak's bigset (seed 004): a header per
// object (type, causal context, size, and for small types the whole state) plus, for sets, one
// record per live element and a dot index (layouts.ts says which type lies how). The write path
// (locks, group commit, the change feed) is StoreCore's (store-core.ts); this file holds what is
// done with it: operations, reads, joins and state transfers. Everything type-specific is in the type's lattice
// (crdt/) and its layout: Adds, Removes and Increments are the type's delta mutators run on the
// part of the object they name, and every change, local or remote, goes through the layout's
// join, which is the lattice's join.
import { type AWSet, CausalContext, type Dot, ObjectType, type PNCounter, type RetryRequest, latticeFor } from "../crdt/index.js";
import { StoreClosedError, TypeMismatchError, UnstorableTypeError } from "./errors.js";
import type { ChunkLimits, JoinResult, StateChunk } from "./layout.js";
import { layoutFor } from "./layouts.js";
import { openFailure, openStoreDb, rotateReplicaId } from "./open-store.js";
import { PendingRemoves } from "./pending-removes.js";
import { elementRange, expiryRange, headerKey, objectPrefix, parseExpiryKey } from "./keys.js";
import { expireElements, groupByKey } from "./expiry.js";
import { decodeHeader } from "./records.js";
import { presenceHash } from "./element-presence.js";
import { PartitionKeyScan, partitionKeys, partitionKeysWithPrefix, verifyStored } from "./object-records.js";
import { contains, elementDots, members, page } from "./element-reads.js";
import { SetSnapshot } from "./set-snapshot.js";
import { addElements, incrementCounter, incrementCounterOnce, removeElements } from "./mutations.js";
import { StoreCore, joined } from "./store-core.js";
import { wholeStateChunk } from "./whole-state-layout.js";
import { chunkPayload, wholeDigest } from "./chunk-payload.js";
import type { Header } from "./records.js";

export { STORE_FORMAT, STORE_VERSION } from "./open-store.js";
export { StoreClosedError, StoreOpenError, StoreWriteError, TypeMismatchError, UnstorableTypeError } from "./errors.js";
export type { JoinResult, StateChunk } from "./layout.js";
export { type ChangeListener } from "./store-core.js";

import type { StoreOptions, SyncPolicy } from "./store-options.js";
export type { StoreOptions, SyncPolicy } from "./store-options.js";

export class Store extends StoreCore {
  /** wholeStateDigest's answers, per header version of a key stored whole. */
  private readonly wholeDigests = new WeakMap<Header, Buffer>();
  /** keyInfo's size and reads digest of keys stored whole whose lattice gives one, per header version. */
  private readonly readsInfos = new WeakMap<Header, { size: number; digest: Buffer }>();

  static async open(options: StoreOptions): Promise<Store> {
    const opts = {
      sync: "fsync" as SyncPolicy,
      maxBatch: 256,
      batchStartRecords: 256,
      batchStartOperations: 16,
      headerCacheSize: 50_000,
      stateCacheBytes: 256 * 1024 * 1024,
      presenceFilterBytes: 64 * 1024 * 1024,
      presenceScanAfterReads: 1024,
      stateLogFromBytes: 64 * 1024,
      removeLookupLimit: 4096,
      maxPendingRemoves: 10_000,
      maxRemoveUnseenDots: 1_000_000,
      maxRemoveUnseenReplicas: 4096,
      maxPendingRemoveBytes: 16 * 1024 * 1024,
      writeBufferBytes: 4 * 1024 * 1024,
      cacheBytes: 8 * 1024 * 1024,
      upgrade: true,
      clock: Date.now,
      clockSkewBoundMs: 2000,
      ...options,
    };
    const opened = await openStoreDb(opts);
    try {
      const pending = await PendingRemoves.load(opened.db, {
        maxElements: opts.maxPendingRemoves,
        maxUnseenDots: opts.maxRemoveUnseenDots,
        maxUnseenReplicas: opts.maxRemoveUnseenReplicas,
        maxBytes: opts.maxPendingRemoveBytes,
      });
      return new Store(opened.db, opened.nodeId, opened.replicaId, opened.partitions, opts, pending);
    } catch (err) {
      await opened.db.close();
      throw openFailure(opts.dir, err);
    }
  }

  // ------------------------------------------------------------ local operations (delta mutators)

  /** Add elements with fresh dots (add^δ, joined like any delta); with ttlMs they expire that long from now. */
  add(key: string, elements: Uint8Array[], ttlMs?: number): Promise<{ dots: Dot[]; added: number; delta: AWSet }> {
    const expiresAt = ttlMs === undefined ? undefined : this.env.now() + ttlMs;
    return this.mutate(key, ObjectType.AWSET, (o) => addElements(o, this.env, this.replicaId, elements, expiresAt), { change: (r) => [r.delta] });
  }

  /** Remove elements (remove^δ); unseen observed adds wait as deferred removes (mutations.ts). */
  remove(key: string, elements: Uint8Array[], observed?: CausalContext): Promise<{ removed: number; delta: AWSet; pending: number; unseenDots: number }> {
    return this.mutate(key, ObjectType.AWSET, (o) => removeElements(o, this.env, elements, observed, this.replicaId), { mustExist: true, change: (r) => (r.delta.ctx.isEmpty() ? [] : [r.delta]) });
  }

  /**
   * Garbage-collect expired adds (expiry.ts): at most limit entries of the expiry index due by
   * now. Returns how many dots expired and whether entries due remain (call again).
   */
  async expire(now: number, limit: number): Promise<{ dots: number; more: boolean }> {
    const due: Array<{ k: Buffer; key: string; element: Buffer }> = [];
    for await (const k of this.db.keys({ ...expiryRange(now), limit: limit + 1 })) {
      if (due.length === limit) return { ...(await this.expireDue(due, now)), more: true };
      due.push({ k, ...parseExpiryKey(k) });
    }
    return { ...(await this.expireDue(due, now)), more: false };
  }

  private async expireDue(due: Array<{ k: Buffer; key: string; element: Buffer }>, now: number): Promise<{ dots: number }> {
    let dots = 0;
    for (const [key, elements] of groupByKey(due)) {
      const entries = due.filter((e) => e.key === key).map((e) => ({ type: "del" as const, key: e.k }));
      const h = await this.loadHeader(key);
      if (h === undefined || h.type !== ObjectType.AWSET) {
        await this.commit.write(entries); // the key was deleted (or is another type now)
        continue;
      }
      const delta = await this.mutate(key, ObjectType.AWSET, async (o) => {
        const d = await expireElements(o, elements, now);
        o.view.otherRecords.push(...entries);
        return d;
      }, { change: (d) => (d.ctx.isEmpty() ? [] : [d]) });
      dots += delta.ctx.dotCount();
    }
    this.expiredDots += dots;
    return { dots };
  }

  /** Throws CounterRangeError, naming the key, when the counter would leave int64; nothing changes then. */
  increment(key: string, amount: bigint): Promise<{ value: bigint; dot: Dot; delta: PNCounter }> {
    return this.mutate(key, ObjectType.COUNTER, (o) => incrementCounter(o, this.env, this.replicaId, amount), { change: (r) => [r.delta] });
  }

  /**
   * Increment with a request id, at now (the node's clock, ms): a retry of an increment already
   * in the key's retry filter (applied here or on any node whose delta arrived) is answered with
   * duplicate and the current value, changing nothing; otherwise the id's insert and the increment
   * are one write of the key's record. A duplicate is answered only once every write queued before
   * it is durable, so it never acknowledges an increment a crash could still lose. params: the
   * filter a counter without one gets; explicit: the client named them (RetryFilterConflictError
   * when the key's filter differs). Range errors as increment.
   */
  async incrementOnce(
    key: string,
    amount: bigint,
    retry: RetryRequest,
  ): Promise<{ duplicate: boolean; value: bigint; dot?: Dot; delta?: PNCounter }> {
    // A duplicate writes nothing: mutate resolves it once every write queued before it is durable
    // (and rejects if that write failed).
    const r = await this.mutate(key, ObjectType.COUNTER, (o) => incrementCounterOnce(o, this.env, this.replicaId, amount, retry), { change: (x) => (x.delta === undefined ? [] : [x.delta]) });
    if (r.duplicate) this.retriesAbsorbed++;
    return r;
  }

  /**
   * A client operation on a key of a type stored whole (crdt/operations.ts): fn gets the key's
   * state (⊥ for a new key) and returns the state to store, the delta to spread (none when nothing
   * changed) and its result. Durable before it resolves; nothing is written when fn throws.
   * mustExist: a key that does not exist is not created (fn still runs, on ⊥).
   */
  update<R>(
    key: string,
    type: ObjectType,
    fn: (state: unknown) => { state: unknown; delta?: unknown; result: R },
    opts: { mustExist?: boolean } = {},
  ): Promise<{ delta?: unknown; result: R }> {
    return this.mutate(key, type, async (o) => {
      const layout = layoutFor(type);
      // Element layouts have no write: their operations are the store's own (add, remove).
      if (layout.write === undefined) throw new UnstorableTypeError(type);
      const out = fn(await layout.load(o, this.env, []));
      if (out.delta !== undefined) layout.write(o, this.env, out.state, out.delta);
      return { delta: out.delta, result: out.result };
    }, { ...opts, change: (r) => (r.delta === undefined ? [] : [r.delta]) });
  }

  // ------------------------------------------------------------ reads

  /**
   * The state of a key stored whole, or undefined: without the key's lock when its decoded state
   * is in memory. Shared with the store's cache of decoded states: use it before the next await,
   * never change it.
   */
  async wholeState(key: string): Promise<{ type: ObjectType; state: unknown } | undefined> {
    const h = await this.loadHeader(key);
    if (h === undefined) return undefined;
    const layout = layoutFor(h.type);
    if (layout.cachedState === undefined || layout.sharedState === undefined) return { type: h.type, state: await layout.readState(this.env, Buffer.alloc(0), h) };
    const cached = layout.cachedState(this.env, key, h);
    if (cached !== undefined) return { type: h.type, state: cached };
    return this.lock.run(key, async () => {
      const now = await this.loadHeader(key);
      if (now === undefined) return undefined;
      return { type: now.type, state: await layoutFor(now.type).sharedState!(this.env, key, objectPrefix(this.partitionOf(key), key), now) };
    });
  }

  async contains(key: string, elements: Uint8Array[]): Promise<boolean[]> {
    const h = await this.loadHeader(key);
    if (h === undefined) return elements.map(() => false);
    if (h.type !== ObjectType.AWSET) throw new TypeMismatchError(key, h.type, ObjectType.AWSET);
    return contains(this.commit, objectPrefix(this.partitionOf(key), key), elements, this.env.now(), this.presenceOf(key));
  }

  /** The dots of each element of a set (empty for a non-member), queued writes included. */
  async dotsOf(key: string, elements: Uint8Array[]): Promise<Dot[][]> {
    const h = await this.loadHeader(key);
    if (h === undefined) return elements.map(() => []);
    if (h.type !== ObjectType.AWSET) throw new TypeMismatchError(key, h.type, ObjectType.AWSET);
    return elementDots(this.commit, objectPrefix(this.partitionOf(key), key), elements, this.env.now(), this.presenceOf(key));
  }

  /** The set's presence filter as a test of its elements, when it has a trusted one (element-presence.ts). */
  private presenceOf(key: string): ((el: Uint8Array) => boolean) | undefined {
    const f = this.presence.get(key);
    if (f === undefined || !f.complete) return undefined;
    return (el) => {
      if (f.mayHold(presenceHash(el))) return true;
      this.presence.skipped++;
      return false;
    };
  }

  /** One page of members (and their dots) after startAfter (exclusive), in element order. */
  page(key: string, startAfter: Uint8Array | undefined, limit: number, maxBytes?: number): Promise<{ members: Buffer[]; dots: Dot[][]; next: Buffer | undefined }> {
    return page(this.db, objectPrefix(this.partitionOf(key), key), startAfter, limit, this.env.now(), maxBytes);
  }

  /**
   * A set as the database holds it now (every acknowledged write; a caller that must see writes
   * still queued waits for written() first): its context, size and members from one snapshot
   * (set-snapshot.ts), for reads that answer a context with members. undefined when the key does
   * not exist or is not an AWSET. The caller closes it.
   */
  snapshotOf(key: string): Promise<SetSnapshot | undefined> {
    return SetSnapshot.open(this.db, objectPrefix(this.partitionOf(key), key), this.env.now());
  }

  /** The members of a set in element order, in chunks, from one snapshot; nothing is read ahead of demand. */
  members(key: string, opts: { startAfter?: Uint8Array; chunkSize: number; maxBytes?: number }): AsyncGenerator<Array<{ element: Buffer; dots: Dot[] }>> {
    return members(this.db, objectPrefix(this.partitionOf(key), key), { ...opts, now: this.env.now() });
  }

  async counter(key: string): Promise<PNCounter | undefined> {
    const w = await this.wholeState(key);
    if (w === undefined) return undefined;
    if (w.type !== ObjectType.COUNTER) throw new TypeMismatchError(key, w.type, ObjectType.COUNTER);
    return w.state as PNCounter;
  }

  /** The whole state of a key, in memory (small keys, tests, and whole-state gossip of small keys). */
  async readState(key: string): Promise<{ type: ObjectType; state: unknown } | undefined> {
    return this.lock.run(key, async () => {
      await this.commit.written();
      const h = await this.loadHeader(key);
      if (h === undefined) return undefined;
      return { type: h.type, state: await layoutFor(h.type).readState(this.env, objectPrefix(this.partitionOf(key), key), h) };
    });
  }

  /** Problems of a key's records, in words (empty when consistent), from one snapshot after queued writes land. */
  async verify(key: string): Promise<string[]> {
    await this.commit.written();
    return verifyStored(this.db, objectPrefix(this.partitionOf(key), key));
  }

  // ------------------------------------------------------------ joins (Merge, gossip, state transfers)

  /** Join a state or delta of any stored type into key. */
  async merge(key: string, type: ObjectType, state: unknown): Promise<JoinResult<unknown> & { size: number }> {
    await this.transfers.ended(key);
    return this.mergeNow(key, type, state);
  }

  private mergeNow(key: string, type: ObjectType, state: unknown): Promise<JoinResult<unknown> & { size: number }> {
    return this.mutate(key, type, async (o) => ({ ...(await layoutFor(type).join(o, this.env, state, true)), size: o.h.size }), { change: joined });
  }

  /**
   * Apply one chunk of a peer's full state (gossip/chunk-order.ts): the layout joins only what the
   * chunk's range covers; finishKey completes the key after its last chunk.
   */
  async applyChunk(
    key: string,
    chunk: { type: ObjectType; senderCtx: CausalContext; rangeStart: Buffer; rangeEnd: Buffer; rangeOpen: boolean; slice: unknown },
  ): Promise<JoinResult<unknown>> {
    return this.mutate(
      key,
      chunk.type,
      async (o) => {
        // The layout lists the key's records from the database: every write of the key queued
        // before this one must be in it (none can be queued while this holds the key's lock). Not
        // drain: under a steady stream of writes the queue is never empty, and a chunk would wait
        // for a lull (seconds, measured under one AddStream).
        await this.commit.written();
        return layoutFor(chunk.type).applyChunk(o, this.env, chunk);
      },
      { change: joined },
    );
  }

  /** After a key's last chunk: what the chunks could not join safely (the sender's context). */
  finishKey(key: string, type: ObjectType, senderCtx: CausalContext): Promise<JoinResult<unknown>> {
    return this.mutate(key, type, (o) => layoutFor(type).finishKey(o, this.env, senderCtx), { change: joined });
  }

  /**
   * A chunked transfer of key starts (its first chunk is next): until the returned release is
   * called (after finishKey, or when the stream ends), merges into key wait (transfer-holds.ts).
   */
  beginTransfer(key: string): Promise<() => void> {
    return this.transfers.begin(key);
  }

  // ------------------------------------------------------------ partitions and chunked full state

  /**
   * Remove every record of a key from this node only (the hand-off of a partition this node no
   * longer owns, once its owners acknowledged it): no remove is made or spread, so the copies
   * elsewhere stay. Refused (false) while the key has deferred removes waiting here, which exist
   * nowhere else, while a chunked transfer of it is under way, or when `stillDroppable`, asked
   * under the key's lock after every earlier write is durable, says no. Returns the bytes of the
   * records removed (keys and values), or false.
   */
  async dropLocalCopy(key: string, stillDroppable?: () => boolean): Promise<number | false> {
    if (this.closed) throw new StoreClosedError();
    return this.lock.run(key, async () => {
      if (this.env.pending.has(key)) return false;
      await this.commit.written(); // every queued write of the key is in the database
      // A write that took the lock before this drop is durable now and its change has been told
      // (listeners run as it returns): the caller's condition sees it and may keep the key.
      await new Promise((r) => setImmediate(r));
      if (stillDroppable !== undefined && !stillDroppable()) return false;
      // A chunked transfer of the key is under way: its later chunks would rebuild the key from
      // the middle, and its end would then add the sender's context over entries no longer here
      // (removing the adds of the chunks dropped). Kept; a later run drops it whole.
      if (this.transfers.held(key)) return false;
      const prefix = objectPrefix(this.partitionOf(key), key);
      const ops: Array<{ type: "del"; key: Buffer }> = [];
      let bytes = 0;
      for await (const [k, v] of this.db.iterator({ gte: prefix, lt: Buffer.concat([prefix, Buffer.from([0xff])]) })) {
        ops.push({ type: "del", key: k });
        bytes += k.length + v.length;
      }
      this.headers.delete(key);
      this.env.decoded.drop(key);
      this.presence.drop(key);
      if (ops.length > 0) await this.commit.write(ops);
      return bytes;
    });
  }

  /**
   * Mint under a fresh replica id from now on (recorded durably first): call before dropping the
   * local copy of keys, whose contexts would otherwise no longer say which dots this id used there.
   */
  async rotateReplicaId(): Promise<string> {
    if (this.closed) throw new StoreClosedError();
    this.replicaId = await rotateReplicaId(this.db, "(this store)");
    return this.replicaId;
  }

  /** Keys with deferred removes waiting here. */
  keysWithPendingRemoves(): string[] {
    return this.env.pending.keys();
  }

  /** A key's deferred removes: each element and the dots of the adds it still waits for. */
  pendingRemovesOf(key: string): Array<{ element: Buffer; unseen: CausalContext }> {
    return this.env.pending.of(key);
  }

  /**
   * Durably forget a deferred remove another node has taken over (the hand-off of a partition this
   * node no longer owns); false when it changed meanwhile.
   */
  async forgetPendingRemove(key: string, element: Uint8Array, unseen: CausalContext): Promise<boolean> {
    if (this.closed) throw new StoreClosedError();
    return this.lock.run(key, async () => {
      const ops: Parameters<typeof this.commit.write>[0] = [];
      if (!this.env.pending.forget(key, element, unseen, ops)) return false;
      await this.commit.write(ops);
      return true;
    });
  }

  /** Keys of one partition, in key order. */
  keys(partition: number): AsyncGenerator<string> {
    return partitionKeys(this.db, partition);
  }

  /** A reader of several partitions' keys that skips the empty ones without a seek each (PartitionKeyScan). */
  keyScan(): PartitionKeyScan {
    return new PartitionKeyScan(this.db);
  }

  /** Keys of one partition starting with prefix, in key order, after `after` when given. */
  keysWithPrefix(partition: number, prefix: string, after?: string): AsyncGenerator<string> {
    return partitionKeysWithPrefix(this.db, partition, prefix, after);
  }


  /**
   * keyInfo, with the element count and state digest of the sets stored whole whose lattice gives
   * a reads digest (AWSET_PROB: see Lattice.readsDigest), read once per version of the key's header.
   */
  override async keyInfo(key: string): Promise<{ type: ObjectType; size: number; stateDigest?: Buffer } | undefined> {
    const h = await this.loadHeader(key);
    if (h === undefined || h.type === ObjectType.AWSET || latticeFor(h.type).readsDigest === undefined) return super.keyInfo(key);
    const info = await this.perHeaderVersion(this.readsInfos, key, h, async () => {
      const whole = await this.wholeState(key);
      if (whole === undefined) return undefined;
      const lattice = latticeFor(whole.type);
      return { size: lattice.size?.(whole.state) ?? 0, digest: Buffer.from(lattice.readsDigest!(whole.state)) };
    });
    return info === undefined ? undefined : { type: h.type, size: info.size, stateDigest: info.digest };
  }

  /**
   * A key stored whole: the SHA-256 of its state as sent (chunk-payload.ts), read once per version
   * of its header and then answered from memory (a header object is replaced on every change).
   * Undefined for a set (see describe's live digest) or a missing key.
   */
  async wholeStateDigest(key: string): Promise<Buffer | undefined> {
    const h = await this.loadHeader(key);
    if (h === undefined || h.type === ObjectType.AWSET) return undefined;
    return this.perHeaderVersion(this.wholeDigests, key, h, async () => {
      let digest: Buffer | undefined;
      for await (const c of this.stateChunks(key, { maxEntries: 1, maxBytes: 1 })) digest ??= wholeDigest(chunkPayload(c, this.now()));
      return digest;
    });
  }

  /**
   * What compute reads of the state of key under its header h, from cache when it was computed for
   * that header version, else computed and kept only if no change came between (the header is
   * still h: then what was read is the state of h; every change replaces the header object).
   */
  private async perHeaderVersion<T>(cache: WeakMap<Header, T>, key: string, h: Header, compute: () => Promise<T | undefined>): Promise<T | undefined> {
    const known = cache.get(h);
    if (known !== undefined) return known;
    const value = await compute();
    if (value !== undefined && (await this.loadHeader(key)) === h) cache.set(h, value);
    return value;
  }

  /**
   * Stream a key's full state in chunks within the limits (entries, and bytes of entries), from one
   * snapshot: the first chunk carries the context, each chunk every entry of its range.
   */
  async *stateChunks(key: string, limits: ChunkLimits): AsyncGenerator<StateChunk> {
    // Writes queued before the call are in the snapshot (not drain: a busy store is never idle).
    await this.commit.written();
    const prefix = objectPrefix(this.partitionOf(key), key);
    // One iterator (one snapshot) for the header and the records, so the context sent covers
    // every dot of every entry sent.
    const it = this.db.iterator({ gte: headerKey(prefix), lt: elementRange(prefix).lt });
    let logged: ObjectType | undefined;
    try {
      const first = await it.next();
      if (first === undefined || Buffer.compare(first[0], headerKey(prefix)) !== 0) return;
      const h = decodeHeader(first[1]);
      if (h.log === undefined) {
        yield* layoutFor(h.type).stateChunks(this.env, prefix, h, it, limits);
        return;
      }
      logged = h.type;
    } finally {
      await it.close();
    }
    // A whole state kept as a base and a log (whole-state-layout.ts): its records lie past this
    // snapshot's range; read it and its context together under the key's lock, and encode it there.
    const chunk = await this.lock.run(key, async () => {
      const h = await this.loadHeader(key);
      if (h === undefined || h.type !== logged) return undefined;
      const layout = layoutFor(h.type);
      return wholeStateChunk(h.type, h.ctx, layout.lattice.encode(await layout.sharedState!(this.env, key, prefix, h)));
    });
    if (chunk !== undefined) yield chunk;
  }

}
