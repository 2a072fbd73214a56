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
// All of them are also held in memory (their number is bounded by a setting), so a join reads
// nothing to learn whether its key has any.
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

export class PendingRemoves {
  private readonly byKey = new Map<string, Map<ElementKey, CausalContext>>();
  private count = 0;

  private constructor(
    private readonly limit: number,
    private readonly maxUnseenDots: number,
  ) {}

  /**
   * Load every pending remove of a data directory. limit: elements with a pending remove;
   * maxUnseenDots: dots not yet received here that one Remove may name.
   */
  static async load(db: StoreDb, limit: number, maxUnseenDots: number): Promise<PendingRemoves> {
    const p = new PendingRemoves(limit, maxUnseenDots);
    const range = { gte: Buffer.from([META, PENDING]), lt: Buffer.from([META, PENDING + 1]) };
    for await (const [k, v] of db.iterator(range)) {
      const key = unescapeBytes(k, 2);
      const el = unescapeBytes(k, key.next);
      p.set(key.bytes.toString("utf8"), elementKey(el.bytes), contextFromProto(CausalContextMsg.decode(v)));
    }
    return p;
  }

  /** Elements with a pending remove, on this key or (no key) in all. */
  size(key?: string): number {
    return key === undefined ? this.count : (this.byKey.get(key)?.size ?? 0);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /**
   * Throws PendingRemovesFullError unless the elements not yet pending on key still fit under the
   * limit, and the Remove names at most maxUnseenDots dots not received here: a context naming
   * dots far ahead of any this node has seen (or of replicas that never were) would wait for good,
   * removing every later add of the element that those dots name.
   */
  checkRoom(key: string, eks: readonly ElementKey[], unseen: CausalContext): void {
    const dots = unseen.dotCount();
    if (dots > this.maxUnseenDots) {
      throw new PendingRemovesFullError(
        `the Remove's context names ${dots} dots this node has not received (limit ${this.maxUnseenDots}, --max-remove-unseen-dots); ` +
          `send the Remove to the node you read from, or retry once replication has caught up`,
      );
    }
    const mine = this.byKey.get(key);
    const fresh = new Set(eks.filter((ek) => mine?.has(ek) !== true)).size;
    if (this.count + fresh > this.limit) {
      throw new PendingRemovesFullError(
        `${this.count} removes already wait here for adds not yet received (limit ${this.limit}, --max-pending-removes); ` +
          `send the Remove to the node you read from, or retry once replication has caught up`,
      );
    }
  }

  /** Keep a remove of element ek for the dots of `unseen` (joined with any earlier one). */
  defer(key: string, ek: ElementKey, unseen: CausalContext, ops: BatchOp[]): void {
    const joined = (this.byKey.get(key)?.get(ek)?.clone() ?? new CausalContext()).joinInPlace(unseen);
    this.set(key, ek, joined);
    ops.push({ type: "put", key: recordKey(key, ek), value: encodeUnseen(joined) });
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
    for (const [ek, unseen] of [...mine]) {
      const hit = (await dotsOf(ek)).filter((d) => unseen.containsDot(d));
      if (hit.length > 0) hits.set(ek, hit);
      const rest = unseen.subtract(seen);
      if (rest.equals(unseen)) continue;
      if (rest.isEmpty()) {
        this.delete(key, ek);
        ops.push({ type: "del", key: recordKey(key, ek) });
      } else {
        this.set(key, ek, rest);
        ops.push({ type: "put", key: recordKey(key, ek), value: encodeUnseen(rest) });
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
    return [...(this.byKey.get(key) ?? [])].map(([ek, unseen]) => ({ element: Buffer.from(elementBytes(ek)), unseen: unseen.clone() }));
  }

  /**
   * Forget an element's pending remove that another node took over (hand-off), if it still waits
   * for exactly `unseen`; false when it changed meanwhile (then it is handed over again).
   */
  forget(key: string, element: Uint8Array, unseen: CausalContext, ops: BatchOp[]): boolean {
    const ek = elementKey(element);
    const cur = this.byKey.get(key)?.get(ek);
    if (cur === undefined || !cur.equals(unseen)) return false;
    this.delete(key, ek);
    ops.push({ type: "del", key: recordKey(key, ek) });
    return true;
  }

  private set(key: string, ek: ElementKey, c: CausalContext): void {
    let mine = this.byKey.get(key);
    if (mine === undefined) this.byKey.set(key, (mine = new Map()));
    if (!mine.has(ek)) this.count++;
    mine.set(ek, c);
  }

  private delete(key: string, ek: ElementKey): void {
    const mine = this.byKey.get(key);
    if (mine?.delete(ek) !== true) return;
    this.count--;
    if (mine.size === 0) this.byKey.delete(key);
  }
}
