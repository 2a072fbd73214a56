// Naming the node a peer call is meant for. The node's signer (node/peer-interceptors.ts) puts the
// name into the call's proof, so a proof captured on its way to one node is refused by any other;
// the metadata entry itself is taken off before the call leaves. A call that names no receiver (a
// Join to a seed address, whose node id is not known yet) is taken only by Join.
import * as grpc from "@grpc/grpc-js";

/** Metadata naming the receiver's node id, read (and removed) by the signer. */
export const RECEIVER_HEADER = "deltaset-peer-to";

/** Metadata for a call to node `nodeId`. */
export function receiverMetadata(nodeId: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(RECEIVER_HEADER, nodeId);
  return md;
}

/** A client interceptor naming `nodeId` as the receiver of every call of its channel (place it before the signer). */
export function addressedTo(nodeId: string): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set(RECEIVER_HEADER, nodeId);
        next(metadata, listener);
      },
    });
}
