// A binary min-heap under a caller's strict ordering. The simulators queue timed actions and
// in-flight messages with it; callers break ties (an insertion counter) so that equal times come
// out in a deterministic order.

export class MinHeap<T> {
  private readonly items: T[] = [];

  /** `less(a, b)`: a comes out before b. */
  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  /** The least item, left in place, or undefined. */
  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const h = this.items;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  /** Take out the least item, or undefined. */
  pop(): T | undefined {
    const h = this.items;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }

  /** Keep only the items `keep` accepts; returns how many were removed. */
  retain(keep: (item: T) => boolean): number {
    const kept = this.items.filter(keep);
    const removed = this.items.length - kept.length;
    this.items.length = 0;
    for (const item of kept) this.push(item);
    return removed;
  }
}
