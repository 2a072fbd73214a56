// gRPC clients for peer calls (Gossip, Membership) whose response decoder remembers the SHA-256 of
// the exact bytes each reply arrived in, so a peer's signed reply (node/peer-proof.ts) is checked
// against what the peer sent, even when the reply carries fields this build does not know.
import { createHash } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { GossipClient, GossipService } from "../gen/deltaset/v1/gossip.js";
import { MembershipClient, MembershipService } from "../gen/deltaset/v1/membership.js";

const replyDigests = new WeakMap<object, string>();

/** SHA-256 (hex) of the bytes a decoded reply arrived in; undefined when not decoded here. */
export function receivedReplyDigest(reply: object): string | undefined {
  return replyDigests.get(reply);
}

function withReplyDigests<D extends Record<string, { responseDeserialize: (b: Buffer) => any }>>(definition: D): D {
  const out: Record<string, unknown> = {};
  for (const [name, d] of Object.entries(definition)) {
    out[name] = {
      ...d,
      responseDeserialize: (bytes: Buffer) => {
        const m = d.responseDeserialize(bytes);
        if (typeof m === "object" && m !== null) replyDigests.set(m, createHash("sha256").update(bytes).digest("hex"));
        return m;
      },
    };
  }
  return out as D;
}

/** A Gossip client whose replies' digests are remembered. */
export const PeerGossipClient = grpc.makeGenericClientConstructor(withReplyDigests(GossipService), "deltaset.v1.Gossip") as unknown as typeof GossipClient;
/** A Membership client whose replies' digests are remembered. */
export const PeerMembershipClient = grpc.makeGenericClientConstructor(withReplyDigests(MembershipService), "deltaset.v1.Membership") as unknown as typeof MembershipClient;
