// Timed actions for the discrete-event simulator: ordered by time, then by insertion so that equal
// times run in a deterministic order.
import { MinHeap } from "../common/min-heap.js";

interface Item {
  at: number;
  seq: number;
  run: () => void;
}

export class EventQueue {
  private readonly heap = new MinHeap<Item>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq));
  private seq = 0;

  get size(): number {
    return this.heap.size;
  }

  push(at: number, run: () => void): void {
    this.heap.push({ at, seq: this.seq++, run });
  }

  /** Time of the earliest action, or Infinity. */
  peekTime(): number {
    return this.heap.peek()?.at ?? Infinity;
  }

  pop(): Item | undefined {
    return this.heap.pop();
  }
}
