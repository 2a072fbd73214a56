// The writes of one operation on one object, with reads that see them. Element dots and dot-index
// buckets changed earlier in the operation are answered from here, then from the group-commit
// overlay (queued, not yet durable writes), then from LevelDB. Nothing is written until finish(),
// which turns the changes into one batch of records: an element changed twice is written once,
// and a bucket touched by many dots is read and written once.
import { type CausalContext, type Dot, type ElementKey, elementBytes, elementKey, sameDot } from "../crdt/index.js";
import { type Bucket, appendToBucket, bucketOf, decodeBucket, encodeBucket, offsetOf, DOT_BUCKET } from "./dot-index.js";
import type { BatchOp, GroupCommit } from "./group-commit.js";
import { type ElementPresence, type PresenceFilter, presenceHash } from "./element-presence.js";
import { dotBucketKey, dotIndexPrefix, elementRecordKey, expiryKey } from "./keys.js";
import { type Header, decodeDots, encodeDots } from "./records.js";
import { emptyLiveDigest, updateLiveDigest } from "./live-digest.js";

interface ElementState {
  bytes: Uint8Array;
  /** Element record key. */
  key: Buffer;
  dots: Dot[];
  dirty: boolean;
  /** A record was found when the element was read. */
  stored: boolean;
  /** presenceHash of its bytes, once the presence filter asked. */
  hash?: number;
}

interface BucketState {
  key: Buffer;
  /** Stored entries, once read (or known empty). */
  stored: Bucket | undefined;
  adds: Bucket;
  removes: Set<number>;
  /**
   * Every change so far adds a dot above all the object held of its replica before this operation
   * (a local add's fresh dot): the stored entries stay as they are and the new ones follow them,
   * so the record is written by appending, without decoding it.
   */
  appendOnly: boolean;
}

const EMPTY = new Uint8Array(0);

/** The entries of a bucket record as read (none when there is no record). */
const storedOf = (raw: Uint8Array | undefined): Bucket => (raw === undefined ? new Map() : decodeBucket(raw));

export class WriteView {
  private readonly elements = new Map<ElementKey, ElementState>();
  /** replica → bucket number → state. */
  private readonly buckets = new Map<string, Map<number, BucketState>>();
  private readonly replicaPrefixes = new Map<string, Buffer>();
  /** Records of other kinds (pending removes) written in the same batch. */
  readonly otherRecords: BatchOp[] = [];
  /** Elements read that had no record. */
  absentReads = 0;

  /**
   * @param ctxBefore the object's context before this operation. A bucket whose first counter is
   * above everything it holds of that replica cannot hold a live dot, so it is not read.
   */
  constructor(
    private readonly commit: GroupCommit,
    private readonly prefix: Buffer,
    private readonly ctxBefore: CausalContext,
    /** The set's presence filter (element-presence.ts): elements it says absent are not read, records created are added. */
    private readonly presence?: { filter: PresenceFilter; counts: ElementPresence },
  ) {}

  /** Read the records of many elements (raw bytes) in one batched read; returns their keys. */
  async loadBytes(elements: readonly Uint8Array[]): Promise<ElementKey[]> {
    const eks = elements.map(elementKey);
    await this.fetch(eks, (i) => elements[i]!);
    return eks;
  }

  /** Read the records of many elements in one batched read, so later dots() calls are answered here. */
  async prefetch(eks: readonly ElementKey[]): Promise<void> {
    await this.fetch(eks, (i) => elementBytes(eks[i]!));
  }

  private async fetch(eks: readonly ElementKey[], bytesOf: (i: number) => Uint8Array): Promise<void> {
    const filter = this.presence?.filter;
    const trusted = filter !== undefined && filter.complete;
    /** Elements to read, once each (a batch may name one twice). */
    const read: number[] = [];
    let reading: Set<ElementKey> | undefined;
    let skipped = 0;
    for (let i = 0; i < eks.length; i++) {
      const ek = eks[i]!;
      if (this.elements.has(ek)) continue;
      if (trusted) {
        const bytes = bytesOf(i);
        const hash = presenceHash(bytes);
        if (!filter.mayHold(hash)) {
          // Known now: a repeat of the element in the batch finds it above.
          this.elements.set(ek, { bytes, key: elementRecordKey(this.prefix, bytes), dots: [], dirty: false, stored: false, hash });
          skipped++;
          continue;
        }
      }
      reading ??= new Set();
      if (reading.has(ek)) continue;
      reading.add(ek);
      read.push(i);
    }
    if (skipped > 0) this.presence!.counts.skipped += skipped;
    if (read.length === 0) return;
    const keys = read.map((i) => elementRecordKey(this.prefix, bytesOf(i)));
    const raws = await this.commit.getMany(keys);
    for (let j = 0; j < read.length; j++) {
      const i = read[j]!;
      const raw = raws[j];
      this.elements.set(eks[i]!, { bytes: bytesOf(i), key: keys[j]!, dots: raw === undefined ? [] : decodeDots(raw), dirty: false, stored: raw !== undefined });
      if (raw === undefined) this.absentReads++;
    }
  }

  /** Whether an element was read (loadBytes/prefetch/dots) in this operation. */
  isLoaded(ek: ElementKey): boolean {
    return this.elements.has(ek);
  }

  /** Every element read or changed so far, with its current dots. */
  forEachLoaded(fn: (ek: ElementKey, dots: Dot[]) => void): void {
    for (const [ek, s] of this.elements) fn(ek, s.dots);
  }

  /** Dots of an element already loaded by loadBytes or prefetch. */
  loadedDots(ek: ElementKey): Dot[] {
    const s = this.elements.get(ek);
    if (s === undefined) throw new Error("element not loaded");
    return s.dots;
  }

  async dots(ek: ElementKey): Promise<Dot[]> {
    const local = this.elements.get(ek);
    if (local !== undefined) return local.dots;
    await this.prefetch([ek]);
    return this.elements.get(ek)!.dots;
  }

  /** The element holding a live dot, or undefined. */
  async ownerOf(d: Dot): Promise<ElementKey | undefined> {
    const b = this.bucket(d.replica, bucketOf(d.counter));
    const off = offsetOf(d.counter);
    const added = b.adds.get(off);
    if (added !== undefined) return elementKey(added);
    if (b.removes.has(off)) return undefined;
    if (b.stored === undefined) await this.readBuckets([b]);
    const el = b.stored!.get(off);
    return el === undefined ? undefined : elementKey(el);
  }

  /** Read the buckets holding these dots in one batched read (before many ownerOf calls). */
  async loadOwners(dots: Iterable<Dot>): Promise<void> {
    const need = new Set<BucketState>();
    for (const d of dots) {
      const b = this.bucket(d.replica, bucketOf(d.counter));
      if (b.stored === undefined) need.add(b);
    }
    await this.readBuckets([...need]);
  }

  /**
   * Replace an element's dots (it must have been read): its record, the dot index, and the
   * header's live-element count and live digest.
   */
  setDots(ek: ElementKey, after: readonly Dot[], h: Header): void {
    const s = this.elements.get(ek);
    if (s === undefined) throw new Error("element not loaded");
    const before = s.dots;
    const live = h.live;
    for (const d of before) {
      if (after.length > 0 && after.some((x) => sameDot(x, d))) continue;
      const b = this.bucket(d.replica, bucketOf(d.counter));
      const off = offsetOf(d.counter);
      b.adds.delete(off);
      b.removes.add(off);
      b.appendOnly = false;
      if (live !== undefined) updateLiveDigest(live, s.bytes, d, -1);
    }
    for (const d of after) {
      if (before.length > 0 && before.some((x) => sameDot(x, d))) continue;
      const b = this.bucket(d.replica, bucketOf(d.counter));
      const off = offsetOf(d.counter);
      b.removes.delete(off);
      b.adds.set(off, s.bytes);
      if (d.counter <= this.ctxBefore.max(d.replica)) b.appendOnly = false;
      if (live !== undefined) updateLiveDigest(live, s.bytes, d, 1);
      // A dot that expires is found by the sweep (expiry.ts); its entry is dropped there, also
      // when the dot was removed before (a stale entry costs one lookup).
      if (d.expiresAt !== undefined) this.otherRecords.push({ type: "put", key: expiryKey(d.expiresAt, this.prefix, s.bytes), value: Buffer.alloc(0) });
    }
    if (before.length === 0 && after.length > 0) h.size++;
    if (before.length > 0 && after.length === 0) h.size--;
    // No live dot left: the digest is known again, also for a set whose header had none (records.ts).
    if (h.size === 0 && h.live === undefined) h.live = emptyLiveDigest();
    s.dots = after.length === 0 ? [] : [...after];
    s.dirty = true;
  }

  /** The operation's records: changed elements and dot-index buckets. */
  async finish(): Promise<BatchOp[]> {
    const ops: BatchOp[] = [...this.otherRecords];
    const filter = this.presence?.filter;
    for (const s of this.elements.values()) {
      if (!s.dirty) continue;
      if (s.dots.length === 0) ops.push({ type: "del", key: s.key });
      else {
        ops.push({ type: "put", key: s.key, value: encodeDots(s.dots) });
        // Before the write is queued: a later operation's read of this element must not be skipped.
        if (!s.stored && filter !== undefined) filter.add(s.hash ?? presenceHash(s.bytes));
      }
    }
    const changed: BucketState[] = [];
    for (const perReplica of this.buckets.values()) {
      for (const b of perReplica.values()) if (b.adds.size > 0 || b.removes.size > 0) changed.push(b);
    }
    // One read of the buckets not read yet: one that only gained dots newer than all it held is
    // written by appending to its record as stored; the others are decoded and rewritten.
    const unread = changed.filter((b) => b.stored === undefined);
    const raws = unread.length === 0 ? [] : await this.commit.getMany(unread.map((b) => b.key));
    unread.forEach((b, i) => {
      if (b.appendOnly) ops.push({ type: "put", key: b.key, value: appendToBucket(raws[i] ?? EMPTY, b.adds) });
      else b.stored = storedOf(raws[i]);
    });
    for (const b of changed) {
      // Left unread: appended above.
      if (b.stored === undefined) continue;
      // The stored entries were decoded for this operation alone: changed in place.
      const next = b.stored;
      const had = next.size;
      for (const off of b.removes) next.delete(off);
      for (const [off, el] of b.adds) next.set(off, el);
      if (next.size === 0) {
        if (had > 0) ops.push({ type: "del", key: b.key });
      } else {
        ops.push({ type: "put", key: b.key, value: encodeBucket(next) });
      }
    }
    return ops;
  }

  private bucket(replica: string, n: number): BucketState {
    let perReplica = this.buckets.get(replica);
    if (perReplica === undefined) {
      perReplica = new Map();
      this.buckets.set(replica, perReplica);
    }
    let b = perReplica.get(n);
    if (b === undefined) {
      let rp = this.replicaPrefixes.get(replica);
      if (rp === undefined) {
        rp = dotIndexPrefix(this.prefix, replica);
        this.replicaPrefixes.set(replica, rp);
      }
      // Above every counter of this replica the object has seen: no live dot can be there.
      const empty = n * DOT_BUCKET > this.ctxBefore.max(replica);
      b = { key: dotBucketKey(rp, n), stored: empty ? new Map() : undefined, adds: new Map(), removes: new Set(), appendOnly: true };
      perReplica.set(n, b);
    }
    return b;
  }

  private async readBuckets(list: BucketState[]): Promise<void> {
    if (list.length === 0) return;
    const raws = await this.commit.getMany(list.map((b) => b.key));
    list.forEach((b, i) => (b.stored = storedOf(raws[i])));
  }
}
