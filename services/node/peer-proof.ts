// The proof a peer call carries that its sender holds a cluster key, independent of TLS: metadata
//   deltaset-peer-proof: v2 <node id> <receiver> <unix ms> <nonce> <mac>
// where mac = HMAC-SHA256(key, "deltaset-peer-proof/v2" LF method path LF node id LF receiver LF
// unix ms LF nonce LF body digest), base64url. The receiver is the node id of the node the call is
// meant for, or "*" when the sender cannot know it (a Join sent to a seed address), which only
// Join accepts: a proof captured on its way to one node is refused by every other one. The body
// digest is the SHA-256 (hex) of the request message bytes of a unary call, and "-" for a client
// stream (whose chunks are bound to the sender by their `from` field, see peer-interceptors.ts). A
// proof is accepted when its MAC verifies under any installed key, it names this node (or "*" on
// Join), its time is within the skew window of this node's clock, and its nonce was not seen within
// that window (a bounded replay cache). Pure functions plus the cache; no gRPC here.
//
// Earlier versions send v1 proofs, which name no receiver (the v2 MAC input without the receiver
// line, under "deltaset-peer-proof/v1"); they are accepted only while --peer-legacy-proofs is on.
// With it on, a node also signs its calls with both (PROOF_V2_HEADER), so nodes of either version
// take them.
//
// A unary call also names its body digest in the metadata
//   deltaset-peer-body: <body digest>
// so the receiver verifies the proof from the metadata alone, before it decodes any message (an
// unauthenticated caller never gets a message decoded), and then checks that the message that
// arrives has that digest.
//
// The answer to a signed call is signed too, in a trailer
//   deltaset-peer-reply: v1 <mac>
// with mac = HMAC-SHA256(signing key, "deltaset-peer-reply/v1" LF method path LF the request's
// nonce LF reply digest): only a key holder can answer, and an answer is bound to the request it
// answers (the caller's fresh nonce), so a forged or replayed acknowledgement is refused.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { ClusterKeyring } from "./cluster-keys.js";
import { STREAM_MAC_BYTES } from "../common/trailing-mac.js";

export const PROOF_HEADER = "deltaset-peer-proof";
/**
 * During a rolling upgrade a node signs twice: the earlier version's v1 proof under PROOF_HEADER,
 * which nodes of that version read, and its v2 proof (same nonce) under this header, which nodes
 * of this version read first.
 */
export const PROOF_V2_HEADER = "deltaset-peer-proof-v2";
export const REPLY_HEADER = "deltaset-peer-reply";
/** Proofs older or newer than this (against the receiver's clock) are refused. */
export const DEFAULT_SKEW_MS = 60_000;
/** Most nonces remembered; beyond it, proofs are refused until old ones expire (fails closed). */
export const DEFAULT_REPLAY_CAPACITY = 200_000;
/** The body digest of a client stream's proof. */
export const STREAM_BODY = "-";
/** Metadata naming a unary call's body digest (the one its proof covers). */
export const BODY_HEADER = "deltaset-peer-body";

/** The receiver a proof names when its sender cannot know the node it calls (Join to a seed). */
export const ANY_RECEIVER = "*";

export interface ProofFields {
  version: 1 | 2;
  path: string;
  nodeId: string;
  /** The receiver's node id or ANY_RECEIVER (v2); v1 names none. */
  to: string | undefined;
  unixMs: number;
  nonce: string;
  body: string;
}

export type ProofRefusal =
  | "proof-missing"
  | "proof-malformed"
  | "proof-stale"
  | "proof-invalid"
  | "proof-replayed"
  | "proof-before-start"
  | "replay-cache-full"
  | "proof-other-receiver"
  | "proof-receiver-missing"
  | "proof-legacy";

export function bodyDigest(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function mac(key: Buffer, f: ProofFields): Buffer {
  const input = f.version === 1
    ? `deltaset-peer-proof/v1\n${f.path}\n${f.nodeId}\n${f.unixMs}\n${f.nonce}\n${f.body}`
    : `deltaset-peer-proof/v2\n${f.path}\n${f.nodeId}\n${f.to}\n${f.unixMs}\n${f.nonce}\n${f.body}`;
  return createHmac("sha256", key).update(input).digest();
}

/** A fresh nonce for a proof. */
export function newNonce(): string {
  return randomBytes(16).toString("base64url");
}

function replyMac(key: Buffer, path: string, nonce: string, body: string): Buffer {
  return createHmac("sha256", key).update(`deltaset-peer-reply/v1\n${path}\n${nonce}\n${body}`).digest();
}

/** The trailer value signing the reply `body` (digest) to the call on `path` whose proof had `nonce`. */
export function signReply(keys: ClusterKeyring, path: string, nonce: string, body: string): string {
  return `v1 ${replyMac(keys.signer, path, nonce, body).toString("base64url")}`;
}

/** True when a reply trailer verifies under one of the keys (every key is tried). */
export function replyValid(keys: ClusterKeyring, path: string, nonce: string, body: string, value: unknown): boolean {
  if (typeof value !== "string") return false;
  const m = /^v1 ([A-Za-z0-9_-]{43})$/.exec(value);
  if (m === null) return false;
  const got = Buffer.from(m[1]!, "base64url");
  let ok = false;
  for (const key of keys.keys) ok = timingSafeEqual(replyMac(key, path, nonce, body), got) || ok;
  return ok;
}

/** The header value proving that `nodeId` sends `body` to `path` of node `to` now. */
export function signProof(keys: ClusterKeyring, path: string, nodeId: string, body: string, unixMs: number, nonce = newNonce(), to: string = ANY_RECEIVER): string {
  const m = mac(keys.signer, { version: 2, path, nodeId, to, unixMs, nonce, body });
  return `v2 ${nodeId} ${to} ${unixMs} ${nonce} ${m.toString("base64url")}`;
}

/** A proof of an earlier version, naming no receiver (tests of --peer-legacy-proofs). */
export function signLegacyProof(keys: ClusterKeyring, path: string, nodeId: string, body: string, unixMs: number, nonce = newNonce()): string {
  const m = mac(keys.signer, { version: 1, path, nodeId, to: undefined, unixMs, nonce, body });
  return `v1 ${nodeId} ${unixMs} ${nonce} ${m.toString("base64url")}`;
}

const NODE_ID = "[A-Za-z0-9._-]{1,128}";
const PROOF_V1 = new RegExp(`^v1 (${NODE_ID}) (\\d{1,15}) ([A-Za-z0-9_-]{16,64}) ([A-Za-z0-9_-]{43})$`);
const PROOF_V2 = new RegExp(`^v2 (${NODE_ID}) (${NODE_ID}|\\*) (\\d{1,15}) ([A-Za-z0-9_-]{16,64}) ([A-Za-z0-9_-]{43})$`);

export interface ParsedProof {
  version: 1 | 2;
  nodeId: string;
  /** The receiver named (v2): a node id or ANY_RECEIVER. */
  to: string | undefined;
  unixMs: number;
  nonce: string;
  mac: Buffer;
}

/** Parse a header value; undefined when it is not a well-formed v1 or v2 proof. */
export function parseProof(value: unknown): ParsedProof | undefined {
  if (typeof value !== "string") return undefined;
  const v2 = PROOF_V2.exec(value);
  if (v2 !== null) return { version: 2, nodeId: v2[1]!, to: v2[2]!, unixMs: Number(v2[3]), nonce: v2[4]!, mac: Buffer.from(v2[5]!, "base64url") };
  const v1 = PROOF_V1.exec(value);
  if (v1 !== null) return { version: 1, nodeId: v1[1]!, to: undefined, unixMs: Number(v1[2]), nonce: v1[3]!, mac: Buffer.from(v1[4]!, "base64url") };
  return undefined;
}

/** The body digest a unary call's metadata names; undefined when absent or not a SHA-256 in hex. */
export function parseBodyDigest(value: unknown): string | undefined {
  return typeof value === "string" && /^[0-9a-f]{64}$/.test(value) ? value : undefined;
}

/** True when the proof's time is within the window around `now`. */
export function fresh(p: ParsedProof, now: number, skewMs: number): boolean {
  return Math.abs(p.unixMs - now) <= skewMs;
}

/** True when the proof's MAC verifies under one of the keys (every key is tried: no early exit). */
export function macValid(keys: ClusterKeyring, p: ParsedProof, path: string, body: string): boolean {
  let ok = false;
  for (const key of keys.keys) {
    const want = mac(key, { version: p.version, path, nodeId: p.nodeId, to: p.to, unixMs: p.unixMs, nonce: p.nonce, body });
    ok = timingSafeEqual(want, p.mac) || ok;
  }
  return ok;
}

/**
 * Nonces of accepted proofs, each kept until its proof's time leaves the skew window (after that
 * the proof is refused as stale anyway). Bounded: when full of live entries it refuses new ones.
 */
export class ReplayCache {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly skewMs = DEFAULT_SKEW_MS,
    private readonly capacity = DEFAULT_REPLAY_CAPACITY,
    /**
     * Proofs timed before this are refused: the cache starts empty with the process, so a proof
     * used before a restart would otherwise be taken again for the rest of its window. The node
     * sets its start time less the clock skew it allows between nodes (--max-clock-skew-ms).
     */
    private readonly notBefore = Number.NEGATIVE_INFINITY,
  ) {}

  get size(): number {
    return this.seen.size;
  }

  /** Record a nonce; "proof-replayed" if seen, "proof-before-start" if timed before notBefore, "replay-cache-full" if no room. */
  admit(p: ParsedProof, now: number): ProofRefusal | undefined {
    if (p.unixMs < this.notBefore) return "proof-before-start";
    const k = `${p.nodeId} ${p.nonce}`;
    if (this.seen.has(k)) return "proof-replayed";
    if (this.seen.size >= this.capacity) this.expire(now);
    if (this.seen.size >= this.capacity) return "replay-cache-full";
    this.seen.set(k, p.unixMs + this.skewMs);
    return undefined;
  }

  private expire(now: number): void {
    // Bounded by the capacity: one pass over the map.
    for (const [k, until] of this.seen) if (until < now) this.seen.delete(k);
  }
}

/** Who a proof must name: this node's id, whether "*" is taken (Join), whether v1 is (legacy). */
export interface ReceiverCheck {
  self: string;
  anyReceiver: boolean;
  legacy: boolean;
}

/** Why a well-formed proof's receiver is refused here, if it is. */
export function receiverRefusal(p: ParsedProof, r: ReceiverCheck): ProofRefusal | undefined {
  if (p.version === 1) return r.legacy ? undefined : "proof-legacy";
  if (p.to === ANY_RECEIVER) return r.anyReceiver ? undefined : "proof-receiver-missing";
  return p.to === r.self ? undefined : "proof-other-receiver";
}

/**
 * Check a proof for a call: well-formed, for this node, fresh, signed by a cluster key, never
 * seen. On success returns the node id it names.
 */
export function verifyProof(
  keys: ClusterKeyring,
  value: unknown,
  path: string,
  body: string,
  now: number,
  replay: ReplayCache,
  receiver: ReceiverCheck,
  skewMs = DEFAULT_SKEW_MS,
): { ok: true; nodeId: string } | { ok: false; reason: ProofRefusal } {
  if (value === undefined) return { ok: false, reason: "proof-missing" };
  const p = parseProof(value);
  if (p === undefined) return { ok: false, reason: "proof-malformed" };
  const elsewhere = receiverRefusal(p, receiver);
  if (elsewhere !== undefined) return { ok: false, reason: elsewhere };
  if (!fresh(p, now, skewMs)) return { ok: false, reason: "proof-stale" };
  if (!macValid(keys, p, path, body)) return { ok: false, reason: "proof-invalid" };
  const replayed = replay.admit(p, now);
  if (replayed !== undefined) return { ok: false, reason: replayed };
  return { ok: true, nodeId: p.nodeId };
}

// Messages of a stream (ExchangeStream): the stream's start carries the proof (body STREAM_BODY);
// each message then carries its own MAC, bound to the stream by the proof's nonce and to its
// place in it by its index, so an on-path attacker can neither alter, drop, reorder nor replay one.
export type StreamDirection = "frame" | "reply";

function streamMac(key: Buffer, direction: StreamDirection, path: string, nonce: string, index: number, body: string): Buffer {
  return createHmac("sha256", key).update(`deltaset-peer-stream/v1\n${direction}\n${path}\n${nonce}\n${index}\n${body}`).digest();
}

/** The MAC of the index-th message of a stream in this direction, whose bytes without the MAC digest to `body`. */
export function signStreamMessage(keys: ClusterKeyring, direction: StreamDirection, path: string, nonce: string, index: number, body: string): Buffer {
  return streamMac(keys.signer, direction, path, nonce, index, body);
}

/** True when `got` is that MAC under one of the keys (every key is tried: no early exit). */
export function streamMessageValid(keys: ClusterKeyring, direction: StreamDirection, path: string, nonce: string, index: number, body: string, got: Uint8Array): boolean {
  if (got.length !== STREAM_MAC_BYTES) return false;
  let ok = false;
  for (const key of keys.keys) ok = timingSafeEqual(streamMac(key, direction, path, nonce, index, body), got) || ok;
  return ok;
}
