// Peer authentication on the wire: a client interceptor that signs every call a node makes to a
// peer (peer-proof.ts), and a server interceptor that lets a Gossip or Membership protocol call
// (Exchange, ExchangeStream, PushState, HandOver, Contexts, Join, Leave, Ping, PingReq) reach its handler
// only when
//  - with a cluster key: it carries a valid, fresh, never-seen proof, checked from the metadata
//    before any message is decoded (a unary call names the digest of its message beside the proof,
//    and the message must then have it), and on ExchangeStream and PushState every frame or chunk
//    carries a valid MAC for its index on the stream;
//  - with mutual TLS: its connection presented a node certificate (peer-identity.ts);
//  - the node id the proof and the certificate name is the sender the message claims (`from`,
//    Join's `self`, Leave's `node_id`; every frame of ExchangeStream; the first chunk of a
//    PushState stream, and every later chunk that names one).
// Anything else ends with UNAUTHENTICATED before the handler sees the message, so it changes
// nothing; it is counted (onRefused) and logged at warn, at most once per reason and method every
// LOG_EVERY_MS. With neither a key nor mutual TLS (loopback, or --insecure-peers) calls pass.
// Members and Watch are read-only views under the client rules (auth.ts), not peer calls.
// With a cluster key, the server signs its answer to a proven call and the client refuses an
// answer that is not signed for its own call (peer-proof.ts: the reply trailer; on ExchangeStream
// each reply's own MAC).
import * as grpc from "@grpc/grpc-js";
import { GossipService } from "../gen/deltaset/v1/gossip.js";
import { MembershipService } from "../gen/deltaset/v1/membership.js";
import type { ClusterKeyring } from "./cluster-keys.js";
import type { Logger } from "../common/logger.js";
import { type CertificateRefusal, certificateNodeId } from "./peer-identity.js";
import { ArrivalDigests, type SentEncodings, markReplyRefused, receivedReplyDigest, sentReplies, sentRequests, trailingMacField, withArrivalDigests, withSentEncodings } from "../client/peer-clients.js";
import { RECEIVER_HEADER } from "../client/peer-receiver.js";
import {
  ANY_RECEIVER,
  DEFAULT_SKEW_MS,
  PROOF_HEADER,
  PROOF_V2_HEADER,
  type ProofRefusal,
  REPLY_HEADER,
  ReplayCache,
  BODY_HEADER,
  STREAM_BODY,
  bodyDigest,
  fresh,
  newNonce,
  parseBodyDigest,
  parseProof,
  replyValid,
  signLegacyProof,
  signProof,
  signReply,
  signStreamMessage,
  streamMessageValid,
  verifyProof,
} from "./peer-proof.js";
import { hasVerifiedPeerCertificate } from "./tls.js";
import { markStreamRefused, refusedByHandler, streamRefusalOf } from "../common/stream-refusal.js";
import { NO_MAC, withTrailingMac } from "../common/trailing-mac.js";
import { passThrough } from "./pass-through.js";
import { STATE_SENDER_HEADER } from "../gossip/state-receive.js";

export type PeerRefusal = ProofRefusal | CertificateRefusal | "proof-body-missing" | "proof-body-mismatch" | "sender-mismatch" | "stream-mac-invalid";

/** The sender a peer request claims, by method path. */
const SENDER: Record<string, (m: any) => unknown> = {
  [GossipService.exchange.path]: (m) => m.from,
  [GossipService.exchangeStream.path]: (m) => m.from,
  [GossipService.pushState.path]: (m) => m.from,
  [GossipService.handOver.path]: (m) => m.from,
  [GossipService.contexts.path]: (m) => m.from,
  [MembershipService.join.path]: (m) => m.self?.nodeId,
  [MembershipService.leave.path]: (m) => m.nodeId,
  [MembershipService.ping.path]: (m) => m.from,
  [MembershipService.pingReq.path]: (m) => m.from,
};

/**
 * The peer services' method definitions by path: their serializers digest a message decoded
 * elsewhere (no arrival digest) re-encoded, the way it was sent.
 */
const METHODS: Record<string, { requestSerialize: (m: any) => Buffer; responseSerialize: (m: any) => Buffer }> = Object.fromEntries(
  [...Object.values(GossipService), ...Object.values(MembershipService)].map((d) => [d.path, d]),
);

/** True for the methods this interceptor guards. */
export function isPeerMethod(path: string): boolean {
  return path in SENDER;
}

/** Digests of received request bytes, by the decoded message object (see withBodyDigests). */
const received = new ArrivalDigests();

/**
 * A service definition whose request decoder remembers the digest of the exact bytes received, so
 * the server checks the proof against what the sender signed even when the message carries
 * fields this build does not know (without it the decoded message is re-encoded), and whose
 * response serializer sends the bytes a signed reply was encoded in for its signature.
 */
export function withBodyDigests<D extends Record<string, { requestDeserialize: (b: Buffer) => any }>>(definition: D): D {
  return withSentEncodings(withArrivalDigests(definition, "requestDeserialize", received), "responseSerialize", sentReplies);
}

function digestOf(path: string, message: object): string {
  return received.get(message) ?? bodyDigest(METHODS[path]!.requestSerialize(message));
}

/**
 * A stream message with its MAC set, computed over its bytes without one by `mac`; the bytes it is
 * sent in (those bytes with the MAC field appended) are remembered in `sent`, so it is encoded
 * once. Without a known MAC field the message is left for the serializer to encode.
 */
function signed(message: any, serialize: (m: unknown) => Buffer, field: number | undefined, sent: SentEncodings, mac: (bytes: Buffer) => Uint8Array): object {
  const bytes = serialize({ ...message, mac: NO_MAC });
  const out = { ...message, mac: mac(bytes) };
  if (field !== undefined) sent.remember(out, withTrailingMac(bytes, field, out.mac));
  return out;
}

/** The digest a stream message's MAC covers: its bytes without the MAC (see trailing-mac.ts). */
function streamDigestOf(arrived: (m: object) => string | undefined, serialize: (m: any) => Buffer, message: object): string {
  return arrived(message) ?? bodyDigest(serialize({ ...message, mac: NO_MAC }));
}

const MESSAGES: Record<PeerRefusal, string> = {
  "proof-missing": "peer calls on this node need a cluster key proof (metadata deltaset-peer-proof)",
  "proof-malformed": "the peer proof is malformed",
  "proof-stale": "the peer proof's time is outside the allowed clock skew: check the clocks",
  "proof-invalid": "the peer proof does not verify under any cluster key of this node",
  "proof-replayed": "this peer proof was already used",
  "proof-before-start": "the peer proof is timed before this node started (less the allowed clock skew, --max-clock-skew-ms): a call signed before a restart is not taken after it; check the sender's clock",
  "proof-other-receiver": "the peer proof names another node as its receiver",
  "proof-receiver-missing": "the peer proof names no receiver; only Join may be sent without knowing the receiving node",
  "proof-legacy": "the peer proof is of an earlier version, which names no receiver (upgrade the sending node, or run this node with --peer-legacy-proofs during the upgrade)",
  "replay-cache-full": "too many peer calls to check for replay; retry later",
  "peer-certificate": "peer calls need mutual TLS with a node certificate issued by the cluster CA",
  "peer-certificate-role": "the client certificate has no peer role (extended key usage serverAuth and clientAuth)",
  "peer-certificate-identity": "the client certificate names no single node id (URI SAN spiffe://deltaset/node/<id>)",
  "proof-body-missing": `a unary peer call on this node names its message's digest in metadata ${BODY_HEADER} beside the proof (a node of an earlier version sends none: upgrade it, or run this node with --peer-legacy-proofs during the upgrade)`,
  "proof-body-mismatch": "the message is not the one the peer proof covers",
  "sender-mismatch": "the authenticated node id is not the sender the message names",
  "stream-mac-invalid": "a message on this peer stream carries no valid cluster key MAC for its place in the stream",
};

/** At most one log line per key every LOG_EVERY_MS, with the number suppressed since. */
export const LOG_EVERY_MS = 10_000;

export class RateLimitedWarn {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  warn(key: string, message: string, fields: Record<string, unknown>): void {
    const t = this.now();
    const s = this.last.get(key);
    if (s !== undefined && t - s.at < LOG_EVERY_MS) {
      s.suppressed++;
      return;
    }
    if (this.last.size > 1000) this.last.clear(); // keys are method × reason: a bound that is never reached in practice
    this.log.warn(message, { ...fields, ...(s && s.suppressed > 0 ? { suppressedSinceLast: s.suppressed } : {}) });
    this.last.set(key, { at: t, suppressed: 0 });
  }
}

export interface PeerAuthOptions {
  /** This node's id: a proof must name it as the receiver (or "*", on Join only). */
  self: () => string;
  /** The installed cluster keys (read at each call: reloads take effect at once); undefined: none. */
  keys: () => ClusterKeyring | undefined;
  /** Mutual TLS is on (a cluster CA is configured). */
  mutualTls: () => boolean;
  log: Logger;
  /**
   * Accept calls from nodes of earlier versions: proofs that name no receiver (v1), and unary calls
   * whose proof names no body digest in metadata, checked once their message is decoded. Refused
   * otherwise. Read at each call.
   */
  legacyProofs?: () => boolean;
  /** Observes refusals (metrics). */
  onRefused?: (service: string, reason: PeerRefusal) => void;
  now?: () => number;
  skewMs?: number;
  /** Proofs timed before this (ms) are refused (ReplayCache: no replay across a restart). Default: none. */
  notBeforeMs?: number;
}

/** The server interceptor enforcing peer authentication. */
export function peerAuthInterceptor(o: PeerAuthOptions): grpc.ServerInterceptor {
  const now = o.now ?? Date.now;
  const skew = o.skewMs ?? DEFAULT_SKEW_MS;
  const replay = new ReplayCache(skew, undefined, o.notBeforeMs);
  const warn = new RateLimitedWarn(o.log, now);
  return (method, call) => {
    const path = method.path;
    if (!isPeerMethod(path)) return passThrough(call);
    const keys = o.keys();
    const mutual = o.mutualTls();
    if (keys === undefined && !mutual) return passThrough(call);
    const [, service = "", rpc = ""] = path.split("/");
    // ExchangeStream: a proof at the start, then a MAC in every message both ways (peer-proof.ts).
    const bidi = method.requestStream && method.responseStream;
    // Its refused messages go on marked to the handler (common/stream-refusal.ts).
    const marks = refusedByHandler(path);
    let nonce: string | undefined;
    let repliesSent = 0;
    let refused = false;
    let certId: string | undefined;
    let identity: string | undefined;
    let proof: unknown;
    let messages = 0;
    let replyDigest: string | undefined;
    /** A unary call's body digest, as its metadata names it and its proof covers. */
    let claimedBody: string | undefined;
    /** The first refusal of a call: counted and logged (later ones of the same call are not). */
    const report = (reason: PeerRefusal, claimed?: unknown): boolean => {
      if (refused) return false;
      refused = true;
      o.onRefused?.(service, reason);
      warn.warn(`${rpc} ${reason}`, "peer call refused", {
        method: rpc,
        reason,
        peer: call.getPeer(),
        ...(typeof claimed === "string" ? { claimed: claimed.slice(0, 128) } : {}),
      });
      return true;
    };
    /** Refuse the call: reported, and ended here with UNAUTHENTICATED. */
    const refuse = (reason: PeerRefusal, claimed?: unknown): void => {
      if (report(reason, claimed)) call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: MESSAGES[reason], metadata: new grpc.Metadata() });
    };
    /**
     * Refuse a message of ExchangeStream after the stream started: reported, then passed on marked,
     * and the handler ends the stream with it after its earlier answers (ending the call here while
     * the handler writes an answer can lose the status in grpc-js).
     */
    const refuseMessage = (message: object, reason: PeerRefusal, claimed: unknown, pass: (m: unknown) => void): void => {
      report(reason, claimed);
      pass(markStreamRefused(message, { code: grpc.status.UNAUTHENTICATED, details: MESSAGES[reason] }));
    };
    /** Verify the proof for this body; sets identity. False when refused. */
    const prove = (body: string): boolean => {
      const receiver = { self: o.self(), anyReceiver: path === MembershipService.join.path, legacy: o.legacyProofs?.() === true };
      const r = verifyProof(keys!, proof, path, body, now(), replay, receiver, skew);
      if (!r.ok) {
        refuse(r.reason, parseProof(proof)?.nodeId);
        return false;
      }
      if (certId !== undefined && certId !== r.nodeId) {
        refuse("sender-mismatch", r.nodeId);
        return false;
      }
      identity = r.nodeId;
      return true;
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            if (mutual) {
              if (!hasVerifiedPeerCertificate(call)) return refuse("peer-certificate");
              const c = certificateNodeId(call.getAuthContext().sslPeerCertificate);
              if (!c.ok) return refuse(c.reason);
              certId = identity = c.nodeId;
            }
            if (keys !== undefined) {
              // A node in a rolling upgrade signs twice (peer-proof.ts): its v2 proof comes first.
              proof = metadata.get(PROOF_V2_HEADER)[0] ?? metadata.get(PROOF_HEADER)[0];
              if (proof === undefined) return refuse("proof-missing");
              const parsed = parseProof(proof);
              if (parsed === undefined) return refuse("proof-malformed");
              if (!fresh(parsed, now(), skew)) return refuse("proof-stale", parsed.nodeId);
              nonce = parsed.nonce;
              // A stream's proof covers its start. A unary call's covers its message, whose digest the
              // metadata names: the proof is checked before any message is decoded.
              if (method.requestStream) {
                if (!prove(STREAM_BODY)) return;
              } else {
                const named = metadata.get(BODY_HEADER);
                claimedBody = parseBodyDigest(named[0]);
                if (claimedBody !== undefined) {
                  if (!prove(claimedBody)) return;
                } else if (named.length > 0) return refuse("proof-malformed", parsed.nodeId);
                else if (o.legacyProofs?.() !== true) return refuse("proof-body-missing", parsed.nodeId);
                // else an earlier version's proof: checked against the message once decoded (below).
              }
            }
            // PushState may name its sender in metadata too (for a stream without chunks): it must
            // be the authenticated one.
            const named = metadata.get(STATE_SENDER_HEADER)[0];
            if (identity !== undefined && named !== undefined && named !== identity) return refuse("sender-mismatch", named);
            pass(metadata);
          },
          onReceiveMessage: (message, pass) => {
            // Refused already by an interceptor before this one (a stream message that did not decode).
            if (marks && streamRefusalOf(message) !== undefined) return pass(message);
            if (refused) {
              if (marks && typeof message === "object" && message !== null) pass(markStreamRefused(message, { code: grpc.status.UNAUTHENTICATED, details: "an earlier message of this stream was refused" }));
              return;
            }
            const sender = SENDER[path]!(message);
            if (keys !== undefined && !method.requestStream) {
              if (claimedBody === undefined) {
                if (!prove(digestOf(path, message as object))) return;
              } else if (digestOf(path, message as object) !== claimedBody) return refuse("proof-body-mismatch", sender);
            }
            const index = messages++;
            // Every message of a request stream (ExchangeStream's frames, PushState's chunks) carries
            // a MAC for its index on the stream: the proof at the start covers no message.
            if (method.requestStream && keys !== undefined) {
              const m = message as { mac?: Uint8Array };
              const body = streamDigestOf((x) => received.get(x), METHODS[path]!.requestSerialize, m);
              // Verified with the keys of now, not of the stream's start: a key removed from the file
              // (rotated out after someone who held it left) stops the streams opened with it.
              if (!streamMessageValid(o.keys() ?? keys, "frame", path, nonce!, index, body, m.mac ?? NO_MAC)) {
                if (marks) return refuseMessage(m, "stream-mac-invalid", sender, pass);
                return refuse("stream-mac-invalid", sender);
              }
            }
            // A client stream names its sender in the first chunk; later chunks name it or leave it
            // empty. Every frame of a bidirectional stream names it.
            const named = bidi || index === 0 || sender !== "";
            if (identity !== undefined && named && sender !== identity) {
              if (marks) return refuseMessage(message as object, "sender-mismatch", sender, pass);
              return refuse("sender-mismatch", sender);
            }
            pass(message);
          },
          onReceiveHalfClose: (pass) => {
            if (!refused) pass();
          },
        }),
      // The answer to a proven call is signed for the caller (peer-proof.ts): bound to its nonce.
      sendMessage: (message, next) => {
        if (bidi) {
          // Each reply on a stream is signed in itself, for its index (no trailer).
          if (keys === undefined || nonce === undefined) return next(message);
          return next(signed(message, (m) => method.responseSerialize(m), trailingMacField(path, "response"), sentReplies, (bytes) => signStreamMessage(keys, "reply", path, nonce!, repliesSent++, bodyDigest(bytes))));
        }
        if (keys !== undefined) {
          const bytes = method.responseSerialize(message);
          if (typeof message === "object" && message !== null) sentReplies.remember(message, bytes);
          replyDigest = bodyDigest(bytes);
        }
        next(message);
      },
      sendStatus: (status, next) => {
        const p = keys === undefined || refused ? undefined : parseProof(proof);
        if (p === undefined || status.code !== grpc.status.OK || replyDigest === undefined) return next(status);
        const trailers = status.metadata ?? new grpc.Metadata();
        trailers.set(REPLY_HEADER, signReply(keys!, path, p.nonce, replyDigest));
        next({ ...status, metadata: trailers });
      },
    });
  };
}

/**
 * The client interceptor signing a node's calls to peer methods with the current signing key
 * (other calls pass unchanged). A unary call's metadata is held back until its message is known,
 * since the proof covers the message bytes. With a logger, a peer's refusal of our call
 * (UNAUTHENTICATED: wrong key, clock skew, certificate) is logged at warn, rate-limited, so the
 * refused side is visible too.
 */
export function peerSigner(nodeId: () => string, keys: () => ClusterKeyring | undefined, now: () => number = Date.now, log?: Logger, legacy: () => boolean = () => false): grpc.Interceptor {
  const warn = log ? new RateLimitedWarn(log, now) : undefined;
  return (options, nextCall) => {
    const def = options.method_definition;
    if (!isPeerMethod(def.path)) return new grpc.InterceptingCall(nextCall(options));
    const rpc = def.path.split("/")[2] ?? "";
    const call = nextCall(options);
    // A listener of its own (the next layer's listener is wrapped by grpc-js): it only watches the status.
    const watch = (listener: grpc.InterceptingListener | grpc.Listener): grpc.InterceptingListener | grpc.Listener =>
      warn === undefined
        ? listener
        : {
            onReceiveStatus: (status: grpc.StatusObject, next: (s: grpc.StatusObject) => void) => {
              if (status.code === grpc.status.UNAUTHENTICATED) warn.warn(`out ${rpc}`, "a peer refused our call", { method: rpc, peer: call.getPeer(), reason: status.details });
              next(status);
            },
          };
    const k = keys();
    if (k === undefined) {
      return new grpc.InterceptingCall(call, { start: (metadata, listener, next) => next(metadata, watch(listener)) });
    }
    const nonce = newNonce();
    // ExchangeStream: every frame is signed for its index, and every reply must be signed for its
    // own, or the stream is cancelled as UNAUTHENTICATED before the reply reaches the caller.
    const bidi = def.requestStream && def.responseStream;
    let framesSent = 0;
    let repliesReceived = 0;
    // The reply must carry a trailer signed for this call's nonce, or the call fails as
    // UNAUTHENTICATED (a forged or replayed acknowledgement never reaches the caller).
    let replyBody: string | undefined;
    const verify: grpc.InterceptingListener | grpc.Listener = {
      onReceiveMessage: (message: any, next: (m: any) => void) => {
        if (bidi) {
          if (typeof message !== "object" || message === null) return next(message);
          const body = streamDigestOf(receivedReplyDigest, METHODS[def.path]!.responseSerialize, message);
          if (streamMessageValid(keys() ?? k, "reply", def.path, nonce, repliesReceived++, body, message.mac ?? NO_MAC)) return next(message);
          warn?.warn(`reply ${rpc}`, "a peer's reply is not signed by a cluster key holder; refused", { method: rpc, peer: call.getPeer() });
          // grpc-js holds the status until this message is passed on: it goes marked, and its
          // reader (gossip/frame-stream.ts) fails the stream on the mark instead of using it.
          markReplyRefused(message);
          call.cancelWithStatus(grpc.status.UNAUTHENTICATED, "a peer's reply on the stream carries no valid cluster key MAC");
          return next(message);
        }
        // A failed call delivers no message (null): there is nothing to digest.
        if (typeof message === "object" && message !== null) {
          try {
            replyBody = receivedReplyDigest(message) ?? bodyDigest(METHODS[def.path]!.responseSerialize(message));
          } catch {
            replyBody = undefined; // not digestible: the reply is refused below
          }
        }
        next(message);
      },
      onReceiveStatus: (status: grpc.StatusObject, next: (s: grpc.StatusObject) => void) => {
        if (status.code === grpc.status.UNAUTHENTICATED) {
          warn?.warn(`out ${rpc}`, "a peer refused our call", { method: rpc, peer: call.getPeer(), reason: status.details });
          return next(status);
        }
        if (status.code !== grpc.status.OK || bidi) return next(status);
        if (replyBody !== undefined && replyValid(keys() ?? k, def.path, nonce, replyBody, status.metadata.get(REPLY_HEADER)[0])) return next(status);
        warn?.warn(`reply ${rpc}`, "a peer's reply is not signed by a cluster key holder; refused", { method: rpc, peer: call.getPeer() });
        next({ code: grpc.status.UNAUTHENTICATED, details: "the peer's reply carries no valid cluster key signature", metadata: status.metadata });
      },
    };
    let held: { metadata: grpc.Metadata; listener: grpc.InterceptingListener | grpc.Listener; next: (m: grpc.Metadata, l: any) => void } | undefined;
    const release = (body: string) => {
      const h = held!;
      held = undefined;
      // The receiver the caller named (client/peer-receiver.ts) goes into the proof, not on the wire.
      const named = h.metadata.get(RECEIVER_HEADER)[0];
      h.metadata.remove(RECEIVER_HEADER);
      const to = typeof named === "string" && named !== "" ? named : ANY_RECEIVER;
      const v2 = signProof(k, def.path, nodeId(), body, now(), nonce, to);
      if (legacy()) {
        // A rolling upgrade (--peer-legacy-proofs): nodes of the earlier version read only this
        // header and refuse a v2 proof as malformed, so it carries their v1; this version's
        // nodes read the v2 one beside it (the same nonce), whether they take legacy proofs or not.
        h.metadata.set(PROOF_HEADER, signLegacyProof(k, def.path, nodeId(), body, now(), nonce));
        h.metadata.set(PROOF_V2_HEADER, v2);
      } else h.metadata.set(PROOF_HEADER, v2);
      if (!def.requestStream) h.metadata.set(BODY_HEADER, body);
      h.next(h.metadata, verify);
    };
    return new grpc.InterceptingCall(call, {
      start(metadata, listener, next) {
        held = { metadata, listener, next };
        if (def.requestStream) release(STREAM_BODY);
      },
      sendMessage(message, next) {
        if (def.requestStream) {
          return next(signed(message, (m) => def.requestSerialize(m), trailingMacField(def.path, "request"), sentRequests, (bytes) => signStreamMessage(k, "frame", def.path, nonce, framesSent++, bodyDigest(bytes))));
        }
        if (held !== undefined) {
          const bytes = def.requestSerialize(message);
          sentRequests.remember(message, bytes);
          release(bodyDigest(bytes));
        }
        next(message);
      },
      halfClose(next) {
        if (held !== undefined) release(bodyDigest(new Uint8Array(0)));
        next();
      },
    });
  };
}
