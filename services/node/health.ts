// grpc.health.v1.Health for a node: Check, Watch and List over a fixed set of service names (the
// node's own, and "" for the whole node). The stock implementation (grpc-health-check) keeps a
// watcher set under every name a Watch asks for and never drops it, so anyone reaching the port
// could grow the node's memory without end by watching ever new (and large) names. Here a name
// outside the set is answered SERVICE_UNKNOWN (Watch, which the set never grows to include) or
// NOT_FOUND (Check) and nothing is kept for it.
import type * as grpc from "@grpc/grpc-js";
import { status as grpcStatus } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";

export type ServingStatus = "SERVING" | "NOT_SERVING";

/** The most characters of an unknown service name echoed in an error. */
const NAME_ECHO = 100;

export class NodeHealth {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Map<string, Set<(s: ServingStatus) => void>>();
  /** Every open Watch, known name or not, to end when the node stops. */
  private readonly open = new Set<(details: string) => void>();

  constructor(names: readonly string[], initial: ServingStatus) {
    for (const n of names) {
      this.statuses.set(n, initial);
      this.watchers.set(n, new Set());
    }
  }

  /** Set a known name's status and tell its watchers; an unknown name is a programming error. */
  setStatus(name: string, status: ServingStatus): void {
    if (!this.statuses.has(name)) throw new Error(`health: unknown service name ${name}`);
    this.statuses.set(name, status);
    for (const w of this.watchers.get(name)!) w(status);
  }

  /**
   * End every open Watch with UNAVAILABLE (the node is stopping): a watch never ends by itself,
   * and a stopping node waits for its running calls.
   */
  endWatches(details: string): void {
    this.endDetails = details;
    for (const end of [...this.open]) end(details);
  }

  /** Set once the node stops: a Watch opened after that is refused with it. */
  private endDetails: string | undefined;

  /** Watchers now open, across every name (tests and metrics). */
  get watching(): number {
    let n = 0;
    for (const s of this.watchers.values()) n += s.size;
    return n;
  }

  addToServer(server: grpc.Server): void {
    server.addService(healthService as unknown as grpc.ServiceDefinition, {
      check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const status = this.statuses.get(call.request.service);
        if (status !== undefined) return callback(null, { status });
        callback({ code: grpcStatus.NOT_FOUND, details: `health status unknown for service ${call.request.service.slice(0, NAME_ECHO)}` });
      },
      watch: (call: grpc.ServerWritableStream<{ service: string }, unknown>) => {
        const unavailable = (details: string) => ({ code: grpcStatus.UNAVAILABLE, details });
        if (this.endDetails !== undefined) return call.emit("error", unavailable(this.endDetails));
        const name = call.request.service;
        const set = this.watchers.get(name);
        const w = (status: ServingStatus) => call.write({ status });
        const end = (details: string) => {
          forget();
          call.emit("error", unavailable(details));
        };
        const forget = () => {
          set?.delete(w);
          this.open.delete(end);
        };
        this.open.add(end);
        call.on("cancelled", forget);
        if (set === undefined) {
          call.write({ status: "SERVICE_UNKNOWN" });
          return;
        }
        set.add(w);
        call.write({ status: this.statuses.get(name) });
      },
      list: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        callback(null, { statuses: Object.fromEntries([...this.statuses].map(([n, status]) => [n, { status }])) });
      },
    });
  }
}
