// A set's live digest: an order-free sum over its live dots, each hashed together with the element
// that holds it, kept in the set's header and updated with every change of an element's dots
// (write-view.ts setDots). Two copies of a set hold the same state when the sender's context lies
// within the receiver's and their live digests agree: every live dot is then on both sides, with
// the same element, and the sender has seen no dot the receiver still holds and it does not. The
// catch-up by contexts (gossip/catch-up.ts) uses it to skip such a set without reading it.
//
// Two 32-bit lanes, each a sum mod 2^32 of a per-dot hash (FNV-1a over the element bytes, mixed
// with the replica's hash and both halves of the counter by murmur3's finalizer): adding a dot adds
// its hash, removing it subtracts it, so the digest depends only on the set of (element, dot)
// pairs. Not a cryptographic commitment: a hash that costs about as much as a map lookup, since
// it runs for every element written.
import type { Dot } from "../crdt/index.js";
import { replicaUtf8 } from "./keys.js";

export interface LiveDigest {
  a: number;
  b: number;
}

/** Bytes of an encoded digest. */
export const LIVE_DIGEST_BYTES = 8;

export function emptyLiveDigest(): LiveDigest {
  return { a: 0, b: 0 };
}

export function sameLiveDigest(x: LiveDigest | undefined, y: LiveDigest | undefined): boolean {
  if (x === undefined || y === undefined) return x === y;
  return x.a === y.a && x.b === y.b;
}

const SEED_A = 0x811c9dc5;
const SEED_B = 0x2f8a1d3b;
const PRIME_A = 0x01000193;
const PRIME_B = 0x5bd1e995;

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function fnv(bytes: Uint8Array, seed: number, prime: number): number {
  let h = seed ^ bytes.length;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, prime);
  return h;
}

/** Each replica's two lane hashes, computed once (replica ids are few). */
const replicaLanes = new Map<string, [number, number]>();

function lanesOf(replica: string): [number, number] {
  let r = replicaLanes.get(replica);
  if (r === undefined) {
    const bytes = replicaUtf8(replica);
    r = [fmix(fnv(bytes, SEED_B, PRIME_A)), fmix(fnv(bytes, SEED_A, PRIME_B))];
    if (replicaLanes.size < 10_000) replicaLanes.set(replica, r);
  }
  return r;
}

function lane(element: Uint8Array, d: Dot, seed: number, prime: number, replica: number): number {
  let h = fmix(fnv(element, seed, prime) ^ replica);
  h = fmix(h ^ (d.counter >>> 0));
  return fmix(h + Math.floor(d.counter / 0x100000000));
}

/** Add (sign 1) or take out (sign -1) the pair (element, dot) of digest g, in place. */
export function updateLiveDigest(g: LiveDigest, element: Uint8Array, d: Dot, sign: 1 | -1): void {
  const [ra, rb] = lanesOf(d.replica);
  g.a = (g.a + sign * lane(element, d, SEED_A, PRIME_A, ra)) >>> 0;
  g.b = (g.b + sign * lane(element, d, SEED_B, PRIME_B, rb)) >>> 0;
}

export function encodeLiveDigest(g: LiveDigest): Buffer {
  const out = Buffer.allocUnsafe(LIVE_DIGEST_BYTES);
  out.writeUInt32BE(g.a, 0);
  out.writeUInt32BE(g.b, 4);
  return out;
}

/** undefined for anything but LIVE_DIGEST_BYTES bytes (an empty field: not known). */
export function decodeLiveDigest(b: Uint8Array): LiveDigest | undefined {
  if (b.length !== LIVE_DIGEST_BYTES) return undefined;
  const v = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  return { a: v.readUInt32BE(0), b: v.readUInt32BE(4) };
}
