// Writes waiting for copies (a client's write concern, `copies` on the Replica service's writes).
// A local change of partition p enters the delta buffer at some seq; under Algorithm 2 a
// neighbour's ack n for p promises that it holds, durably, every delta of p below n, and its ack
// of a tail push the deltas that push carried (acks go out only after the join is on disk:
// engine.ts, Alg2Partition.holds). Each waiter is checked when acks of its partition arrive and
// answers once enough neighbours hold its seq, or at its deadline with how many did.
// Pure: the ack table and the timers are handed in.

/** A timer that calls fn after ms; returns its cancel. */
export type SetTimer = (ms: number, fn: () => void) => () => void;

interface Waiter {
  seq: number;
  need: number;
  done: (held: number) => void;
}

export class CopyWaiters {
  private readonly waiting = new Map<number, Set<Waiter>>();

  constructor(
    /** How many of partition p's neighbours hold the change that took seq. */
    private readonly heldBy: (partition: number, seq: number) => number,
    private readonly setTimer: SetTimer,
  ) {}

  /**
   * Resolves with how many neighbours hold partition p up to seq: as soon as need do, or after
   * timeoutMs with however many did then (fewer than need).
   */
  wait(partition: number, seq: number, need: number, timeoutMs: number): Promise<number> {
    const now = this.heldBy(partition, seq);
    if (now >= need || timeoutMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      let set = this.waiting.get(partition);
      if (set === undefined) this.waiting.set(partition, (set = new Set()));
      const w: Waiter = {
        seq,
        need,
        done: (held) => {
          cancel();
          this.drop(partition, w);
          resolve(held);
        },
      };
      const cancel = this.setTimer(timeoutMs, () => w.done(this.heldBy(partition, seq)));
      set.add(w);
    });
  }

  /** Acks of these partitions arrived: answer the waiters they satisfy. */
  acked(partitions: Iterable<number>): void {
    for (const p of partitions) {
      const set = this.waiting.get(p);
      if (set === undefined) continue;
      for (const w of [...set]) {
        const held = this.heldBy(p, w.seq);
        if (held >= w.need) w.done(held);
      }
    }
  }

  /** Answer every waiter now with what it has (the node stops). */
  endAll(): void {
    for (const [p, set] of this.waiting) for (const w of [...set]) w.done(this.heldBy(p, w.seq));
  }

  /** Writes waiting (a gauge). */
  get size(): number {
    let n = 0;
    for (const set of this.waiting.values()) n += set.size;
    return n;
  }

  private drop(partition: number, w: Waiter): void {
    const set = this.waiting.get(partition);
    if (set === undefined) return;
    set.delete(w);
    if (set.size === 0) this.waiting.delete(partition);
  }
}
