// A stored chunk's slice as it is sent, and the digest of a key stored whole: what Export, the
// gossip state stream and the catch-up's Contexts answers send and compare.
import { createHash } from "node:crypto";
import { latticeFor } from "../crdt/index.js";
import type { StateChunk } from "./layout.js";

/** A stored chunk's slice as it is sent: the stored encoding, or the slice encoded now. */
export function chunkPayload(c: StateChunk, now: number): Buffer {
  return Buffer.from(c.encoded ?? latticeFor(c.type).encode(c.slice, now));
}

/** The SHA-256 of a key stored whole, over its payload as sent (chunkPayload). */
export function wholeDigest(payload: Uint8Array): Buffer {
  return createHash("sha256").update(payload).digest();
}
