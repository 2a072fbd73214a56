// Client calls that arrive before the node opens answer UNAVAILABLE, as its health service says
// NOT_SERVING meanwhile. The server is bound before the node's parts start (peers must reach it to
// answer its join), and until its first join through the seeds has ended a node knows no other
// member: it took every key for its own and answered reads of keys others own as absent (outside
// check: 6 of 15 restarts answered a read OK and empty in the 10-37 ms before the join). Once open,
// client calls are held the same way while the node is alone and its seeds refuse it as a peer
// (UNAUTHENTICATED: its cluster key or certificate): writes it took then would stay on it, out of
// every other node's reach.
import * as grpc from "@grpc/grpc-js";
import { type AnyHandler, wrapHandlers } from "./wrap-handlers.js";

const STARTING = { code: grpc.status.UNAVAILABLE, details: "node is starting: it answers once it has joined the cluster (retry, or call another node)" };

export class StartGate {
  private isOpen = false;
  /** What a call is answered while the node, open, holds client calls (its seeds refuse it as a peer); undefined: it does not. */
  private held: { code: grpc.status; details: string } | undefined;

  /** From now on calls go through (unless held). */
  open(): void {
    this.isOpen = true;
  }

  get opened(): boolean {
    return this.isOpen;
  }

  /** Whether client calls go through now. */
  get serving(): boolean {
    return this.isOpen && this.held === undefined;
  }

  /** Hold client calls for this reason, or (undefined) let them through again. */
  hold(reason: string | undefined): void {
    this.held = reason === undefined ? undefined : { code: grpc.status.UNAVAILABLE, details: `this node is in no cluster: ${reason}; it answers no client call until it joins (call another node)` };
  }

  /** What a call that may not go through is answered. */
  private get refusal(): { code: grpc.status; details: string } {
    return (this.isOpen ? this.held : undefined) ?? STARTING;
  }

  /** The service's handlers, each refusing until open. */
  wrap<S extends object>(definition: grpc.ServiceDefinition, impl: S): S {
    return wrapHandlers(definition, impl, (method, handler) => {
      const h = handler as (...args: unknown[]) => unknown;
      // A call whose answer streams has no callback (Scan, Export, Watch, AddStream); a unary or
      // client-streaming one answers through its callback (Add, Import).
      const gated = method.responseStream
        ? (call: grpc.ServerWritableStream<unknown, unknown>) => (this.serving ? h(call) : call.emit("error", this.refusal))
        : (call: unknown, callback: grpc.sendUnaryData<unknown>) => (this.serving ? h(call, callback) : callback(this.refusal));
      return gated as AnyHandler;
    });
  }
}
