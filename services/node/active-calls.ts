// Counts the calls a server is running, so that shutdown can wait for calls rather than for
// connections: an idle client connection (even a TCP connection that never spoke HTTP/2) would
// otherwise hold a graceful shutdown until its timeout. The server's first interceptor
// (strict-strings.ts) calls enter() for each client call (peer calls are not counted: a node stops
// gossiping after its client calls end, and peers' gossip streams would hold it up) and the
// returned end() when the call ends (its status sent, or cancelled): one interceptor layer for
// both jobs, since each layer costs every call a few microseconds.

export interface ActiveCalls {
  /** A call started; call the returned function (any number of times) when it ends. */
  enter(): () => void;
  count(): number;
}

export function activeCalls(): ActiveCalls {
  let active = 0;
  return {
    enter: () => {
      active++;
      let ended = false;
      return () => {
        if (!ended) {
          ended = true;
          active--;
        }
      };
    },
    count: () => active,
  };
}
