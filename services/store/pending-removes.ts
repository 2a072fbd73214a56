// Deferred removes. A Remove carries the causal context its client read elsewhere; when that
// context covers adds this node has not received yet, removing only what is here would lose the
// rest of the remove: the covered adds would arrive later and resurrect the element. So the
// remove is kept, per element, as the part of the context not yet seen here ("unseen"):
//
//   defer(key, element, unseen)   record (join with what is already pending for the element)
//   settle(key, live, seen)       after any join into the key: every live dot of a pending
//                                 element that its unseen context covers is removed (the caller
//                                 spreads that as an ordinary remove delta); what the key's
//                                 context now covers leaves the unseen part, and an element with
//                                 nothing unseen left is dropped (its covered adds have all
//                                 arrived, applied or known to belong to other elements).
//
// Records are durable, written in the same batch as the operation that changes them:
//   0x00 'R' esc(key) esc(element) → the unseen context (protobuf CausalContext).
// All of them are also held in memory, so a join reads nothing to learn whether its key has any.
// Settings bound them before anything is stored: the elements waiting, the dots one Remove names
// that are not here, the replica ids one element's record waits for, and the bytes of all records
// (key, element and unseen context, as stored). A real key's context names a handful of replica
// ids (one per start of a node that wrote it); a context naming thousands of never-seen ones
// would otherwise be kept, per element, for good (those adds never come).
import type { StoreDb } from "./db.js";
import { CausalContext, type Dot, type ElementKey, contextFromProto, elementBytes, encodeContext, elementKey } from "../crdt/index.js";
import { CausalContext as CausalContextMsg } from "../gen/deltaset/v1/types.js";
import type { BatchOp } from "./group-commit.js";
import { META, escapeBytes, unescapeBytes } from "./keys.js";

const PENDING = 0x52; // 'R'

/** The pending-remove limit was reached: the Remove is refused and nothing changes. */
export class PendingRemovesFullError extends Error {
  override readonly name = "PendingRemovesFullError";
}

/**
 * A Remove's context names adds of this node's own replica id that the key's context does not
 * hold: this node mints from that context, so they were never made. Deferred, they would remove
 * this node's next adds of the element when it made them. Refused; nothing changes.
 */
export class UnmadeAddsError extends Error {
  override readonly name = "UnmadeAddsError";
  constructor(key: string, replica: string, ranges: Array<[number, number]>, last: number) {
    const shown = ranges.slice(0, 3).map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(", ") + (ranges.length > 3 ? ", ..." : "");
    super(
      `the context names adds ${replica}:${shown} of key "${key}" that this node never made (its last add there is ${last}): ` +
        `pass the context a Query of this key returned, unchanged`,
    );
  }
}

function recordKey(key: string, ek: ElementKey): Buffer {
  return Buffer.concat([Buffer.from([META, PENDING]), escapeBytes(Buffer.from(key, "utf8")), escapeBytes(elementBytes(ek))]);
}

function encodeUnseen(c: CausalContext): Buffer {
  return encodeContext(c);
}

function tooManyReplicas(n: number, limit: number, retry: string, joined = ""): PendingRemovesFullError {
  return new PendingRemovesFullError(
    `the Remove's context${joined} names adds of ${n} replica ids this node has not received (limit ${limit}, --max-remove-unseen-replicas); ${retry}`,
  );
}

export interface PendingRemoveLimits {
  /** Elements with a pending remove (--max-pending-removes). */
  maxElements: number;
  /** Dots not yet received here that one Remove may name (--max-remove-unseen-dots). */
  maxUnseenDots: number;
  /** Replica ids of adds not received here that one element's record may wait for (--max-remove-unseen-replicas). */
  maxUnseenReplicas: number;
  /** Bytes of all records together: key, element and unseen context (--max-pending-remove-bytes). */
  maxBytes: number;
}

/** A pending remove of one element: the dots it waits for, and the bytes of its record. */
interface Pending {
  unseen: CausalContext;
  bytes: number;
}

export class PendingRemoves {
  private readonly byKey = new Map<string, Map<ElementKey, Pending>>();
  private count = 0;
  private totalBytes = 0;

  private constructor(private readonly limits: PendingRemoveLimits) {}

  /**
   * Load every pending remove of a data directory. Records past the limits (lowered since they
   * were kept) are all loaded: the limits refuse new ones only.
   */
  static async load(db: StoreDb, limits: PendingRemoveLimits): Promise<PendingRemoves> {
    const p = new PendingRemoves(limits);
    const range = { gte: Buffer.from([META, PENDING]), lt: Buffer.from([META, PENDING + 1]) };
    for await (const [k, v] of db.iterator(range)) {
      const key = unescapeBytes(k, 2);
      const el = unescapeBytes(k, key.next);
      p.set(key.bytes.toString("utf8"), elementKey(el.bytes), contextFromProto(CausalContextMsg.decode(v)), k.length + v.length);
    }
    return p;
  }

  /** Bytes of all pending-remove records (key, element and unseen context). */
  bytes(): number {
    return this.totalBytes;
  }

  /** Elements with a pending remove, on this key or (no key) in all. */
  size(key?: string): number {
    return key === undefined ? this.count : (this.byKey.get(key)?.size ?? 0);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /**
   * Throws PendingRemovesFullError unless deferring the removes of eks for `unseen` stays within
   * every limit: the Remove names at most maxUnseenDots dots not received here (a context naming
   * dots far ahead of any this node has seen, or of replicas that never were, would wait for good,
   * removing every later add of the element that those dots name); each element's record, joined
   * with what it already waits for, names at most maxUnseenReplicas replica ids; the elements not
   * yet pending fit under maxElements, and the records' bytes under maxBytes. Checked element by
   * element, stopping at the first past a limit, so a refusal costs no more than what fits.
   */
  checkRoom(key: string, eks: readonly ElementKey[], unseen: CausalContext): void {
    const retry = "send the Remove to the node you read from, or retry once replication has caught up";
    const replicas = unseen.size().replicas;
    if (replicas > this.limits.maxUnseenReplicas) throw tooManyReplicas(replicas, this.limits.maxUnseenReplicas, retry);
    const dots = unseen.dotCount();
    if (dots > this.limits.maxUnseenDots) {
      throw new PendingRemovesFullError(`the Remove's context names ${dots} dots this node has not received (limit ${this.limits.maxUnseenDots}, --max-remove-unseen-dots); ${retry}`);
    }
    const mine = this.byKey.get(key);
    const fresh = new Set(eks.filter((ek) => mine?.has(ek) !== true)).size;
    if (this.count + fresh > this.limits.maxElements) {
      throw new PendingRemovesFullError(`${this.count} removes already wait here for adds not yet received (limit ${this.limits.maxElements}, --max-pending-removes); ${retry}`);
    }
    let bytes = this.totalBytes;
    let unseenBytes: number | undefined; // of a record holding just `unseen`, the same for every new element
    for (const ek of new Set(eks)) {
      const cur = mine?.get(ek);
      let size: number;
      if (cur === undefined) {
        size = recordKey(key, ek).length + (unseenBytes ??= encodeUnseen(unseen).length);
      } else {
        const joined = cur.unseen.join(unseen);
        const n = joined.size().replicas;
        if (n > this.limits.maxUnseenReplicas) throw tooManyReplicas(n, this.limits.maxUnseenReplicas, retry, " with the removes it already waits for");
        size = recordKey(key, ek).length + encodeUnseen(joined).length - cur.bytes;
      }
      bytes += size;
      if (bytes > this.limits.maxBytes) {
        throw new PendingRemovesFullError(
          `the removes waiting here for adds not yet received would take more than ${this.limits.maxBytes} bytes (now ${this.totalBytes}; limit --max-pending-remove-bytes); ${retry}`,
        );
      }
    }
  }

  /** Keep a remove of element ek for the dots of `unseen` (joined with any earlier one). */
  defer(key: string, ek: ElementKey, unseen: CausalContext, ops: BatchOp[]): void {
    const joined = (this.byKey.get(key)?.get(ek)?.unseen.clone() ?? new CausalContext()).joinInPlace(unseen);
    this.put(key, ek, joined, ops);
  }

  /**
   * After a join into key: the live dots of pending elements that their unseen context covers
   * (to remove), and the records' new state given the key's context `seen`.
   * @param dotsOf the element's live dots after the join
   */
  async settle(key: string, dotsOf: (ek: ElementKey) => Promise<Dot[]>, seen: CausalContext, ops: BatchOp[]): Promise<Map<ElementKey, Dot[]>> {
    const hits = new Map<ElementKey, Dot[]>();
    const mine = this.byKey.get(key);
    if (mine === undefined) return hits;
    for (const [ek, { unseen }] of [...mine]) {
      // None of the adds it waits for is here yet (the usual case for all but the element just
      // joined): no live dot is in unseen, as the key's context holds every live dot, and nothing
      // leaves it. Decided in the size of the smaller context, not of unseen, which may be large.
      if (!unseen.intersects(seen)) continue;
      const hit = (await dotsOf(ek)).filter((d) => unseen.containsDot(d));
      if (hit.length > 0) hits.set(ek, hit);
      const rest = unseen.subtract(seen);
      if (rest.isEmpty()) {
        this.delete(key, ek);
        ops.push({ type: "del", key: recordKey(key, ek) });
      } else {
        this.put(key, ek, rest, ops);
      }
    }
    return hits;
  }

  /** Keys with pending removes. */
  keys(): string[] {
    return [...this.byKey.keys()];
  }

  /** The pending removes of a key: each element and the dots of adds it still waits for. */
  of(key: string): Array<{ element: Buffer; unseen: CausalContext }> {
    return [...(this.byKey.get(key) ?? [])].map(([ek, { unseen }]) => ({ element: Buffer.from(elementBytes(ek)), unseen: unseen.clone() }));
  }

  /**
   * Forget an element's pending remove that another node took over (hand-off), if it still waits
   * for exactly `unseen`; false when it changed meanwhile (then it is handed over again).
   */
  forget(key: string, element: Uint8Array, unseen: CausalContext, ops: BatchOp[]): boolean {
    const ek = elementKey(element);
    const cur = this.byKey.get(key)?.get(ek);
    if (cur === undefined || !cur.unseen.equals(unseen)) return false;
    this.delete(key, ek);
    ops.push({ type: "del", key: recordKey(key, ek) });
    return true;
  }

  /** Record (in memory and in ops) that ek of key waits for the dots of unseen. */
  private put(key: string, ek: ElementKey, unseen: CausalContext, ops: BatchOp[]): void {
    const k = recordKey(key, ek);
    const value = encodeUnseen(unseen);
    this.set(key, ek, unseen, k.length + value.length);
    ops.push({ type: "put", key: k, value });
  }

  private set(key: string, ek: ElementKey, unseen: CausalContext, bytes: number): void {
    let mine = this.byKey.get(key);
    if (mine === undefined) this.byKey.set(key, (mine = new Map()));
    const cur = mine.get(ek);
    if (cur === undefined) this.count++;
    this.totalBytes += bytes - (cur?.bytes ?? 0);
    mine.set(ek, { unseen, bytes });
  }

  private delete(key: string, ek: ElementKey): void {
    const mine = this.byKey.get(key);
    const cur = mine?.get(ek);
    if (mine === undefined || cur === undefined) return;
    mine.delete(ek);
    this.count--;
    this.totalBytes -= cur.bytes;
    if (mine.size === 0) this.byKey.delete(key);
  }
}
