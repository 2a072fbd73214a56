// The marks a node puts on the client calls it makes to another node on a caller's behalf:
// FORWARDED_BY (routing.ts: the call was forwarded once and is served where it arrives) and
// READ_PULL (read-pull.ts: a fetch, answered from what the node holds). A client could set them
// too, and a node honoured them: a call so marked was served by a node that does not own its key
// (an Increment retried that way was applied again, a write split its key by type, a read answered
// from a nearly empty copy; outside check audit-24). With a cluster key the marks count only with
// a proof, in MARK_PROOF, that a key holder set them on this method within the clock-skew window
// (peer-proof.ts's MAC over the marks' values, its nonce never seen before); without one they are
// dropped and the call is served as any client's. With mutual TLS and no cluster key, they count
// only on a connection that presented a node certificate (peer-identity.ts). With neither, peers
// are not authenticated at all (docs/security.md) and the marks are taken as they come.
import * as grpc from "@grpc/grpc-js";
import type { ClusterKeyring } from "./cluster-keys.js";
import { ANY_RECEIVER, DEFAULT_SKEW_MS, ReplayCache, newNonce, signProof, verifyProof } from "./peer-proof.js";
import { READ_PULL } from "./read-pull.js";
import { type PeerCertificateView, certificateNodeId } from "./peer-identity.js";
import { hasVerifiedPeerCertificate } from "./tls.js";

/** Metadata naming the node that forwarded a call: its receiver never forwards it again. */
export const FORWARDED_BY = "x-deltaset-forwarded-by";
export const MARK_PROOF = "x-deltaset-mark-proof";
/** How far a mark's proof may be from the receiver's clock (nodes' clocks agree within --max-clock-skew-ms, 2 s by default). */
export const MARK_PROOF_WINDOW_MS = 15_000;

/** What a proof covers: the marks' values (so none can be added, dropped or changed). */
function markBody(metadata: grpc.Metadata): string | undefined {
  const by = metadata.get(FORWARDED_BY);
  const pull = metadata.get(READ_PULL);
  if (by.length === 0 && pull.length === 0) return undefined;
  return `marks ${by.map(String).join(",")} ${pull.map(String).join(",")}`;
}

/** Prove the marks metadata carries (if any) for a call on path, as nodeId, now. */
export function proveMarks(metadata: grpc.Metadata, path: string, nodeId: string, keys: ClusterKeyring, now: number): void {
  const body = markBody(metadata);
  if (body !== undefined) metadata.set(MARK_PROOF, signProof(keys, path, nodeId, body, now, newNonce(), ANY_RECEIVER));
}

/** The client interceptor of a node's channels to its peers: it proves the marks of each call that carries some. */
export function forwardMarkSigner(nodeId: () => string, keys: () => ClusterKeyring | undefined, now: () => number = Date.now): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        const k = keys();
        if (k !== undefined) proveMarks(metadata, options.method_definition.path, nodeId(), k, now());
        next(metadata, listener);
      },
    });
}

/** Checks the marks of calls arriving at a node: once per call, before anything reads them. */
export class ForwardMarkCheck {
  private readonly replay: ReplayCache;
  private readonly checked = new WeakSet<grpc.Metadata>();
  /** Calls whose marks were dropped (no valid proof). */
  dropped = 0;

  constructor(
    private readonly o: {
      self: () => string;
      keys: () => ClusterKeyring | undefined;
      now?: () => number;
      skewMs?: number;
      /** Proofs timed before this are refused (the replay cache starts empty with the process). */
      notBeforeMs?: number;
      /** Mutual TLS is on: without a cluster key, marks need a node certificate. */
      mutualTls?: () => boolean;
      /** Told of each call whose marks were dropped, with why. */
      onDropped?: (reason: string, path: string) => void;
    },
  ) {
    this.replay = new ReplayCache(o.skewMs ?? DEFAULT_SKEW_MS, undefined, o.notBeforeMs);
  }

  /**
   * Drop the marks of a call on path unless a key holder proved them (with a cluster key), or,
   * with mutual TLS alone, unless the call came over a node certificate's connection.
   */
  check(metadata: grpc.Metadata, path: string, call?: { getAuthContext(): { transportSecurityType?: string; sslPeerCertificate?: unknown } }): void {
    if (this.checked.has(metadata)) return;
    this.checked.add(metadata);
    const body = markBody(metadata);
    if (body === undefined) return;
    const keys = this.o.keys();
    let r: { ok: true } | { ok: false; reason: string };
    if (keys !== undefined) {
      const now = (this.o.now ?? Date.now)();
      r = verifyProof(keys, metadata.get(MARK_PROOF)[0], path, body, now, this.replay, { self: this.o.self(), anyReceiver: true, legacy: false }, this.o.skewMs ?? DEFAULT_SKEW_MS);
    } else if (this.o.mutualTls?.() === true) {
      const node = call !== undefined && hasVerifiedPeerCertificate(call) ? certificateNodeId(call.getAuthContext().sslPeerCertificate as PeerCertificateView) : undefined;
      r = node?.ok === true ? { ok: true } : { ok: false, reason: node?.ok === false ? node.reason : "peer-certificate" };
    } else return;
    if (r.ok) return;
    metadata.remove(FORWARDED_BY);
    metadata.remove(READ_PULL);
    this.dropped++;
    this.o.onDropped?.(r.reason, path);
  }
}
