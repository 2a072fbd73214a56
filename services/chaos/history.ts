// The history of a chaos run: every client operation with its wall-clock invocation and
// completion times and its outcome, as a Jepsen-style checker reads it.
//
// Outcomes: "ok" (acknowledged), "fail" (the node refused it, so it did not happen: invalid
// argument and the like) and "info" (indeterminate: a timeout or a broken connection; it may or
// may not have taken effect, now or later).

export type Outcome = "ok" | "fail" | "info";

/** A causal context as inclusive counter ranges per replica id. */
export type ContextRanges = Record<string, Array<[number, number]>>;

interface OpBase {
  /** Position in the history (invocation order). */
  index: number;
  client: string;
  /** The node the call went to (its id). */
  node: string;
  key: string;
  /** Unix milliseconds. */
  start: number;
  end: number;
  outcome: Outcome;
  /** The error of a failed or indeterminate call. */
  error?: string;
}

/** Add(key, [element]); an acknowledged add carries the dot it minted ("replica:counter"). */
export interface AddOp extends OpBase {
  kind: "add";
  element: string;
  dots: string[];
}

/** Query(key, elements): which of them the node held, and its context. */
export interface ReadOp extends OpBase {
  kind: "read";
  elements: string[];
  present: boolean[];
}

/**
 * Remove(key, [element], context): the context of the read that saw the element. `removed` is
 * the node's answer (1: the element is gone from that node; 0: it removed nothing or not all of
 * its dots), null when not acknowledged.
 */
export interface RemoveOp extends OpBase {
  kind: "remove";
  element: string;
  context: ContextRanges;
  removed: number | null;
  /**
   * Elements the node deferred the remove for (its context covers adds not yet received there:
   * they are removed on arrival); 0 or absent when nothing was deferred, null when not acknowledged.
   */
  pending?: number | null;
  /** The node whose read supplied the context. */
  readNode: string;
}

export type Op = AddOp | ReadOp | RemoveOp;

/** The elements of every key as each node returned them in the final read; null: unreadable. */
export type FinalReads = Record<string, Record<string, string[]> | null>;

/** Collects operations as clients complete them. */
export class HistoryRecorder {
  private readonly list: Op[] = [];
  private next = 0;

  /** Reserve a position at invocation time (history order is invocation order). */
  invoke(): number {
    return this.next++;
  }

  record(op: Op): void {
    this.list.push(op);
  }

  /** The operations sorted by invocation. */
  ops(): Op[] {
    return [...this.list].sort((a, b) => a.index - b.index);
  }

  get size(): number {
    return this.list.length;
  }
}
