// Watch streams for tests: a running Watch call over gRPC (integration tests), and a stand-in for
// the server side of one (unit tests that call the handler itself).
import { EventEmitter } from "node:events";
import type * as grpc from "@grpc/grpc-js";
import type { KeyEvent, WatchKeysRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { replicaClient } from "../../services/client/rpc.ts";

/** A running watch through address: its events as they come, and how it ended. */
export function watchStream(address: string, req: Partial<WatchKeysRequest>) {
  const client = replicaClient(address);
  const events: KeyEvent[] = [];
  const stream = client.watch({ key: "", prefix: "", since: undefined, ...req });
  const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
    stream.on("data", (e: KeyEvent) => events.push(e));
    stream.on("error", (e: grpc.ServiceError) => resolve(e));
    stream.on("end", () => resolve(undefined));
  });
  return { events, stream, ended, close: () => (stream.cancel(), client.close()) };
}

/**
 * The server side of a Watch call, for its handler: it keeps the events written and the error the
 * watch ended with. A slow one asks to wait after every event, until drain() is called.
 */
export class WatchCallStandIn extends EventEmitter {
  events: KeyEvent[] = [];
  error: { code?: number; details?: string } | undefined;
  constructor(
    readonly request: WatchKeysRequest,
    private readonly slow = false,
  ) {
    super();
    this.on("error", (e) => (this.error = e));
  }
  write(e: KeyEvent): boolean {
    this.events.push(e);
    return !this.slow;
  }
  end() {}
  drain() {
    this.emit("drain");
  }
}
