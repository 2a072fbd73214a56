// Writes waiting for copies (a client's write concern, `copies` on the Replica service's writes).
// A write's local changes of partition p enter the delta buffer at seqs inside an interval
// [from, to) known to the writer (the partition's c before the write and once it was buffered);
// under Algorithm 2 a neighbour's ack n for p promises that it holds, durably, every delta of p
// below n, and its ack of a tail push the deltas that push carried (acks go out only after the
// join is on disk: engine.ts, Alg2Partition.holdsRange). Each waiter is checked when acks of its
// partition arrive and answers once enough neighbours hold its interval, or at its deadline with
// how many did.
// Pure: the ack table and the timers are handed in.

/** A timer that calls fn after ms; returns its cancel. */
export type SetTimer = (ms: number, fn: () => void) => () => void;

interface Waiter {
  from: number;
  to: number;
  need: number;
  done: (held: number) => void;
}

export class CopyWaiters {
  private readonly waiting = new Map<number, Set<Waiter>>();

  constructor(
    /** How many of partition p's neighbours hold its deltas [from, to). */
    private readonly heldBy: (partition: number, from: number, to: number) => number,
    private readonly setTimer: SetTimer,
  ) {}

  /**
   * Resolves with how many neighbours hold partition p's deltas [from, to): as soon as need do,
   * or after timeoutMs with however many did then (fewer than need).
   */
  wait(partition: number, from: number, to: number, need: number, timeoutMs: number): Promise<number> {
    const now = this.heldBy(partition, from, to);
    if (now >= need || timeoutMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      let set = this.waiting.get(partition);
      if (set === undefined) this.waiting.set(partition, (set = new Set()));
      const w: Waiter = {
        from,
        to,
        need,
        done: (held) => {
          cancel();
          this.drop(partition, w);
          resolve(held);
        },
      };
      const cancel = this.setTimer(timeoutMs, () => w.done(this.heldBy(partition, from, to)));
      set.add(w);
    });
  }

  /** Acks of these partitions arrived: answer the waiters they satisfy. */
  acked(partitions: Iterable<number>): void {
    for (const p of partitions) {
      const set = this.waiting.get(p);
      if (set === undefined) continue;
      for (const w of [...set]) {
        const held = this.heldBy(p, w.from, w.to);
        if (held >= w.need) w.done(held);
      }
    }
  }

  /** Answer every waiter now with what it has (the node stops). */
  endAll(): void {
    for (const [p, set] of this.waiting) for (const w of [...set]) w.done(this.heldBy(p, w.from, w.to));
  }

  /** The intervals waited for, per partition (a push sends them to neighbours catching up). */
  intervals(): Array<{ partition: number; from: number; to: number }> {
    const out: Array<{ partition: number; from: number; to: number }> = [];
    for (const [partition, set] of this.waiting) for (const w of set) out.push({ partition, from: w.from, to: w.to });
    return out;
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
