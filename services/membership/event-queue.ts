// A min-heap of timed actions for the discrete-event simulator: ordered by time, then by insertion
// so that equal times run in a deterministic order.

interface Item {
  at: number;
  seq: number;
  run: () => void;
}

export class EventQueue {
  private readonly heap: Item[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(at: number, run: () => void): void {
    const item = { at, seq: this.seq++, run };
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  /** Time of the earliest action, or Infinity. */
  peekTime(): number {
    return this.heap.length > 0 ? this.heap[0]!.at : Infinity;
  }

  pop(): Item | undefined {
    const heap = this.heap;
    if (heap.length === 0) return undefined;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && before(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && before(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  }
}

function before(a: Item, b: Item): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
