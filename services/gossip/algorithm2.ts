// Algorithm 2 (anti-entropy ensuring causal consistency; seed 000 section 1.3) for one
// partition, with the two refinements of Enes et al. (ICDE 2019): BP and RR.
//
//   durable:  c                     sequence number (the caller persists it)
//   volatile: D : seq ↦ (delta, origin)   buffer, contiguous seqs [min, c)
//             A : neighbour ↦ seq   highest seq acked (missing = 0)
//
//   on receive(j, d, n):  if d brings something new: buffer it at c, c++;  always ack n
//   on ack(j, n):         A(j) = max(A(j), n)
//   on operation(d):      buffer d at c, c++
//   ship to j:            if A(j) < c:
//                           D empty or min(dom D) > A(j)  → full state (line 24)
//                           else                          → ⊔{ D(l) | A(j) ≤ l < c }, with seq c
//   gc:                   drop D(l) for l < min over current neighbours of A(j)
//                         (with no neighbour, a new delta is not even buffered: skip)
//
// BP: a delta whose origin is j is never sent to j; the seq sent stays c, so j's ack still
// means "I hold everything below c" (the excluded deltas came from j). When every unacked
// delta came from j, nothing is sent and A(j) moves to c directly.
// RR: the caller buffers only the part of a received payload that was new (Δ(d, X), computed
// before the join); the engine buffers whatever it is handed.
// Holes: a received payload whose new part was too big to hold (a large catch-up) is buffered as
// a hole at its seq. A neighbour whose interval covers a hole gets full state instead of
// deltas, so the catch-up is still forwarded (Algorithm 2 is transitive); with BP, the hole's
// origin skips it like any delta it sent.
// Buffer limit: when the buffer exceeds its byte budget the oldest deltas are dropped, and
// neighbours that still needed them fall back to full state through line 24.
// Tail pushes (ours, for replication lag under link latency): a push of fresh local changes
// sends only what was never sent to j, D[S(j), c) with S(j) the highest seq sent to j, instead of
// the whole unacknowledged interval, so pushes can follow each other without waiting a round
// trip for acks and without resending what is in flight. Its ack then does not mean "j holds
// everything below c", only "j holds [S, c)": it raises A(j) only once A(j) reaches S (acked
// ranges join up, in any order). So that an ack says which of the two it answers, a tail push
// carries a label of its own as its seq (receivers only echo it), from TAIL_LABELS up, above any
// c: with c for both, the ack of a push and that of a period's interval sent at the same c could
// not be told apart, nor a repeated ack of the push from a period's. A push the caller knows did
// not arrive (not sent, or its call failed) is handed back (tailNotSent), so the next push
// carries it again; one lost unseen is repaired by the periods, which still send the whole
// D[A(j), c) (lines 22-28 unchanged).
import { type PayloadOps, joinPayloads } from "./payload.js";

export interface BufferedDelta<P> {
  readonly seq: number;
  readonly delta: P;
  /**
   * Node the delta came from (this node for local operations); NO_ORIGIN once that node was
   * forgotten (it restarted, dropped the partition, or left): it may no longer hold the delta.
   */
  readonly origin: string;
  readonly bytes: number;
  /** Something new arrived here that is not held in delta: only a full state carries it. */
  readonly hole?: boolean;
}

/** The origin of a buffered delta whose sender may no longer hold it (node ids are never empty). */
export const NO_ORIGIN = "";

export type Alg2Plan<P> =
  | { kind: "none" }
  | { kind: "state"; seq: number }
  /** held: deltas BP kept back because they came from the target. */
  | { kind: "delta"; seq: number; payload: P; held: number }
  /** BP left nothing to send: every unacked delta came from the target; its ack was advanced. */
  | { kind: "advanced"; seq: number; held: number };

/** Tail pushes' seqs (labels) start here: above any c a partition reaches, and safe as a double. */
export const TAIL_LABELS = 2 ** 50;

export class Alg2Partition<P> {
  private c: number;
  private readonly buffer: BufferedDelta<P>[] = [];
  private bytes = 0;
  private readonly acks = new Map<string, number>();
  /** S(j): the highest seq sent to j (tail pushes start there). */
  private readonly sent = new Map<string, number>();
  /**
   * Tail pushes to j not acked yet: their label → the interval [from, to) they carry; `range` for
   * a push of one write's interval (planRange), which S(j) does not count.
   */
  private readonly tails = new Map<string, Map<number, { from: number; to: number; range?: true }>>();
  /** The next tail push's label. */
  private nextLabel = TAIL_LABELS;
  /**
   * Tail pushes j acked that do not join A(j) yet: [from, n) ranges, sorted, disjoint and not
   * touching (addRange merges), so a stuck A(j) under a stream of pushes keeps one range.
   */
  private readonly ackedRanges = new Map<string, Array<[number, number]>>();

  constructor(
    private readonly ops: PayloadOps<P>,
    readonly partition: number,
    initialSeq: number,
  ) {
    if (!Number.isSafeInteger(initialSeq) || initialSeq < 0) {
      throw new RangeError(`initial sequence number must be a non-negative integer, got ${initialSeq}`);
    }
    this.c = initialSeq;
  }

  get seq(): number {
    return this.c;
  }

  get bufferBytes(): number {
    return this.bytes;
  }

  get bufferEntries(): readonly BufferedDelta<P>[] {
    return this.buffer;
  }

  ackOf(peer: string): number {
    return this.acks.get(peer) ?? 0;
  }

  /** Append a delta at seq c and advance c. Returns the new c. */
  append(delta: P, origin: string): number {
    const bytes = this.ops.sizeBytes(delta);
    this.buffer.push({ seq: this.c, delta, origin, bytes });
    this.bytes += bytes;
    this.c++;
    return this.c;
  }

  /**
   * Advance c past a delta no neighbour can need: the partition has none, so the buffer is emptied
   * (it stays contiguous) and nothing is held. A neighbour that appears later starts at ack 0,
   * below the buffer, and gets full state (line 24). Returns the new c and how many deltas went.
   */
  skip(): { c: number; dropped: number } {
    const dropped = this.dropBelow(this.c);
    this.c++;
    return { c: this.c, dropped };
  }

  /** Drop every buffered delta (this node no longer holds them); a neighbour behind c gets full state. */
  clearBuffer(): number {
    return this.dropBelow(this.c);
  }

  /** Append a hole (see above) at seq c and advance c. Returns the new c. */
  appendHole(origin: string): number {
    this.buffer.push({ seq: this.c, delta: this.ops.bottom(), origin, bytes: 0, hole: true });
    this.c++;
    return this.c;
  }

  /**
   * A(j) = max(A(j), n); for a tail push's label, its interval joins A(j) once A(j) reaches where
   * it starts. A label already taken (a repeated ack) or handed back changes nothing. False (and
   * nothing changed) when no such seq or label was sent.
   */
  ack(peer: string, n: number): boolean {
    if (!Number.isSafeInteger(n) || n < 0) return false;
    if (n >= TAIL_LABELS) {
      const tails = this.tails.get(peer);
      const t = tails?.get(n);
      if (t === undefined) return n < this.nextLabel;
      tails!.delete(n);
      this.ackedRangeOrRaise(peer, t.from, t.to);
      return true;
    }
    if (n > this.c) return false;
    this.raiseAck(peer, n);
    return true;
  }

  /** A(j) = max(A(j), n), then every acked range that now joins it. */
  private raiseAck(peer: string, n: number): void {
    let a = Math.max(this.ackOf(peer), n);
    const ranges = this.ackedRanges.get(peer);
    if (ranges !== undefined) {
      // Sorted and apart: the ranges that join A(j) are a prefix.
      let joined = 0;
      while (joined < ranges.length && ranges[joined]![0] <= a) a = Math.max(a, ranges[joined++]![1]);
      ranges.splice(0, joined);
      if (ranges.length === 0) this.ackedRanges.delete(peer);
    }
    if (a > this.ackOf(peer)) this.acks.set(peer, a);
    // Tail pushes ending at or below A(j) no longer matter: an ack of theirs changes nothing.
    const tails = this.tails.get(peer);
    if (tails !== undefined) for (const [label, t] of tails) if (t.to <= a) tails.delete(label);
  }

  /**
   * Everything known of j: its ack, what was sent to it, and that it holds the deltas it sent. A
   * node forgotten because it restarted (perhaps wiped) or dropped the partition no longer holds
   * them, and BP would keep them from it for good: its ack, back at 0, would be raised over them
   * ("advanced") without a byte sent.
   */
  forget(peer: string): void {
    for (let i = 0; i < this.buffer.length; i++) {
      const e = this.buffer[i]!;
      if (e.origin === peer) this.buffer[i] = { ...e, origin: NO_ORIGIN };
    }
    this.acks.delete(peer);
    this.sent.delete(peer);
    this.tails.delete(peer);
    this.ackedRanges.delete(peer);
  }

  /**
   * The tail push to j with this label never reached j (it was not sent, or its send failed): S(j)
   * goes back to where it started, so the next push carries its deltas again instead of leaving
   * them to the next period. Nothing changes once j acked it (its entry is gone).
   */
  tailNotSent(peer: string, label: number): void {
    const tails = this.tails.get(peer);
    const t = tails?.get(label);
    if (t === undefined) return;
    tails!.delete(label);
    // S(j) never reads below A(j) (sentTo), so an ack that passed `from` meanwhile still holds.
    if (t.range !== true && t.from < this.sentTo(peer)) this.sent.set(peer, t.from);
  }

  /** S(j). */
  sentTo(peer: string): number {
    return Math.max(this.sent.get(peer) ?? 0, this.ackOf(peer));
  }

  /** Tail pushes to j in flight (sent, not acked). */
  tailsInFlight(peer: string): number {
    return this.tails.get(peer)?.size ?? 0;
  }

  /**
   * A push of D[from, to) alone to j, for a write asking for copies whose deltas those are, while j
   * waits for a full state (its ack is below the buffer's start: a tail push to it is that state,
   * which can take long and holds the write's copy behind every key of the partition). Labelled
   * like a tail push, its ack is an acknowledged range (holdsRange); S(j) stays, so the deltas are
   * still owed to j's ordinary sends. None when j does not need a full state (the tail push
   * carries the interval), when j holds it or a push of it to j is in flight, when part of it is
   * not buffered or is a hole, or at maxInFlight.
   */
  planRange(peer: string, from: number, to: number, bp: boolean, maxInFlight: number): Alg2Plan<P> {
    const first = this.buffer[0];
    if (first === undefined || first.seq <= this.ackOf(peer) || from < first.seq || to > this.c || from >= to) return { kind: "none" };
    if (this.holdsRange(peer, from, to) || this.tailsInFlight(peer) >= maxInFlight) return { kind: "none" };
    const tails = this.tails.get(peer);
    if (tails !== undefined) for (const t of tails.values()) if (t.range === true && t.from <= from && to <= t.to) return { kind: "none" };
    return this.labelledPush(peer, from, to, bp, true) ?? { kind: "none" };
  }

  /** What to ship to j this period (lines 22-28). Mutates A(j) only in the BP "advanced" case. */
  plan(peer: string, bp: boolean): Alg2Plan<P> {
    const a = this.ackOf(peer);
    if (a >= this.c) return { kind: "none" };
    const first = this.buffer[0];
    if (first === undefined || first.seq > a) return { kind: "state", seq: this.c };
    const parts: P[] = [];
    let held = 0;
    for (let i = a - first.seq; i < this.buffer.length; i++) {
      const e = this.buffer[i]!;
      if (bp && e.origin === peer) {
        held++;
        continue;
      }
      if (e.hole === true) return { kind: "state", seq: this.c };
      parts.push(e.delta);
    }
    if (parts.length === 0) {
      this.raiseAck(peer, this.c);
      return { kind: "advanced", seq: this.c, held };
    }
    this.sent.set(peer, this.c);
    return { kind: "delta", seq: this.c, payload: joinPayloads(this.ops, parts), held };
  }

  /**
   * A tail push to j: the deltas never sent to j, D[S(j), c), with a label as its seq (see the header). None
   * when nothing is new for j or maxInFlight tail pushes to j are unacked; full state (an ordinary
   * plan, acked as one) when j needs it or the interval holds a hole.
   */
  planTail(peer: string, bp: boolean, maxInFlight: number): Alg2Plan<P> {
    const from = this.sentTo(peer);
    if (from >= this.c || this.tailsInFlight(peer) >= maxInFlight) return { kind: "none" };
    const first = this.buffer[0];
    if (first === undefined || first.seq > this.ackOf(peer)) return { kind: "state", seq: this.c };
    const push = this.labelledPush(peer, from, this.c, bp);
    if (push === undefined) return { kind: "state", seq: this.c };
    this.sent.set(peer, this.c);
    return push;
  }

  /**
   * The buffered deltas [from, to) as a push to j under a new label (planTail, planRange; range:
   * planRange's, which S(j) does not count). "advanced" when BP leaves nothing to send: every one
   * came from j, so j holds [from, to), which joins A(j) like an acked push. Undefined when the
   * interval holds a hole: only a full state carries it.
   */
  private labelledPush(peer: string, from: number, to: number, bp: boolean, range?: true): Alg2Plan<P> | undefined {
    const start = this.buffer[0]!.seq;
    const parts: P[] = [];
    let held = 0;
    for (let i = from - start; i < to - start; i++) {
      const e = this.buffer[i]!;
      if (e.hole === true) return undefined;
      if (bp && e.origin === peer) {
        held++;
        continue;
      }
      parts.push(e.delta);
    }
    if (parts.length === 0) {
      this.ackedRangeOrRaise(peer, from, to);
      return { kind: "advanced", seq: this.c, held };
    }
    let tails = this.tails.get(peer);
    if (tails === undefined) this.tails.set(peer, (tails = new Map()));
    const label = this.nextLabel++;
    tails.set(label, range === true ? { from, to, range } : { from, to });
    return { kind: "delta", seq: label, payload: joinPayloads(this.ops, parts), held };
  }

  private ackedRangeOrRaise(peer: string, from: number, to: number): void {
    if (from <= this.ackOf(peer)) return this.raiseAck(peer, to);
    this.addRange(peer, from, to);
  }

  /** Record [from, to) as held by j, merged with the ranges it overlaps or touches. */
  private addRange(peer: string, from: number, to: number): void {
    let ranges = this.ackedRanges.get(peer);
    if (ranges === undefined) this.ackedRanges.set(peer, (ranges = []));
    let i = 0;
    while (i < ranges.length && ranges[i]![1] < from) i++;
    let j = i;
    while (j < ranges.length && ranges[j]![0] <= to) {
      from = Math.min(from, ranges[j]![0]);
      to = Math.max(to, ranges[j]![1]);
      j++;
    }
    ranges.splice(i, j - i, [from, to]);
  }

  /**
   * Whether j holds, durably, every delta in [from, to) (those a write asking for copies buffered
   * there): A(j) reached to, or an acknowledged tail push range covers what lies above A(j). The
   * second does not wait for everything before from: a write asking for copies is not held up by
   * the partition's older backlog to j. An empty interval is held.
   */
  holdsRange(peer: string, from: number, to: number): boolean {
    const lo = Math.max(from, this.ackOf(peer));
    if (lo >= to) return true;
    // Acked ranges are apart from A(j) and from each other: what is above A(j) lies in one or none.
    const ranges = this.ackedRanges.get(peer);
    return ranges !== undefined && ranges.some(([f, t]) => f <= lo && to <= t);
  }

  /** Acked ranges of j waiting for A(j) to reach them (bounded by merging; for tests). */
  pendingRanges(peer: string): number {
    return this.ackedRanges.get(peer)?.length ?? 0;
  }

  /** Lines 29-31: keep only the deltas some current neighbour has not acked. No neighbours: keep none. */
  gc(neighbours: readonly string[]): number {
    let min = this.c;
    for (const j of neighbours) min = Math.min(min, this.ackOf(j));
    return this.dropBelow(min);
  }

  /** Drop the oldest deltas until the buffer fits the budget. Returns how many were dropped. */
  enforceLimit(maxBytes: number): number {
    let dropped = 0;
    while (this.bytes > maxBytes && this.buffer.length > 0) {
      this.bytes -= this.buffer.shift()!.bytes;
      dropped++;
    }
    return dropped;
  }

  private dropBelow(seq: number): number {
    let dropped = 0;
    while (this.buffer.length > 0 && this.buffer[0]!.seq < seq) {
      this.bytes -= this.buffer.shift()!.bytes;
      dropped++;
    }
    return dropped;
  }
}
