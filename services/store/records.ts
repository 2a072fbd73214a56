// Encodings of the values stored under the keys of keys.ts.
import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import {
  type CausalContext,
  type Dot,
  type DotSet,
  ObjectType,
  contextFromProto,
  encodeContext,
} from "../crdt/index.js";
import { CausalContext as CausalContextMsg } from "../gen/deltaset/v1/types.js";
import { varintSize, writeVarint } from "../common/varint.js";
import { replicaUtf8 } from "./keys.js";
import type { LiveDigest } from "./live-digest.js";

/**
 * 1: no state log; 2: followed by the state log of a key stored whole (StateLog); 3: followed by
 * the live digest of a set (live-digest.ts). A set's header written before version 3 existed has
 * no digest, and keeps none until the set is emptied.
 */
const HEADER_VERSION = 1;
const HEADER_VERSION_LOGGED = 2;
const HEADER_VERSION_DIGEST = 3;

/**
 * Where the state of a key stored whole lies when it is too large to rewrite on every change
 * (whole-state-layout.ts): a base record holding the state as of seq `first`, and the records of
 * the deltas first..next-1 joined after it, in order. The header's body is then empty. Replaced,
 * never changed in place: a new object is a new version of the state.
 */
export interface StateLog {
  readonly first: number;
  readonly next: number;
  /** Bytes of the delta records first..next-1. */
  readonly logBytes: number;
  /** Bytes of the base record. */
  readonly baseBytes: number;
}

/** Per-object header: its type, causal context, live element count, and for small types the state. */
export interface Header {
  type: ObjectType;
  ctx: CausalContext;
  size: number;
  /** Encoded whole state for types stored in one record (COUNTER); empty for sets and logged states. */
  body: Uint8Array;
  /** Set when the whole state lies in a base record and a log of deltas instead of the body. */
  log?: StateLog;
  /** AWSET: the digest of its live dots (live-digest.ts), when known. */
  live?: LiveDigest;
}

/** The encoded bytes of a state stored whole: its body, or its base and the log of deltas after it. */
export function stateBytesOf(h: Header): number {
  return h.log === undefined ? h.body.length : h.log.baseBytes + h.log.logBytes;
}

export function encodeHeader(h: Header): Buffer {
  if (h.log !== undefined && h.live !== undefined) throw new Error("a header holds a state log or a live digest, not both");
  const version = h.log !== undefined ? HEADER_VERSION_LOGGED : h.live !== undefined ? HEADER_VERSION_DIGEST : HEADER_VERSION;
  // Written directly (a header is rewritten on every change of its object): the bytes of a
  // BinaryWriter's uint32(version) uint32(type) uint64(size) bytes(ctx) bytes(body), then the
  // log's four uint64s or the digest's two fixed32s (little-endian).
  const ctx = encodeContext(h.ctx);
  const log = h.log === undefined ? [] : [h.log.first, h.log.next, h.log.logBytes, h.log.baseBytes];
  let size = varintSize(version) + varintSize(h.type) + varintSize(h.size) + varintSize(ctx.length) + ctx.length + varintSize(h.body.length) + h.body.length;
  for (const n of log) size += varintSize(n);
  if (h.live !== undefined) size += 8;
  const out = Buffer.allocUnsafe(size);
  let at = writeVarint(out, 0, version);
  at = writeVarint(out, at, h.type);
  at = writeVarint(out, at, h.size);
  at = writeVarint(out, at, ctx.length);
  out.set(ctx, at);
  at = writeVarint(out, at + ctx.length, h.body.length);
  out.set(h.body, at);
  at += h.body.length;
  for (const n of log) at = writeVarint(out, at, n);
  if (h.live !== undefined) {
    out.writeUInt32LE(h.live.a, at);
    out.writeUInt32LE(h.live.b, at + 4);
  }
  return out;
}

export function decodeHeader(b: Uint8Array): Header {
  const r = new BinaryReader(b);
  const version = r.uint32();
  if (version !== HEADER_VERSION && version !== HEADER_VERSION_LOGGED && version !== HEADER_VERSION_DIGEST) throw new Error(`unknown header version ${version}`);
  const type = r.uint32() as ObjectType;
  const size = Number(r.uint64());
  const ctx = contextFromProto(CausalContextMsg.decode(r.bytes()));
  const body = r.bytes();
  if (version === HEADER_VERSION) return { type, ctx, size, body };
  if (version === HEADER_VERSION_DIGEST) return { type, ctx, size, body, live: { a: r.fixed32(), b: r.fixed32() } };
  const log = { first: Number(r.uint64()), next: Number(r.uint64()), logBytes: Number(r.uint64()), baseBytes: Number(r.uint64()) };
  return { type, ctx, size, body, log };
}

/**
 * An element record: the same bytes as a BinaryWriter writing uint32(n) then (string, uint64) per
 * dot, without its buffers. When a dot expires (an add with a time to live), the record starts
 * with a 0 (no record has zero dots) and every dot also carries uint64 expiresAt (0: none), so
 * records without expiry keep the older format.
 */
export function encodeDots(dots: DotSet): Buffer {
  if (dots.some((d) => d.expiresAt !== undefined)) return encodeExpiringDots(dots);
  let size = varintSize(dots.length);
  for (const d of dots) {
    const len = replicaUtf8(d.replica).length;
    size += varintSize(len) + len + varintSize(d.counter);
  }
  const out = Buffer.allocUnsafe(size);
  let at = writeVarint(out, 0, dots.length);
  for (const d of dots) {
    const r = replicaUtf8(d.replica);
    at = writeVarint(out, at, r.length);
    out.set(r, at);
    at = writeVarint(out, at + r.length, d.counter);
  }
  return out;
}

function encodeExpiringDots(dots: DotSet): Buffer {
  const w = new BinaryWriter();
  w.uint32(0).uint32(dots.length);
  for (const d of dots) w.string(d.replica).uint64(d.counter).uint64(d.expiresAt ?? 0);
  return Buffer.from(w.finish());
}

export function decodeDots(b: Uint8Array): Dot[] {
  const r = new BinaryReader(b);
  const n = r.uint32();
  if (n === 0) return decodeExpiringDots(r);
  const out: Dot[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const replica = r.string();
    out[i] = { replica, counter: Number(r.uint64()) };
  }
  return out;
}

function decodeExpiringDots(r: BinaryReader): Dot[] {
  const n = r.uint32();
  const out: Dot[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const replica = r.string();
    const counter = Number(r.uint64());
    const expiresAt = Number(r.uint64());
    out[i] = expiresAt === 0 ? { replica, counter } : { replica, counter, expiresAt };
  }
  return out;
}
