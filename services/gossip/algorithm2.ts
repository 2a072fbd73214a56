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
import { type PayloadOps, joinPayloads } from "./payload.js";

export interface BufferedDelta<P> {
  readonly seq: number;
  readonly delta: P;
  /** Node the delta came from (this node for local operations). */
  readonly origin: string;
  readonly bytes: number;
  /** Something new arrived here that is not held in delta: only a full state carries it. */
  readonly hole?: boolean;
}

export type Alg2Plan<P> =
  | { kind: "none" }
  | { kind: "state"; seq: number }
  /** held: deltas BP kept back because they came from the target. */
  | { kind: "delta"; seq: number; payload: P; held: number }
  /** BP left nothing to send: every unacked delta came from the target; its ack was advanced. */
  | { kind: "advanced"; seq: number; held: number };

export class Alg2Partition<P> {
  private c: number;
  private readonly buffer: BufferedDelta<P>[] = [];
  private bytes = 0;
  private readonly acks = new Map<string, number>();

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

  /** Append a hole (see above) at seq c and advance c. Returns the new c. */
  appendHole(origin: string): number {
    this.buffer.push({ seq: this.c, delta: this.ops.bottom(), origin, bytes: 0, hole: true });
    this.c++;
    return this.c;
  }

  /** A(j) = max(A(j), n). False (and nothing changed) when n is beyond c: no such seq was sent. */
  ack(peer: string, n: number): boolean {
    if (!Number.isSafeInteger(n) || n < 0 || n > this.c) return false;
    if (n > this.ackOf(peer)) this.acks.set(peer, n);
    return true;
  }

  forget(peer: string): void {
    this.acks.delete(peer);
  }

  /** c - A(j): how many deltas the neighbour has not acknowledged. */
  lagOf(peer: string): number {
    return this.c - this.ackOf(peer);
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
      this.acks.set(peer, this.c);
      return { kind: "advanced", seq: this.c, held };
    }
    return { kind: "delta", seq: this.c, payload: joinPayloads(this.ops, parts), held };
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
