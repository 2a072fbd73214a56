// The records queued in a group commit and not yet durable, as reads see them: the latest queued
// record of each key.
//
// Records are kept in generations: a Map per flush, filled until the flush that takes it starts
// (seal), then dropped whole once every operation in it is durable. No record is ever deleted
// from a Map. One long-lived Map with an entry added and deleted per record moves to a new backing
// store every few records, and once a full collection has moved it to the old generation, the
// stores it leaves there keep every record that passed through it alive through young-generation
// collections, so all of them are promoted (common/key-table.ts says how). A generation's Map only
// grows, and what it leaves behind dies with it.
import type { BatchOp } from "./db.js";

/** One generation: its records by latin1 key, its operations, and how many are not yet durable. */
export interface OverlayGeneration {
  readonly records: Map<string, BatchOp>;
  operations: number;
  waiting: number;
}

export class WriteOverlay {
  /** Oldest first; the last one takes new records. */
  private generations: OverlayGeneration[] = [{ records: new Map(), operations: 0, waiting: 0 }];

  /** Queue one operation's records (keys in latin1); pass the generation returned to durable(). */
  add(keys: readonly string[], ops: readonly BatchOp[]): OverlayGeneration {
    const g = this.generations[this.generations.length - 1]!;
    for (let i = 0; i < ops.length; i++) g.records.set(keys[i]!, ops[i]!);
    g.operations++;
    g.waiting++;
    return g;
  }

  /** The latest queued record of a key (latin1), or undefined. */
  get(key: string): BatchOp | undefined {
    const gs = this.generations;
    for (let i = gs.length - 1; i >= 0; i--) {
      const op = gs[i]!.records.get(key);
      if (op !== undefined) return op;
    }
    return undefined;
  }

  /** A flush takes what is queued: later records go to a new generation. */
  seal(): void {
    const last = this.generations[this.generations.length - 1]!;
    if (last.records.size > 0) this.generations.push({ records: new Map(), operations: 0, waiting: 0 });
  }

  /**
   * An operation of generation g is durable. Generations are dropped from the oldest while all
   * their operations are: flushes end in order, and a newer generation's record of a key must not
   * be dropped while an older one's, which it replaced, is still read.
   */
  durable(g: OverlayGeneration): void {
    g.waiting--;
    const gs = this.generations;
    while (gs.length > 1 && gs[0]!.waiting === 0) gs.shift();
  }

  /** Generations held (the one taking records among them). */
  get generationCount(): number {
    return this.generations.length;
  }
}
