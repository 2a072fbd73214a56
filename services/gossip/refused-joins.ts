// Received states the store refused to join, held to be joined again later. Only a counter refuses
// (whole-state-layout.ts: a join that would take its value outside int64), and it refuses what
// may join later: a decrement, here or arriving from elsewhere, can bring the sum back in range.
// The receiver still acknowledges what it refused (Algorithm 2: a receiver always acks), so the
// sender garbage-collects it and never sends it again unless written again; the refused state is
// kept here instead, per key (the join of every refusal of it), and tried again once the key
// changed here. A change is what can make the join fit, so a key that stays out of range costs no
// traffic and one join attempt per change of it; memory is bounded by maxBytes (encoded size),
// past which a refusal is not held. Held in memory only: after a restart every neighbour sends
// this node full state, which brings what it refused back.
import { type ObjectType, latticeFor } from "../crdt/index.js";

/** Default of ExchangeOptions.refusedJoinsBytes. */
export const REFUSED_JOINS_BYTES = 16 * 1024 * 1024;

/** A key's refused state held for another try, and the neighbour that sent it last. */
export interface HeldJoin {
  readonly key: string;
  readonly type: ObjectType;
  readonly state: unknown;
  readonly from: string;
}

export class RefusedJoins {
  private readonly held = new Map<string, HeldJoin & { bytes: number }>();
  /** Held keys to try again: they changed since their last try. */
  private readonly due = new Set<string>();
  private heldBytes = 0;

  constructor(private readonly maxBytes: number) {}

  /**
   * Hold a refused state of key, joined into what is held for it already. due: try it again at
   * the next retry (the key may have changed between the refusal and this call). Returns false
   * when it does not fit in maxBytes: not held (what was held for the key stays).
   */
  hold(key: string, type: ObjectType, state: unknown, from: string, due: boolean): boolean {
    const l = latticeFor(type);
    const cur = this.held.get(key);
    // A key's type does not change; a refusal of another type replaces what was held.
    const joined = cur === undefined || cur.type !== type ? l.clone(state) : l.join(cur.state, state);
    const bytes = l.encodedSize(joined);
    const others = this.heldBytes - (cur?.bytes ?? 0);
    if (others + bytes > this.maxBytes) return false;
    this.held.set(key, { key, type, state: joined, from, bytes });
    this.heldBytes = others + bytes;
    if (due) this.due.add(key);
    return true;
  }

  /** key changed in the store: if something of it is held, try it again. */
  changed(key: string): void {
    if (this.held.has(key)) this.due.add(key);
  }

  /** The held joins due for another try, no longer due (each stays held until released). */
  takeDue(): HeldJoin[] {
    const out: HeldJoin[] = [];
    for (const key of this.due) {
      const h = this.held.get(key);
      if (h !== undefined) out.push(h);
    }
    this.due.clear();
    return out;
  }

  /**
   * h was joined (or is not to be joined here any more): forgotten. A refusal of its key held
   * since h was taken (a new state replaced it) stays, due.
   */
  release(h: HeldJoin): void {
    const cur = this.held.get(h.key);
    if (cur === undefined) return;
    if (cur !== h) {
      this.due.add(h.key);
      return;
    }
    this.held.delete(h.key);
    this.due.delete(h.key);
    this.heldBytes -= cur.bytes;
  }

  /** Keys held. */
  get size(): number {
    return this.held.size;
  }

  /** Encoded bytes held. */
  get bytes(): number {
    return this.heldBytes;
  }
}
