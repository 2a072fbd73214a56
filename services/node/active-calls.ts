// Counts the calls a server is running, so that shutdown can wait for calls rather than for
// connections: an idle client connection (even a TCP connection that never spoke HTTP/2) would
// otherwise hold a graceful shutdown until its timeout.
import * as grpc from "@grpc/grpc-js";

export interface ActiveCalls {
  /** Install first among the server's interceptors. */
  interceptor: grpc.ServerInterceptor;
  count(): number;
}

export function activeCalls(): ActiveCalls {
  let active = 0;
  const interceptor: grpc.ServerInterceptor = (_method, call) => {
    active++;
    let ended = false;
    const end = () => {
      if (!ended) {
        ended = true;
        active--;
      }
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => next({ onCancel: () => end() }),
      sendStatus: (status, next) => {
        end();
        next(status);
      },
    });
  };
  return { interceptor, count: () => active };
}
