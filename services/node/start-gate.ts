// Client calls that arrive before the node opens answer UNAVAILABLE, as its health service says
// NOT_SERVING meanwhile. The server is bound before the node's parts start (peers must reach it to
// answer its join), and until its first join through the seeds has ended a node knows no other
// member: it took every key for its own and answered reads of keys others own as absent (outside
// check: 6 of 15 restarts answered a read OK and empty in the 10-37 ms before the join).
import * as grpc from "@grpc/grpc-js";
import { type AnyHandler, wrapHandlers } from "./wrap-handlers.js";

const STARTING = { code: grpc.status.UNAVAILABLE, details: "node is starting: it answers once it has joined the cluster (retry, or call another node)" };

export class StartGate {
  private isOpen = false;

  /** From now on calls go through. */
  open(): void {
    this.isOpen = true;
  }

  /** The service's handlers, each refusing until open. */
  wrap<S extends object>(definition: grpc.ServiceDefinition, impl: S): S {
    return wrapHandlers(definition, impl, (method, handler) => {
      const h = handler as (...args: unknown[]) => unknown;
      // A call whose answer streams has no callback (Scan, Export, Watch, AddStream); a unary or
      // client-streaming one answers through its callback (Add, Import).
      const gated = method.responseStream
        ? (call: grpc.ServerWritableStream<unknown, unknown>) => (this.isOpen ? h(call) : call.emit("error", STARTING))
        : (call: unknown, callback: grpc.sendUnaryData<unknown>) => (this.isOpen ? h(call, callback) : callback(STARTING));
      return gated as AnyHandler;
    });
  }
}
