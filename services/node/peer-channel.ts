// The options of every channel a node opens to a peer (gossip, membership, forwarded calls): the
// interceptors that sign peer calls and the forwarding marks with the cluster key, and how soon a failed connection is
// tried again. gRPC's default waits 1 s after a failed attempt, growing 1.6x to 120 s, and calls
// to the peer fail at once while it waits: one connection reset met while reconnecting cost every
// call to that peer about a second, far longer than a gossip period.
import type * as grpc from "@grpc/grpc-js";

export interface PeerReconnect {
  /** Wait after the first failed attempt (ms); 1.6x longer after each failure in a row. */
  initialMs: number;
  /** Longest wait between attempts (ms). */
  maxMs: number;
}

export function peerChannelOptions(signers: grpc.Interceptor[], reconnect: PeerReconnect): grpc.ChannelOptions {
  return {
    interceptors: signers,
    "grpc.initial_reconnect_backoff_ms": reconnect.initialMs,
    "grpc.max_reconnect_backoff_ms": reconnect.maxMs,
    // No channelz bookkeeping (see serverOptions): nothing here serves it.
    "grpc.enable_channelz": 0,
  };
}
