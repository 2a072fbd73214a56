// Durable storage of replicated objects on LevelDB (classic-level), decomposed as in Riak's
// bigset (seed 004): a header per object (type, causal context, size) and one record per live
// element (its dots), plus a dot index (dot → element, in buckets of consecutive dots: see
// dot-index.ts) so that a remote remove, which names dots and not elements, costs a point lookup.
// An add or remove touches O(1) records in one atomic batch; membership is a point lookup;
// members stream in element order; no object is limited by a message or value size.
//
// Joins of states and deltas from elsewhere (Merge, gossip, state chunks) go through one path
// (joinSet / joinCounter). Local Add and Remove write their result directly: the same records the
// join of their delta would write (the store property tests compare both with the lattice).
// Operations on one key are serialized (KeyLock); writes of concurrent operations are
// group-committed and acknowledged only once durable (GroupCommit).
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { ClassicLevel } from "classic-level";
import {
  AWSet,
  CausalContext,
  CounterLattice,
  CounterRangeError,
  counterRangeProblems,
  type Dot,
  type DotSet,
  type ElementKey,
  ObjectType,
  PNCounter,
  chunkSliceContext,
  elementKey,
  joinDotSets,
  removedDots,
  sameDot,
} from "../crdt/index.js";
import { GroupCommit } from "./group-commit.js";
import { PendingRemoves } from "./pending-removes.js";
import { KeyLock } from "./key-lock.js";
import { migrateV1ToV2, migrationProgressKey } from "./migrate.js";
import { verifyObject } from "./verify.js";
import { WriteView } from "./write-view.js";
import {
  OBJECTS,
  elementRange,
  elementRecordKey,
  formatKey,
  headerKey,
  objectPrefix,
  objectRange,
  parseObjectKey,
  partitionRange,
  seqKey,
  seqKeyRange,
  unescapeBytes,
} from "./keys.js";
import { type Header, decodeDots, decodeHeader, encodeHeader } from "./records.js";

export const STORE_FORMAT = "deltaset-store";
/** 2: dot index in buckets (dot-index.ts); version 1 had one record per dot. */
export const STORE_VERSION = 2;

export type SyncPolicy = "fsync" | "buffered";

export interface StoreOptions {
  dir: string;
  /** Required node id, or undefined to use the stored one (generated on first open). */
  nodeId?: string;
  /** Partitions of a new directory; "stored" opens an existing directory with its own. */
  partitions: number | "stored";
  partitionOf: (key: string, partitions: number) => number;
  /** fsync each group commit (default) or leave it to the OS (survives process crashes only). */
  sync?: SyncPolicy;
  /** Most operations folded into one group commit. */
  maxBatch?: number;
  /** Headers kept in memory. */
  headerCacheSize?: number;
  /** LevelDB write buffer (memtable) bytes; LevelDB's default 4 MiB when unset. */
  writeBufferBytes?: number;
  /** LevelDB block cache bytes; LevelDB's default 8 MiB when unset. */
  cacheBytes?: number;
  /** Told when Store.open upgraded an older on-disk format (objects converted, time taken). */
  onUpgrade?: (e: { objects: number; ms: number }) => void;
  /** Told before an upgrade starts (from which version), so a long one can be announced. */
  onUpgradeStart?: (e: { fromVersion: number; toVersion: number }) => void;
  /** false: refuse a directory of an older format instead of upgrading it (read-only tools). */
  upgrade?: boolean;
  /** Above this many removed dots in one delta, find them by scanning the object instead. */
  removeLookupLimit?: number;
  /** Most elements whose remove waits for adds not yet received here (pending-removes.ts). */
  maxPendingRemoves?: number;
  /** Told when a counter join was refused because its result would leave int64 (see joinCounter). */
  onCounterJoinRefused?: (e: { key: string; reason: string }) => void;
}

export class StoreOpenError extends Error {
  override readonly name = "StoreOpenError";
}

/** An operation came after close() (the node is shutting down). */
export class StoreClosedError extends Error {
  override readonly name = "StoreClosedError";
  constructor() {
    super("store is closed");
  }
}

/** The key holds another type than the operation needs. */
export class TypeMismatchError extends Error {
  override readonly name = "TypeMismatchError";
  constructor(
    readonly key: string,
    readonly existing: ObjectType,
    readonly requested: ObjectType,
  ) {
    super(
      `key "${key}" holds a ${ObjectType[existing] ?? existing}, not a ${ObjectType[requested] ?? requested}; ` +
        `use another key or the matching operation`,
    );
  }
}

export interface JoinResult<S> {
  changed: boolean;
  /** The part of the joined state that was new here (Δ(incoming, local)), for redundancy removal. */
  newPart: S;
  /** Set when the join was refused and nothing changed: why, in words (counters out of int64). */
  refused?: string;
  /**
   * A remove delta this node made during the join by applying deferred removes whose covered adds
   * just arrived (pending-removes.ts). Spread it as a local delta: this node is its origin.
   */
  settled?: AWSet;
}

export interface StateChunk {
  type: ObjectType;
  /** The key's context: on the first chunk of the key only. */
  ctx?: CausalContext;
  rangeStart: Buffer;
  rangeEnd: Buffer;
  rangeOpen: boolean;
  /** Entries in the range (for sets); the whole state for counters. */
  slice: AWSet | PNCounter;
  keyDone: boolean;
}

interface StoreMeta {
  format: string;
  version: number;
  /** Set while an upgrade from this version runs (an older node then refuses the directory). */
  migratingFrom?: number;
  nodeId: string;
  /** Replica id that mints this data directory's dots (see Store.replicaId). */
  replicaId: string;
  partitions: number;
  createdAt: string;
}

export class Store {
  private readonly lock = new KeyLock();
  private readonly commit: GroupCommit;
  private readonly headers = new Map<string, Header>();
  private closed = false;
  private counterJoinsRefused = 0;
  /** Keys with a chunked transfer in progress (beginTransfer). */
  private readonly transfers = new Map<string, { ended: Promise<void> }>();

  private constructor(
    private readonly db: ClassicLevel<Buffer, Buffer>,
    readonly nodeId: string,
    /**
     * The id this store mints dots under: the node id plus a suffix drawn when the data directory
     * is created. A node that loses its disk and comes back under the same node id (a pod with a
     * new volume) then mints fresh dots instead of reusing counters its peers have already seen,
     * which would make them treat its new writes as already known and drop them.
     */
    readonly replicaId: string,
    readonly partitions: number,
    private readonly opts: Required<Omit<StoreOptions, "nodeId" | "onUpgrade" | "onUpgradeStart" | "partitions" | "onCounterJoinRefused">> &
      Pick<StoreOptions, "onCounterJoinRefused">,
    /** Removes waiting for adds not yet received here (pending-removes.ts). */
    private readonly pending: PendingRemoves,
  ) {
    this.commit = new GroupCommit(db, { sync: opts.sync === "fsync", maxBatch: opts.maxBatch, syncReadMax: 8 });
  }

  static async open(options: StoreOptions): Promise<Store> {
    const opts = {
      sync: "fsync" as SyncPolicy,
      maxBatch: 256,
      headerCacheSize: 50_000,
      removeLookupLimit: 4096,
      maxPendingRemoves: 10_000,
      writeBufferBytes: 4 * 1024 * 1024,
      cacheBytes: 8 * 1024 * 1024,
      upgrade: true,
      ...options,
    };
    // lost+found: a fresh filesystem volume mounted as the data directory is still empty.
    const fresh = !existsSync(opts.dir) || readdirSync(opts.dir).every((f) => f === "lost+found");
    if (fresh && opts.partitions === "stored") {
      throw new StoreOpenError(`data directory ${opts.dir} does not exist or is empty`);
    }
    if (!fresh && !existsSync(`${opts.dir}/CURRENT`)) {
      throw new StoreOpenError(
        `data directory ${opts.dir} is not empty and is not a deltaset store (no LevelDB CURRENT file); ` +
          `point --data-dir at an empty or existing deltaset directory`,
      );
    }
    const db = new ClassicLevel<Buffer, Buffer>(opts.dir, {
      keyEncoding: "buffer",
      valueEncoding: "buffer",
      writeBufferSize: opts.writeBufferBytes,
      cacheSize: opts.cacheBytes,
    });
    try {
      await db.open();
    } catch (err) {
      const cause = (err as { cause?: Error }).cause?.message ?? (err as Error).message;
      throw new StoreOpenError(`cannot open data directory ${opts.dir}: ${cause}`);
    }
    try {
      const meta = await readMeta(db, opts.dir);
      let nodeId: string;
      let replicaId: string;
      let partitions: number;
      if (meta === undefined) {
        if (!fresh) {
          throw new StoreOpenError(`data directory ${opts.dir} holds a LevelDB database that deltaset did not create`);
        }
        nodeId = opts.nodeId ?? `n-${randomBytes(6).toString("hex")}`;
        replicaId = `${nodeId}~${randomBytes(4).toString("hex")}`;
        const record: StoreMeta = {
          format: STORE_FORMAT,
          version: STORE_VERSION,
          nodeId,
          replicaId,
          partitions: opts.partitions as number,
          createdAt: new Date().toISOString(),
        };
        await db.put(formatKey(), Buffer.from(JSON.stringify(record)), { sync: true });
        partitions = record.partitions;
      } else {
        if (opts.nodeId !== undefined && opts.nodeId !== meta.nodeId) {
          throw new StoreOpenError(
            `data directory ${opts.dir} belongs to node "${meta.nodeId}", not "${opts.nodeId}"; ` +
              `use that node id or another data directory`,
          );
        }
        if (opts.partitions !== "stored" && meta.partitions !== opts.partitions) {
          throw new StoreOpenError(
            `data directory ${opts.dir} was created with ${meta.partitions} partitions, not ${opts.partitions}`,
          );
        }
        nodeId = meta.nodeId;
        replicaId = meta.replicaId;
        partitions = meta.partitions;
        if (meta.version === 1 || meta.migratingFrom === 1) {
          if (opts.upgrade === false) {
            throw new StoreOpenError(
              `data directory ${opts.dir} has store version 1; a node of this version upgrades it in place when it starts`,
            );
          }
          opts.onUpgradeStart?.({ fromVersion: 1, toVersion: STORE_VERSION });
          await upgradeFromV1(db, meta, opts.onUpgrade);
        }
      }
      return new Store(db, nodeId, replicaId, partitions, opts, await PendingRemoves.load(db, opts.maxPendingRemoves));
    } catch (err) {
      await db.close();
      throw err;
    }
  }

  partitionOf(key: string): number {
    return this.opts.partitionOf(key, this.partitions);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.commit.drain();
    await this.db.close();
  }

  /** Wait until every queued write is durable. */
  flush(): Promise<void> {
    return this.commit.drain();
  }

  stats(): { batches: number; writes: number; cachedHeaders: number; busyKeys: number; counterJoinsRefused: number; pendingRemoves: number } {
    return {
      batches: this.commit.batches,
      writes: this.commit.writes,
      cachedHeaders: this.headers.size,
      busyKeys: this.lock.busy,
      counterJoinsRefused: this.counterJoinsRefused,
      pendingRemoves: this.pending.size(),
    };
  }

  /** LevelDB's estimate of the bytes the replicated objects take on disk (cheap: index lookups). */
  approximateDataBytes(): Promise<number> {
    return this.db.approximateSize(Buffer.from([OBJECTS]), Buffer.from([OBJECTS + 1]));
  }

  // ------------------------------------------------------------ headers

  private async loadHeader(key: string): Promise<Header | undefined> {
    const cached = this.headers.get(key);
    if (cached !== undefined) return cached;
    const raw = await this.commit.get(headerKey(objectPrefix(this.partitionOf(key), key)));
    if (raw === undefined) return undefined;
    const h = decodeHeader(raw);
    this.cacheHeader(key, h);
    return h;
  }

  private cacheHeader(key: string, h: Header): void {
    if (this.headers.size >= this.opts.headerCacheSize) {
      // Evict the oldest entry (Map keeps insertion order). Safe: reads fall back to disk/overlay.
      const first = this.headers.keys().next().value;
      if (first !== undefined) this.headers.delete(first);
    }
    this.headers.set(key, h);
  }

  private async headerFor(key: string, type: ObjectType): Promise<Header> {
    const h = await this.loadHeader(key);
    if (h !== undefined) {
      if (h.type !== type) throw new TypeMismatchError(key, h.type, type);
      return h;
    }
    const created: Header = {
      type,
      ctx: new CausalContext(),
      size: 0,
      body: type === ObjectType.COUNTER ? CounterLattice.encode(PNCounter.bottom()) : new Uint8Array(),
    };
    return created;
  }

  /** Elements of key whose remove waits for adds not yet received here. */
  pendingRemoves(key: string): number {
    return this.pending.size(key);
  }

  async typeOf(key: string): Promise<ObjectType | undefined> {
    return (await this.loadHeader(key))?.type;
  }

  /** Type, context and size of a key (undefined when the key does not exist). */
  async describe(key: string): Promise<{ type: ObjectType; ctx: CausalContext; size: number } | undefined> {
    const h = await this.loadHeader(key);
    return h === undefined ? undefined : { type: h.type, ctx: h.ctx.clone(), size: h.size };
  }

  // ------------------------------------------------------------ sets

  /**
   * Add elements with fresh dots. The same result as joining the add delta (AWSet.add) through
   * joinSet, computed directly: every element ends with exactly its new dot, the context gains the
   * new dots (the old ones are in it already), and the delta's context carries the old dots so
   * that replicas receiving it drop them.
   */
  async add(key: string, elements: Uint8Array[]): Promise<{ dots: Dot[]; added: number; delta: AWSet }> {
    return this.mutate(key, async (_prefix, h, view) => {
      const eks = await view.loadBytes(elements);
      const entries = new Map<ElementKey, DotSet>();
      const ctx = new CausalContext();
      const dots: Dot[] = new Array(elements.length);
      const first = h.ctx.max(this.replicaId) + 1;
      let next = first - 1;
      let added = 0;
      for (let i = 0; i < eks.length; i++) {
        const ek = eks[i]!;
        const existing = entries.get(ek);
        if (existing !== undefined) {
          dots[i] = existing[0]!;
          continue;
        }
        const d: Dot = { replica: this.replicaId, counter: ++next };
        const old = view.loadedDots(ek);
        if (old.length === 0) added++;
        else for (const o of old) ctx.addDot(o);
        const mine = [d];
        entries.set(ek, mine);
        view.setDots(ek, mine, h);
        dots[i] = d;
      }
      ctx.addRange(this.replicaId, first, next);
      h.ctx.addRange(this.replicaId, first, next);
      return { dots, added, delta: AWSet.fromParts(entries, ctx) };
    });
  }

  /**
   * Remove elements: the dots of each (only those observed, when a context is given). The same
   * result as joining the remove delta through joinSet, whose context names only dots the object
   * holds, so the object's context does not change. The dots of the observed context this node
   * has not received yet (unseen) are kept as a deferred remove of each element, applied when
   * they arrive (pending-removes.ts); PendingRemovesFullError, with nothing changed, past the limit.
   */
  async remove(
    key: string,
    elements: Uint8Array[],
    observed?: CausalContext,
  ): Promise<{ removed: number; delta: AWSet; pending: number; unseenDots: number }> {
    return this.mutate(key, async (_prefix, h, view) => {
      const eks = await view.loadBytes(elements);
      const ctx = new CausalContext();
      let removed = 0;
      const seen = new Set<ElementKey>();
      for (const ek of eks) {
        if (seen.has(ek)) continue;
        seen.add(ek);
        const dots = view.loadedDots(ek);
        if (dots.length === 0) continue;
        const hit = observed === undefined ? dots : dots.filter((d) => observed.containsDot(d));
        if (hit.length === 0) continue;
        if (hit.length === dots.length) removed++;
        for (const d of hit) ctx.addDot(d);
        view.setDots(ek, hit.length === dots.length ? [] : dots.filter((d) => !hit.includes(d)), h);
      }
      const unseen = observed === undefined ? undefined : observed.subtract(h.ctx);
      if (unseen === undefined || unseen.isEmpty()) return { removed, delta: AWSet.fromParts(new Map(), ctx), pending: 0, unseenDots: 0 };
      const targets = [...seen];
      this.pending.checkRoom(key, targets);
      for (const ek of targets) this.pending.defer(key, ek, unseen, view.otherRecords);
      return { removed, delta: AWSet.fromParts(new Map(), ctx), pending: targets.length, unseenDots: unseen.dotCount() };
    }, { mustExist: true });
  }

  async contains(key: string, elements: Uint8Array[]): Promise<boolean[]> {
    const h = await this.loadHeader(key);
    if (h === undefined) return elements.map(() => false);
    if (h.type !== ObjectType.AWSET) throw new TypeMismatchError(key, h.type, ObjectType.AWSET);
    const prefix = objectPrefix(this.partitionOf(key), key);
    // One batched read (a few keys are read synchronously, many on the thread pool).
    const found = await this.commit.getMany(elements.map((el) => elementRecordKey(prefix, el)));
    return found.map((v) => v !== undefined);
  }

  /** One page of members after startAfter (exclusive), in element order. */
  async page(
    key: string,
    startAfter: Uint8Array | undefined,
    limit: number,
  ): Promise<{ members: Buffer[]; next: Buffer | undefined }> {
    const members: Buffer[] = [];
    for await (const chunk of this.members(key, { startAfter, chunkSize: limit + 1 })) {
      members.push(...chunk.map((e) => e.element));
      if (members.length > limit) break;
    }
    const more = members.length > limit;
    const page = members.slice(0, limit);
    return { members: page, next: more ? page[page.length - 1] : undefined };
  }

  /**
   * Stream the members of a set in element order, in chunks, from one consistent snapshot
   * (committed writes only). The consumer pulls: nothing is read ahead of demand.
   */
  async *members(
    key: string,
    opts: { startAfter?: Uint8Array; chunkSize: number },
  ): AsyncGenerator<Array<{ element: Buffer; dots: Dot[] }>> {
    const prefix = objectPrefix(this.partitionOf(key), key);
    const range = elementRange(prefix);
    const gt = opts.startAfter !== undefined && opts.startAfter.length > 0 ? elementRecordKey(prefix, opts.startAfter) : undefined;
    const it = this.db.iterator(gt !== undefined ? { gt, lt: range.lt } : range);
    try {
      let chunk: Array<{ element: Buffer; dots: Dot[] }> = [];
      const elementOffset = prefix.length + 1;
      while (true) {
        const entries = await it.nextv(Math.max(1, opts.chunkSize - chunk.length));
        if (entries.length === 0) break;
        for (const [k, v] of entries) {
          chunk.push({ element: unescapeBytes(k, elementOffset).bytes, dots: decodeDots(v) });
        }
        if (chunk.length >= opts.chunkSize) {
          yield chunk;
          chunk = [];
        }
      }
      if (chunk.length > 0) yield chunk;
    } finally {
      await it.close();
    }
  }

  // ------------------------------------------------------------ counters

  /** Throws CounterRangeError, naming the key, when the counter would leave int64; nothing changes then. */
  async increment(key: string, amount: bigint): Promise<{ value: bigint; dot: Dot; delta: PNCounter }> {
    return this.mutate(key, async (_prefix, h) => {
      const state = CounterLattice.decode(h.body);
      let delta: PNCounter;
      try {
        delta = state.incrementDelta(this.replicaId, amount);
      } catch (err) {
        if (err instanceof CounterRangeError) throw new CounterRangeError(`counter "${key}": ${err.message}; nothing was changed`);
        throw err;
      }
      CounterLattice.joinInPlace(state, delta);
      h.body = CounterLattice.encode(state);
      h.ctx = state.ctx.clone();
      return { value: state.value(), dot: [...delta.entries.values()][0]!.dot, delta };
    }, { type: ObjectType.COUNTER });
  }

  async counter(key: string): Promise<PNCounter | undefined> {
    const h = await this.loadHeader(key);
    if (h === undefined) return undefined;
    if (h.type !== ObjectType.COUNTER) throw new TypeMismatchError(key, h.type, ObjectType.COUNTER);
    return CounterLattice.decode(h.body);
  }

  // ------------------------------------------------------------ joins (Merge and gossip)

  /** Join a state or delta of any registered type into key. */
  async merge(key: string, type: ObjectType, state: AWSet | PNCounter): Promise<JoinResult<AWSet | PNCounter> & { size: number }> {
    await this.transferEnded(key);
    return this.mergeNow(key, type, state);
  }

  /** merge without waiting for a transfer of the key (the transfer's own counter chunks). */
  private async mergeNow(key: string, type: ObjectType, state: AWSet | PNCounter): Promise<JoinResult<AWSet | PNCounter> & { size: number }> {
    return this.mutate(key, async (prefix, h, view) => {
      if (type === ObjectType.COUNTER) {
        const r = this.joinCounter(key, h, state as PNCounter);
        return { ...r, size: 0 };
      }
      const r = await this.joinSet(key, prefix, h, state as AWSet, view);
      return { ...r, size: h.size };
    }, { type });
  }

  /** The whole state of a key, in memory (small keys, tests, and whole-state gossip of small keys). */
  async readState(key: string): Promise<{ type: ObjectType; state: AWSet | PNCounter } | undefined> {
    return this.lock.run(key, async () => {
      await this.commit.drain();
      const h = await this.loadHeader(key);
      if (h === undefined) return undefined;
      if (h.type === ObjectType.COUNTER) return { type: h.type, state: CounterLattice.decode(h.body) };
      const entries = new Map<ElementKey, DotSet>();
      for await (const chunk of this.members(key, { chunkSize: 1024 })) {
        for (const e of chunk) entries.set(elementKey(e.element), e.dots);
      }
      return { type: h.type, state: AWSet.fromParts(entries, h.ctx.clone()) };
    });
  }

  /**
   * Check that a set's records agree with each other (element records, dot index, header); the
   * problems found, in words, or an empty list. Reads one snapshot after queued writes land.
   */
  async verify(key: string): Promise<string[]> {
    await this.commit.drain();
    const prefix = objectPrefix(this.partitionOf(key), key);
    const it = this.db.iterator(objectRange(prefix));
    try {
      const first = await it.next();
      if (first === undefined) return [];
      if (Buffer.compare(first[0], headerKey(prefix)) !== 0) return ["records without a header"];
      const h = decodeHeader(first[1]);
      if (h.type === ObjectType.COUNTER) return counterRangeProblems(CounterLattice.decode(h.body));
      if (h.type !== ObjectType.AWSET) return [];
      const at = prefix.length;
      async function* records(): AsyncGenerator<[number, Buffer, Buffer]> {
        for (;;) {
          const next = await it.next();
          if (next === undefined) return;
          yield [next[0][at]!, next[0].subarray(at + 1), next[1]];
        }
      }
      return await verifyObject({ size: h.size, ctx: h.ctx, records: records() });
    } finally {
      await it.close();
    }
  }

  // ------------------------------------------------------------ partitions and chunked full state

  /** Keys of one partition, in key order. */
  async *keys(partition: number): AsyncGenerator<string> {
    const range = partitionRange(partition);
    let gte = range.gte;
    while (true) {
      // Find the next header record; then jump past the whole object.
      const it = this.db.keys({ gte, lt: range.lt, limit: 1 });
      const k = (await it.all())[0];
      if (k === undefined) return;
      const parsed = parseObjectKey(k);
      yield parsed.key;
      gte = Buffer.concat([objectPrefix(partition, parsed.key), Buffer.from([0xff])]);
    }
  }

  /**
   * Stream a key's full state in chunks of at most maxEntries elements, from one snapshot. The
   * first chunk carries the context; each chunk carries every element of its range.
   */
  async *stateChunks(key: string, maxEntries: number): AsyncGenerator<StateChunk> {
    await this.commit.drain();
    const prefix = objectPrefix(this.partitionOf(key), key);
    // One iterator (one snapshot) for the header and the elements, so the context sent covers
    // every dot of every element sent.
    const range = elementRange(prefix);
    const it = this.db.iterator({ gte: headerKey(prefix), lt: range.lt });
    try {
      const first = await it.next();
      if (first === undefined || Buffer.compare(first[0], headerKey(prefix)) !== 0) return;
      const h = decodeHeader(first[1]);
      if (h.type === ObjectType.COUNTER) {
        yield {
          type: h.type,
          ctx: h.ctx,
          rangeStart: Buffer.alloc(0),
          rangeEnd: Buffer.alloc(0),
          rangeOpen: true,
          slice: CounterLattice.decode(h.body),
          keyDone: true,
        };
        return;
      }
      const offset = prefix.length + 1;
      let start: Buffer = Buffer.alloc(0);
      let firstChunk = true;
      while (true) {
        // nextv may return fewer entries than asked before the end (classic-level bounds each
        // read by bytes): only an empty read means the end. Treating a short read as the end
        // would mark this chunk's range open and make the receiver drop every later element.
        const batch: Array<[Buffer, Buffer]> = [];
        let ended = false;
        while (batch.length < maxEntries) {
          const more = await it.nextv(maxEntries - batch.length);
          if (more.length === 0) {
            ended = true;
            break;
          }
          batch.push(...more);
        }
        const entries = new Map<ElementKey, DotSet>();
        let last: Buffer = start;
        for (const [k, v] of batch) {
          last = unescapeBytes(k, offset).bytes;
          entries.set(elementKey(last), decodeDots(v));
        }
        const done = ended;
        yield {
          type: h.type,
          ctx: firstChunk ? h.ctx : undefined,
          rangeStart: start,
          rangeEnd: last,
          rangeOpen: done,
          slice: AWSet.fromParts(entries, new CausalContext()),
          keyDone: done,
        };
        if (done) return;
        firstChunk = false;
        // The next range starts just after the last element sent: last + 0x00 is its successor.
        start = Buffer.concat([last, Buffer.from([0])]);
      }
    } finally {
      await it.close();
    }
  }

  /**
   * Apply one chunk of a peer's full state: join only the elements inside the chunk's range, using
   * the sender's context to drop what it removed, and add the chunk's dots to our context one by
   * one. The sender's whole context is folded in by finishKey, after the key's last chunk, so a
   * stream cut in the middle never lets a context cover elements that did not arrive.
   */
  async applyChunk(
    key: string,
    chunk: { type: ObjectType; senderCtx: CausalContext; rangeStart: Buffer; rangeEnd: Buffer; rangeOpen: boolean; slice: AWSet | PNCounter },
  ): Promise<JoinResult<AWSet | PNCounter>> {
    if (chunk.type === ObjectType.COUNTER) {
      // Counters travel whole: a single chunk is a complete state.
      return this.mergeNow(key, chunk.type, chunk.slice);
    }
    await this.commit.drain();
    return this.mutate(key, async (prefix, h, view) => {
      const slice = chunk.slice as AWSet;
      // The receiver's elements inside the chunk's range: those the chunk carries, and those it
      // lacks (listed from LevelDB, then read through the write view with any queued writes).
      const range = elementRange(prefix);
      const gte = chunk.rangeStart.length > 0 ? elementRecordKey(prefix, chunk.rangeStart) : range.gte;
      const bounds = chunk.rangeOpen ? { gte, lt: range.lt } : { gte, lte: elementRecordKey(prefix, chunk.rangeEnd) };
      const offset = prefix.length + 1;
      const inRange = [...slice.entries.keys()];
      for await (const k of this.db.keys(bounds)) {
        const ek = elementKey(unescapeBytes(k, offset).bytes);
        if (!slice.entries.has(ek)) inRange.push(ek);
      }
      await view.prefetch(inRange);
      const sliceCtx = chunkSliceContext(slice.entries.values(), inRange.map((ek) => view.loadedDots(ek)), chunk.senderCtx);
      return this.joinSet(key, prefix, h, AWSet.fromParts(slice.entries, sliceCtx), view);
    }, { type: chunk.type });
  }

  /**
   * A chunked transfer of key starts (its first chunk is next): until the returned release is
   * called (after finishKey, or when the stream ends), merges into key wait. A dot a merge brought
   * into a range already applied would otherwise survive finishKey even when the sender had
   * removed it (gossip/chunking.ts). Transfers of one key from two senders run one after the other.
   */
  async beginTransfer(key: string): Promise<() => void> {
    // The check and the taking of the hold run with no await between them: two callers waiting on
    // the same transfer cannot both take the next one.
    while (this.transfers.has(key)) await this.transfers.get(key)!.ended;
    let release!: () => void;
    const ended = new Promise<void>((r) => (release = r));
    const hold = { ended };
    this.transfers.set(key, hold);
    return () => {
      if (this.transfers.get(key) === hold) this.transfers.delete(key);
      release();
    };
  }

  private async transferEnded(key: string): Promise<void> {
    while (this.transfers.has(key)) await this.transfers.get(key)!.ended;
  }

  /** After a key's last chunk: fold the sender's whole context in. */
  async finishKey(key: string, type: ObjectType, senderCtx: CausalContext): Promise<JoinResult<AWSet | PNCounter>> {
    if (type === ObjectType.COUNTER) return { changed: false, newPart: PNCounter.bottom() };
    return this.mutate(key, async (_prefix, h, view) => {
      const fresh = senderCtx.subtract(h.ctx);
      if (!fresh.isEmpty()) h.ctx.joinInPlace(fresh);
      const settled = await this.settlePending(key, h, view);
      return { changed: !fresh.isEmpty(), newPart: AWSet.fromParts(new Map(), fresh), settled };
    }, { type });
  }

  // ------------------------------------------------------------ sequence numbers (Algorithm 2)

  async loadSeqs(): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    for await (const [k, v] of this.db.iterator(seqKeyRange())) {
      out.set(k.readUInt32BE(2), Number(v.readBigUInt64BE(0)));
    }
    return out;
  }

  /** Durably record the sequence numbers of these partitions, in one atomic batch. */
  async persistSeqs(seqs: ReadonlyMap<number, number>): Promise<void> {
    const ops = [...seqs].map(([partition, value]) => {
      const v = Buffer.alloc(8);
      v.writeBigUInt64BE(BigInt(value));
      return { type: "put" as const, key: seqKey(partition), value: v };
    });
    if (ops.length > 0) await this.commit.write(ops);
  }

  // ------------------------------------------------------------ internals

  /**
   * Run fn under the key's lock with a write view; queue its writes and the header, and resolve
   * after they are durable. fn's result is returned only then.
   */
  private async mutate<T>(
    key: string,
    fn: (prefix: Buffer, h: Header, view: WriteView) => Promise<T>,
    opts: { type?: ObjectType; mustExist?: boolean } = {},
  ): Promise<T> {
    if (this.closed) throw new StoreClosedError();
    let durable!: Promise<void>;
    const result = await this.lock.run(key, async () => {
      const prefix = objectPrefix(this.partitionOf(key), key);
      const type = opts.type ?? ObjectType.AWSET;
      const existing = await this.loadHeader(key);
      const h = await this.headerFor(key, type);
      // Work on a copy: a failure half-way must not leave the cached header changed.
      const work: Header = { ...h, ctx: h.ctx.clone() };
      const view = new WriteView(this.commit, prefix, h.ctx);
      const out = await fn(prefix, work, view);
      const ops = await view.finish();
      const headerChanged =
        existing === undefined || !work.ctx.equals(h.ctx) || work.size !== h.size || work.body !== h.body;
      if (existing === undefined && opts.mustExist && ops.length === 0) {
        durable = Promise.resolve();
        return out;
      }
      if (headerChanged) ops.push({ type: "put", key: headerKey(prefix), value: encodeHeader(work) });
      this.cacheHeader(key, work);
      durable = this.commit.write(ops);
      return out;
    });
    await durable;
    return result;
  }

  /**
   * Join a counter state or delta. A join that would take an in-range counter out of int64 is
   * refused for this key (nothing changes; counted and reported): the lattice has no bound, but a
   * value no response can carry would make the key unreadable on every node it reaches. Such
   * replicas then keep differing on this key until decrements bring the sum back into range.
   */
  private joinCounter(key: string, h: Header, incoming: PNCounter): JoinResult<PNCounter> {
    const state = CounterLattice.decode(h.body);
    const joined = CounterLattice.join(state, incoming);
    const problems = counterRangeProblems(joined);
    if (problems.length > 0 && counterRangeProblems(state).length === 0) {
      this.counterJoinsRefused++;
      const reason = `joining this state into counter "${key}" would make it unreadable: ${problems.join("; ")}`;
      this.opts.onCounterJoinRefused?.({ key, reason });
      return { changed: false, newPart: PNCounter.bottom(), refused: reason };
    }
    const newPart = CounterLattice.difference(incoming, state);
    const changed = CounterLattice.joinInPlace(state, incoming);
    if (changed) {
      h.body = CounterLattice.encode(state);
      h.ctx = state.ctx.clone();
    }
    return { changed, newPart };
  }

  /**
   * Apply the deferred removes of key that the join just made applicable (pending-removes.ts):
   * their dots leave the element. Returns the remove delta this node thereby made (undefined
   * when none): the caller spreads it as a local delta, this node being its origin (so BP does
   * not hold it back from the node whose add it removes).
   */
  private async settlePending(key: string, h: Header, view: WriteView): Promise<AWSet | undefined> {
    if (!this.pending.has(key)) return undefined;
    const hits = await this.pending.settle(key, (ek) => view.dots(ek), h.ctx, view.otherRecords);
    if (hits.size === 0) return undefined;
    const removed = new CausalContext();
    for (const [ek, dots] of hits) {
      const mine = await view.dots(ek);
      view.setDots(ek, mine.filter((d) => !dots.some((x) => sameDot(x, d))), h);
      for (const d of dots) removed.addDot(d);
    }
    return AWSet.fromParts(new Map(), removed);
  }

  /** The AWSet join of a delta or state into the stored object (see AWSet.joinInPlace), then its deferred removes. */
  private async joinSet(key: string, prefix: Buffer, h: Header, delta: AWSet, view: WriteView): Promise<JoinResult<AWSet>> {
    await view.prefetch([...delta.entries.keys()]);
    const newEntries = new Map<ElementKey, DotSet>();
    const newCtx = delta.ctx.subtract(h.ctx);
    let changed = !newCtx.isEmpty();
    for (const [ek, theirs] of delta.entries) {
      if (await joinElement(view, h, ek, theirs, delta.ctx, newEntries, newCtx)) changed = true;
    }
    // Dots the delta's context removes, held under elements the delta does not carry.
    const removed = removedDots(delta);
    if (!removed.isEmpty()) {
      const hits = await this.findDots(prefix, removed, view);
      for (const [ek, dots] of hits) {
        if (delta.entries.has(ek)) continue;
        const mine = await view.dots(ek);
        const kept = mine.filter((d) => !dots.some((x) => sameDot(x, d)));
        if (kept.length !== mine.length) {
          for (const d of dots) newCtx.addDot(d);
          view.setDots(ek, kept, h);
          changed = true;
        }
      }
    }
    h.ctx.joinInPlace(delta.ctx);
    const settled = await this.settlePending(key, h, view);
    return { changed, newPart: AWSet.fromParts(newEntries, newCtx), settled };
  }

  /** Live dots of the object that the context covers, grouped by element. */
  private async findDots(prefix: Buffer, c: CausalContext, view: WriteView): Promise<Map<ElementKey, Dot[]>> {
    const out = new Map<ElementKey, Dot[]>();
    const push = (ek: ElementKey, d: Dot) => {
      const list = out.get(ek);
      if (list === undefined) out.set(ek, [d]);
      else list.push(d);
    };
    // First the elements this operation has read already (all of them, for a state chunk): the
    // dots they hold are theirs without a lookup.
    const found = new CausalContext();
    for (const [ek, dots] of view.loadedElements()) {
      for (const d of dots) {
        if (c.containsDot(d)) {
          push(ek, d);
          found.addDot(d);
        }
      }
    }
    const rest = found.isEmpty() ? c : c.subtract(found);
    if (rest.dotCount() <= this.opts.removeLookupLimit) {
      await view.loadOwners(rest.dots());
      for (const d of rest.dots()) {
        const ek = await view.ownerOf(d);
        if (ek !== undefined) push(ek, d);
      }
      return out;
    }
    // Many dots: one pass over the object's elements is cheaper than a lookup each.
    await this.commit.drain();
    const offset = prefix.length + 1;
    for await (const [k, v] of this.db.iterator(elementRange(prefix))) {
      const ek = elementKey(unescapeBytes(k, offset).bytes);
      if (view.isLoaded(ek)) continue; // done in the first pass
      for (const d of decodeDots(v)) if (rest.containsDot(d)) push(ek, d);
    }
    return out;
  }
}

/**
 * The DotSet join of one element: our dots under our context with theirs under their context.
 * Records what was new here (their unseen dots; our dots their context removed) in newEntries and
 * newCtx. Returns true when the element changed.
 */
async function joinElement(
  view: WriteView,
  h: Header,
  ek: ElementKey,
  theirs: DotSet,
  theirCtx: CausalContext,
  newEntries: Map<ElementKey, DotSet>,
  newCtx: CausalContext,
): Promise<boolean> {
  const mine = await view.dots(ek);
  const joined = joinDotSets(mine, h.ctx, theirs, theirCtx);
  const fresh = theirs.filter((d) => !h.ctx.containsDot(d));
  if (fresh.length > 0) newEntries.set(ek, fresh);
  if (sameDots(mine, joined)) return false;
  for (const d of mine) if (!joined.some((x) => sameDot(x, d))) newCtx.addDot(d);
  view.setDots(ek, joined, h);
  return true;
}

function sameDots(a: readonly Dot[], b: readonly Dot[]): boolean {
  return a.length === b.length && a.every((d, i) => sameDot(d, b[i]!));
}

/** Convert a version 1 directory in place (see migrate.ts); the version changes first and last. */
async function upgradeFromV1(db: ClassicLevel<Buffer, Buffer>, meta: StoreMeta, report?: (e: { objects: number; ms: number }) => void): Promise<void> {
  const started = performance.now();
  await db.put(formatKey(), Buffer.from(JSON.stringify({ ...meta, version: STORE_VERSION, migratingFrom: 1 })), { sync: true });
  const objects = await migrateV1ToV2(db);
  const { migratingFrom: _, ...upgraded } = { ...meta, version: STORE_VERSION };
  await db.batch().put(formatKey(), Buffer.from(JSON.stringify(upgraded))).del(migrationProgressKey()).write({ sync: true });
  report?.({ objects, ms: performance.now() - started });
}

async function readMeta(db: ClassicLevel<Buffer, Buffer>, dir: string): Promise<StoreMeta | undefined> {
  const raw = await db.get(formatKey());
  if (raw === undefined) return undefined;
  let meta: StoreMeta;
  try {
    meta = JSON.parse(raw.toString("utf8")) as StoreMeta;
  } catch {
    throw new StoreOpenError(`data directory ${dir}: the store format record is corrupt`);
  }
  if (meta.format !== STORE_FORMAT) {
    throw new StoreOpenError(`data directory ${dir} holds "${meta.format}" data, not a deltaset store`);
  }
  if (typeof meta.replicaId !== "string" || meta.replicaId === "") {
    throw new StoreOpenError(`data directory ${dir}: the store format record has no replica id`);
  }
  if (meta.version !== STORE_VERSION && meta.version !== 1) {
    throw new StoreOpenError(`data directory ${dir} has store version ${meta.version}; this node reads version ${STORE_VERSION}`);
  }
  return meta;
}
