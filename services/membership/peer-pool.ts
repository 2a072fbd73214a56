// One gRPC client (one channel) per peer address, reused for every call to that peer and closed
// when the address is no longer in the view. Reconnect backoff is capped near the probe interval so
// that a restarted peer is reachable again within a probe or two (grpc-js defaults go up to 120 s).
import { credentials as grpcCredentials, type ChannelCredentials, type ChannelOptions } from "@grpc/grpc-js";
import { MembershipClient } from "../gen/deltaset/v1/membership.js";

export class PeerPool {
  private readonly clients = new Map<string, MembershipClient>();
  private readonly credentials: ChannelCredentials;
  private readonly options: ChannelOptions;

  constructor(credentials: ChannelCredentials | undefined, reconnectMaxMs: number, options: ChannelOptions = {}) {
    this.credentials = credentials ?? grpcCredentials.createInsecure();
    this.options = {
      "grpc.initial_reconnect_backoff_ms": Math.min(100, reconnectMaxMs),
      "grpc.max_reconnect_backoff_ms": reconnectMaxMs,
      ...options,
    };
  }

  get size(): number {
    return this.clients.size;
  }

  client(address: string): MembershipClient {
    let client = this.clients.get(address);
    if (!client) {
      client = new MembershipClient(address, this.credentials, this.options);
      this.clients.set(address, client);
    }
    return client;
  }

  /** Close the clients of addresses not in `keep`. */
  prune(keep: ReadonlySet<string>): void {
    for (const [address, client] of this.clients) {
      if (keep.has(address)) continue;
      client.close();
      this.clients.delete(address);
    }
  }

  closeAll(): void {
    this.prune(new Set());
  }
}
