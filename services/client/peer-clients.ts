// gRPC clients for peer calls (Gossip, Membership) whose response decoder remembers the exact bytes
// each reply arrived in, so a peer's signed reply (node/peer-proof.ts) is checked against what the
// peer sent, even when the reply carries fields this build does not know. The SHA-256 is taken
// only when asked for, which happens only with a cluster key.
import { createHash } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { GossipClient, GossipService } from "../gen/deltaset/v1/gossip.js";
import { MembershipClient, MembershipService } from "../gen/deltaset/v1/membership.js";
import { withoutTrailingMac } from "../common/trailing-mac.js";

/**
 * ExchangeStream's messages and PushState's chunks carry their own MAC as their last field
 * (GossipFrame.mac = 9, GossipReply.mac = 6, StateChunk.mac = 20): their digest leaves it out,
 * since the MAC covers the rest. PushState's one reply is signed in a trailer (no field).
 */
const TRAILING_MAC_FIELD: Record<string, { requestDeserialize?: number; responseDeserialize?: number }> = {
  [GossipService.exchangeStream.path]: { requestDeserialize: 9, responseDeserialize: 6 },
  [GossipService.pushState.path]: { requestDeserialize: 20 },
};

/** The field of a method's messages that carries their MAC last (see TRAILING_MAC_FIELD), by direction. */
export function trailingMacField(path: string, direction: "request" | "response"): number | undefined {
  return TRAILING_MAC_FIELD[path]?.[direction === "request" ? "requestDeserialize" : "responseDeserialize"];
}

/**
 * Encodings already made of messages about to be sent, keyed by the message object. Signing a
 * peer message needs its bytes (the proof or MAC covers them); the serializer of a definition
 * wrapped by withSentEncodings takes them from here instead of encoding the message a second time
 * (a gossip frame carries every delta of its period: encoding it was most of sending it).
 */
export class SentEncodings {
  private readonly encoded = new WeakMap<object, Buffer>();

  remember(message: object, bytes: Buffer): void {
    this.encoded.set(message, bytes);
  }

  /** The bytes remembered for message, forgotten as they are taken (each is sent once). */
  take(message: object): Buffer | undefined {
    const b = this.encoded.get(message);
    if (b !== undefined) this.encoded.delete(message);
    return b;
  }
}

/** Requests and replies signed on this node, encoded once (see SentEncodings). */
export const sentRequests = new SentEncodings();
export const sentReplies = new SentEncodings();

/** A service definition whose request or response serializer uses the bytes remembered in `sent`. */
export function withSentEncodings<D extends Record<string, object>>(definition: D, serializer: "requestSerialize" | "responseSerialize", sent: SentEncodings): D {
  const out: Record<string, unknown> = {};
  for (const [name, d] of Object.entries(definition)) {
    const encode = (d as Record<string, (m: unknown) => Buffer>)[serializer]!;
    out[name] = { ...d, [serializer]: (m: unknown) => (typeof m === "object" && m !== null ? sent.take(m) : undefined) ?? encode(m) };
  }
  return out as D;
}

/**
 * The bytes each decoded message arrived in (keyed by the message object), and their SHA-256 (hex),
 * computed the first time it is asked for: without a cluster key nobody asks.
 */
export class ArrivalDigests {
  private readonly arrived = new WeakMap<object, Uint8Array | string>();

  remember(message: object, bytes: Uint8Array): void {
    this.arrived.set(message, bytes);
  }

  get(message: object): string | undefined {
    const b = this.arrived.get(message);
    if (b === undefined || typeof b === "string") return b;
    const digest = createHash("sha256").update(b).digest("hex");
    this.arrived.set(message, digest);
    return digest;
  }
}

/**
 * A service definition whose request or response decoder remembers, in `digests`, the exact bytes
 * each message arrived in; for a message that carries its own MAC last (TRAILING_MAC_FIELD), those
 * bytes without it.
 */
export function withArrivalDigests<D extends Record<string, object>>(
  definition: D,
  decoder: "requestDeserialize" | "responseDeserialize",
  digests: ArrivalDigests,
): D {
  const out: Record<string, unknown> = {};
  for (const [name, d] of Object.entries(definition)) {
    const decode = (d as Record<string, (b: Buffer) => unknown>)[decoder]!;
    const macField = TRAILING_MAC_FIELD[(d as { path: string }).path]?.[decoder];
    out[name] = {
      ...d,
      [decoder]: (bytes: Buffer) => {
        const m = decode(bytes);
        if (typeof m === "object" && m !== null) {
          const covered = macField === undefined ? bytes : withoutTrailingMac(bytes, macField, (m as { mac?: Uint8Array }).mac);
          digests.remember(m, covered);
        }
        return m;
      },
    };
  }
  return out as D;
}

const replyDigests = new ArrivalDigests();
const refusedReplies = new WeakSet<object>();

/**
 * A stream reply whose MAC did not verify (peer-interceptors.ts): its stream is cancelled as
 * UNAUTHENTICATED, but grpc-js delivers the status only after the message, so the reader must
 * check this mark and take nothing from the message.
 */
export function markReplyRefused(reply: object): void {
  refusedReplies.add(reply);
}

/** True for a stream reply the peer interceptor refused (markReplyRefused). */
export function replyRefused(reply: object): boolean {
  return refusedReplies.has(reply);
}

/** SHA-256 (hex) of the bytes a decoded reply arrived in; undefined when not decoded here. */
export function receivedReplyDigest(reply: object): string | undefined {
  return replyDigests.get(reply);
}

const withReplyDigests = <D extends Record<string, object>>(definition: D): D =>
  withSentEncodings(withArrivalDigests(definition, "responseDeserialize", replyDigests), "requestSerialize", sentRequests);

/** A Gossip client whose replies' digests are remembered, and whose signed requests are encoded once. */
export const PeerGossipClient = grpc.makeGenericClientConstructor(withReplyDigests(GossipService), "deltaset.v1.Gossip") as unknown as typeof GossipClient;
/** A Membership client whose replies' digests are remembered, and whose signed requests are encoded once. */
export const PeerMembershipClient = grpc.makeGenericClientConstructor(withReplyDigests(MembershipService), "deltaset.v1.Membership") as unknown as typeof MembershipClient;
