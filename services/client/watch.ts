// The client side of Watch for one AWSET key: a local copy kept in step with the node. The
// catch-up's chunks are collected and joined as one state under the first chunk's context once the
// last chunk is in (then its removed dots), change events by joining their delta; the context of
// the last event applied is where a later watch resumes (pass it as since).
import { AWSet, AWSetLattice, CausalContext as Ctx, type CausalContext, ObjectType, contextFromProto, decodeSlice, elementKey, latticeFor } from "../crdt/index.js";
import type { ExportChunk, KeyEvent } from "../gen/deltaset/v1/replica.js";

export class WatchedSet {
  state: AWSet = AWSet.bottom();
  /** The context to resume from (the last applied event's), undefined before any. */
  resumeFrom: CausalContext | undefined;
  private pendingCtx: CausalContext | undefined;
  private pendingEntries = AWSet.bottom();
  private pendingNext: CausalContext | undefined;

  /** clock: the local time adds with a time to live expire on (their remaining TTL is counted from arrival). */
  constructor(
    initial?: { state: AWSet; resumeFrom?: CausalContext },
    private readonly clock: () => number = Date.now,
  ) {
    if (initial) {
      this.state = initial.state;
      this.resumeFrom = initial.resumeFrom;
    }
  }

  apply(e: KeyEvent): void {
    if (e.type !== ObjectType.AWSET) throw new Error(`WatchedSet follows AWSET keys, not ${ObjectType[e.type]}`);
    if (e.catchUp !== undefined) {
      const c = e.catchUp;
      // A catch-up's first chunk (it carries next_since) starts a new one: what a cut watch left
      // pending belongs to a state that may since have lost elements, and is not joined.
      if (c.nextSince !== undefined) this.resetPending();
      if (c.context !== undefined) this.pendingCtx = contextFromProto(c.context);
      if (c.nextSince !== undefined) this.pendingNext = contextFromProto(c.nextSince);
      const slice = c.slice === undefined ? AWSet.bottom() : catchUpSlice(c, this.pendingCtx ?? new Ctx(), this.clock());
      this.pendingEntries = AWSetLattice.join(this.pendingEntries, slice);
      if (c.last) {
        const ctx = this.pendingCtx ?? this.pendingEntries.ctx;
        this.state = AWSetLattice.join(this.state, AWSet.fromParts(this.pendingEntries.entries, mergeCtx(ctx, this.pendingEntries.ctx)));
        if (c.removed !== undefined) this.state = AWSetLattice.join(this.state, AWSet.fromParts(new Map(), contextFromProto(c.removed)));
        if (this.pendingNext !== undefined) this.resumeFrom = this.pendingNext;
        this.resetPending();
      }
      return;
    }
    if (e.delta !== undefined) this.state = AWSetLattice.join(this.state, latticeFor(ObjectType.AWSET).decode(e.delta.payload, this.clock()) as AWSet);
    if (e.context !== undefined) this.resumeFrom = contextFromProto(e.context);
  }

  private resetPending(): void {
    this.pendingCtx = undefined;
    this.pendingEntries = AWSet.bottom();
    this.pendingNext = undefined;
  }

  /** The members now (adds whose time to live ran out are dropped first). */
  elements(): string[] {
    this.state.expire(this.clock());
    return [...this.state.entries.keys()].map((k) => Buffer.from(k, "latin1").toString()).sort();
  }
}

function mergeCtx(a: CausalContext, b: CausalContext): CausalContext {
  const out = a.clone();
  out.joinInPlace(b);
  return out;
}

/** The entries of one catch-up chunk, checked against its range and the catch-up's context. */
export function catchUpSlice(c: ExportChunk, senderCtx: CausalContext, nowMs: number): AWSet {
  const range = {
    rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined,
    rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd),
    rangeOpen: c.rangeOpen,
  };
  return decodeSlice(ObjectType.AWSET, c.slice!.payload, senderCtx, range, nowMs) as AWSet;
}
