// Group commit: writes from concurrent operations are queued and written to LevelDB together, in
// order, in one batch per flush. A caller's promise resolves only after the batch holding its
// writes is in LevelDB's log (fsync'd when sync is on), so an acknowledgement always means
// durable. Until then, the queued values are visible to later reads through an overlay, so an
// operation on a key sees the effects of the operations queued before it.
import { type BatchOp, type StoreDb, writeBatch } from "./db.js";
import { StoreClosedError, StoreWriteError } from "./errors.js";
import { type OverlayGeneration, WriteOverlay } from "./write-overlay.js";

export type { BatchOp };

interface Pending {
  ops: BatchOp[];
  /** latin1 of each op's key, computed once. */
  keys: string[];
  /** The overlay generation holding its records (none without records). */
  generation?: OverlayGeneration;
  resolve: () => void;
  reject: (e: Error) => void;
}

export interface GroupCommitOptions {
  /** fsync each batch (durable across power loss); false still survives a process crash. */
  sync: boolean;
  /** Most operations (callers) folded into one batch. */
  maxBatch: number;
  /** Reads of at most this many keys run synchronously (see getMany). */
  syncReadMax: number;
  /** A batch starts at once, not at the end of the turn, when this many records are queued... */
  startAtRecords: number;
  /** ...or this many operations. */
  startAtOperations: number;
  /** Told once, at the first failed batch (after which every write is refused). */
  onFailure?: (err: StoreWriteError) => void;
}

export class GroupCommit {
  private queue: Pending[] = [];
  private flushing = false;
  /** latin1(key) → the latest queued op of that key (the op object itself: no wrapper per record). */
  private readonly overlay = new WriteOverlay();
  private failed: StoreWriteError | undefined;
  /** The database is closing (close): later writes are refused as the store's, not as a failed disk. */
  private closed = false;
  /** A flush is scheduled for the end of this turn (schedule). */
  private due = false;
  /** Records in the queue. */
  private queuedRecords = 0;
  batches = 0;
  writes = 0;
  /** Records left out of a batch because a later operation of the same batch wrote their key. */
  superseded = 0;

  constructor(
    private readonly db: StoreDb,
    private readonly opts: GroupCommitOptions,
  ) {}

  /** Queue ops; resolves once they are durable. */
  write(ops: BatchOp[]): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.closed) return Promise.reject(new StoreClosedError());
    if (ops.length === 0) return Promise.resolve();
    const keys = ops.map((op) => op.key.toString("latin1"));
    const generation = this.overlay.add(keys, ops);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, keys, generation, resolve, reject });
      this.queuedRecords += ops.length;
      // Enough records to fill a batch, or a burst long enough that its first part's fsync should
      // overlap the rest: waiting for the end of the turn would only let other work run first.
      const long = this.queuedRecords >= this.opts.startAtRecords || this.queue.length >= this.opts.startAtOperations;
      if (long && !this.flushing) void this.flush();
      else this.schedule();
    });
  }

  /**
   * Resolves once every write queued so far is durable, without waiting for later ones (drain
   * waits for an empty queue, which a busy store may never have).
   */
  written(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (!this.flushing && this.queue.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops: [], keys: [], resolve, reject });
      this.schedule();
    });
  }

  /** A read that sees queued writes first, then LevelDB. */
  async get(key: Buffer): Promise<Buffer | undefined> {
    const o = this.overlay.get(key.toString("latin1"));
    if (o !== undefined) return o.type === "put" ? o.value : undefined;
    return this.db.getSync(key);
  }

  /**
   * Batched read: queued writes first, then LevelDB. A few keys are read synchronously: a point
   * read from LevelDB's memory and block cache takes about 2 µs on the event loop, while an
   * asynchronous read costs some 10 µs of event-loop time to hand out and 40-50 µs until it
   * answers (measured on this machine during fsync'd writes). Many keys go to one getMany, whose
   * reads run on the thread pool.
   */
  async getMany(keys: Buffer[]): Promise<Array<Buffer | undefined>> {
    const out: Array<Buffer | undefined> = new Array(keys.length);
    const missing: number[] = [];
    keys.forEach((k, i) => {
      const o = this.overlay.get(k.toString("latin1"));
      if (o !== undefined) out[i] = o.type === "put" ? o.value : undefined;
      else missing.push(i);
    });
    if (missing.length > 0 && missing.length <= this.opts.syncReadMax) {
      for (const i of missing) out[i] = this.db.getSync(keys[i]!);
    } else if (missing.length > 0) {
      const found = await this.db.getMany(missing.map((i) => keys[i]!));
      missing.forEach((i, j) => (out[i] = found[j] ?? undefined));
    }
    return out;
  }

  /** Overlay lookup only: undefined = not pending, null = pending delete. */
  pending(key: Buffer): Buffer | null | undefined {
    const o = this.overlay.get(key.toString("latin1"));
    return o === undefined ? undefined : o.type === "put" ? o.value : null;
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Resolves when everything queued so far is written. */
  async drain(): Promise<void> {
    while (this.flushing || this.queue.length > 0) await new Promise((r) => setImmediate(r));
  }

  /**
   * Refuse every later write (StoreClosedError); what is queued is still written (drain). Called
   * before the database closes: an operation that started before the store closed and writes after
   * (a state stream still arriving from a peer) would otherwise fail on the closed database as a
   * storage failure, which stops the node with exit 1 on a clean shutdown.
   */
  close(): void {
    this.closed = true;
  }

  /**
   * Start a flush at the end of this turn of the event loop, unless one runs or is due: the
   * operations of a burst (many calls read from one socket) then share one batch and one fsync,
   * instead of the first going alone and the rest waiting for the next. A batch costs ~10 µs of
   * event-loop time and, fsync'd, ~100 µs of CPU in all. A long burst does not wait for its end:
   * startAtRecords records or startAtOperations operations queued start the batch at once (write),
   * so its fsync runs while the rest of the burst is processed. Operations, not records, measure a
   * burst's length: each costs tens of µs to process whatever its size, and a few larger writes
   * started one by one would each take an fsync of their own.
   */
  private schedule(): void {
    if (this.flushing || this.due) return;
    this.due = true;
    setImmediate(() => {
      this.due = false;
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        this.overlay.seal();
        const group = this.queue.splice(0, this.opts.maxBatch);
        for (const p of group) this.queuedRecords -= p.ops.length;
        const { ops, superseded } = lastWritePerKey(group);
        try {
          await writeBatch(this.db, ops, { sync: this.opts.sync });
        } catch (err) {
          // A failed write leaves the store unusable for writes: refuse further ones loudly, and
          // tell the owner (a node stops: see StoreWriteError).
          this.failed = new StoreWriteError(err as Error);
          for (const p of group) p.reject(this.failed);
          for (const p of this.queue.splice(0)) p.reject(this.failed);
          this.queuedRecords = 0;
          this.opts.onFailure?.(this.failed);
          return;
        }
        this.batches++;
        this.superseded += superseded;
        for (const p of group) if (p.ops.length > 0) this.writes++;
        for (const p of group) if (p.generation !== undefined) this.overlay.durable(p.generation);
        for (const p of group) p.resolve();
      }
    } finally {
      this.flushing = false;
    }
  }
}

/**
 * The group's records in order, without those a later operation of the same group overwrites (a
 * set's header, or a dot-index bucket, written by each of several adds to one set): a batch is
 * atomic, so only each key's last value is ever seen, and LevelDB is spared the others' bytes.
 * Also how many records were left out.
 */
function lastWritePerKey(group: readonly Pending[]): { ops: BatchOp[]; superseded: number } {
  let total = 0;
  // The usual group: every operation of one sealed overlay generation, whose records are already
  // each key's last write among them.
  let only: OverlayGeneration | undefined;
  let mixed = false;
  let writers = 0;
  for (const p of group) {
    total += p.ops.length;
    if (p.generation === undefined) continue;
    writers++;
    only ??= p.generation;
    if (only !== p.generation) mixed = true;
  }
  if (only !== undefined && !mixed && only.operations === writers) {
    const ops = [...only.records.values()];
    return { ops, superseded: total - ops.length };
  }
  const last = new Map<string, BatchOp>();
  for (const p of group) for (let i = 0; i < p.keys.length; i++) last.set(p.keys[i]!, p.ops[i]!);
  if (last.size === total) return { ops: group.flatMap((p) => p.ops), superseded: 0 };
  const ops: BatchOp[] = [];
  for (const p of group) for (let i = 0; i < p.keys.length; i++) if (last.get(p.keys[i]!) === p.ops[i]) ops.push(p.ops[i]!);
  return { ops, superseded: total - ops.length };
}
