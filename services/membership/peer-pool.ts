// One gRPC client (one channel) per peer address, reused for every call to that peer and closed
// when the address is no longer in the view. Reconnect backoff is capped near the probe interval so
// that a restarted peer is reachable again within a probe or two (grpc-js defaults go up to 120 s).
// A peer may be dialed at another address than its own (a per-link fault proxy); the pool still
// keys clients by the peer's address.
import { credentials as grpcCredentials, type ChannelCredentials, type ChannelOptions } from "@grpc/grpc-js";
import { hostOf } from "../common/host-port.js";
import type { MembershipClient } from "../gen/deltaset/v1/membership.js";
import { PeerMembershipClient } from "../client/peer-clients.js";

export class PeerPool {
  private readonly clients = new Map<string, { client: MembershipClient; dialed: string }>();
  private readonly credentials: ChannelCredentials;
  private readonly secure: boolean;
  private readonly options: ChannelOptions;

  constructor(credentials: ChannelCredentials | undefined, reconnectMaxMs: number, options: ChannelOptions = {}) {
    this.secure = credentials !== undefined;
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

  /** The client for the peer at `address`, connected to `dialed` (default: the address itself). */
  client(address: string, dialed: string = address): MembershipClient {
    const known = this.clients.get(address);
    if (known && known.dialed === dialed) return known.client;
    known?.client.close();
    // Through a proxy, the peer's certificate still names its advertised host.
    const options = this.secure && dialed !== address
      ? { ...this.options, "grpc.ssl_target_name_override": hostOf(address) }
      : this.options;
    const client = new PeerMembershipClient(dialed, this.credentials, options);
    this.clients.set(address, { client, dialed });
    return client;
  }

  /** Close the clients of addresses not in `keep`. */
  prune(keep: ReadonlySet<string>): void {
    for (const [address, { client }] of this.clients) {
      if (keep.has(address)) continue;
      client.close();
      this.clients.delete(address);
    }
  }

  closeAll(): void {
    this.prune(new Set());
  }
}
