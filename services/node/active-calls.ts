// Counts the client calls a server is running, so that a stopping node can wait for calls rather
// than for connections (an idle client connection, even a TCP connection that never spoke HTTP/2,
// would otherwise hold a graceful shutdown until its timeout), and refuses new client calls once
// it stops while it keeps answering its peers: pings answered during the drain keep the cluster
// from suspecting a node that is only finishing its calls, before it announces its leave.
// The server (strict-strings.ts) calls enter() for each client call (peer calls are not counted:
// a node stops gossiping after its client calls end, and peers' gossip streams would hold it up)
// and the returned end() when the call ends (answered, or cancelled): a unary call in its
// handler's guard, a stream in the server's first interceptor, which does both jobs in one layer
// since each layer costs every call microseconds.

export interface ActiveCalls {
  /**
   * A call started; call the returned function (any number of times) when it ends. `cut` ends the
   * call from the server side (cutAll), with the reason given.
   */
  enter(cut?: (details: string) => void): () => void;
  count(): number;
  /** From now on new client calls are refused (the node is stopping). */
  close(): void;
  readonly closed: boolean;
  /** End every running call that can be cut, with this reason. */
  cutAll(details: string): void;
}

/** A running call, linked to its neighbours while it runs. */
interface Running {
  cut?: (details: string) => void;
  prev: Running | undefined;
  next: Running | undefined;
  ended: boolean;
}

export function activeCalls(): ActiveCalls {
  // Every call enters and leaves, so the calls running are a list whose ended entries are unlinked
  // and point nowhere: not a Set, whose old backing stores would keep every call alive through
  // young-generation collections once a full collection has promoted the Set (common/key-table.ts).
  let head: Running | undefined;
  let count = 0;
  let closed = false;
  const unlink = (e: Running) => {
    if (e.ended) return;
    e.ended = true;
    if (e.prev === undefined) head = e.next;
    else e.prev.next = e.next;
    if (e.next !== undefined) e.next.prev = e.prev;
    e.prev = e.next = undefined;
    count--;
  };
  return {
    enter: (cut) => {
      const e: Running = { cut, prev: undefined, next: head, ended: false };
      if (head !== undefined) head.prev = e;
      head = e;
      count++;
      return () => unlink(e);
    },
    count: () => count,
    close: () => void (closed = true),
    get closed() {
      return closed;
    },
    cutAll: (details) => {
      const cuttable: Running[] = [];
      for (let e = head; e !== undefined; e = e.next) if (e.cut !== undefined) cuttable.push(e);
      for (const e of cuttable) {
        if (e.ended) continue;
        unlink(e);
        e.cut!(details);
      }
    },
  };
}

/**
 * Wait until no client call runs, or timeoutMs passed: then the calls still running are cut
 * ("forced"). Checked every pollMs.
 */
export function drainCalls(calls: ActiveCalls, timeoutMs: number, pollMs = 50): Promise<"drained" | "forced"> {
  return new Promise((resolve) => {
    const started = Date.now();
    const check = () => {
      if (calls.count() === 0) return resolve("drained");
      if (Date.now() - started >= timeoutMs) {
        calls.cutAll("the node is stopping: its drain time (--drain-timeout-ms) ran out; this call may or may not have taken effect");
        return resolve("forced");
      }
      setTimeout(check, pollMs);
    };
    check();
  });
}
