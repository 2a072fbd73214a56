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

export function activeCalls(): ActiveCalls {
  const running = new Set<{ cut?: (details: string) => void }>();
  let closed = false;
  return {
    enter: (cut) => {
      const entry = { cut };
      running.add(entry);
      return () => void running.delete(entry);
    },
    count: () => running.size,
    close: () => void (closed = true),
    get closed() {
      return closed;
    },
    cutAll: (details) => {
      for (const e of [...running]) {
        if (e.cut === undefined) continue;
        running.delete(e);
        e.cut(details);
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
