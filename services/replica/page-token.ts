// Page tokens of Query: opaque to clients, checked when they come back. A token is
//   version (1 byte) | last element of the page | checksum (8 bytes)
// where the checksum is the first 8 bytes of SHA-256 over the version, the key and the element.
// A token that was cut, altered, made up, or issued for another key fails the check, so a
// client's mistake is answered INVALID_ARGUMENT instead of silently listing from somewhere else.
// It is a checksum, not a secret MAC: any node accepts the tokens of any node for the same key,
// and a token grants nothing (any start position can be asked for with Scan's start_after).
import { createHash } from "node:crypto";

const VERSION = 1;
const CHECKSUM_BYTES = 8;
/** Bytes a token adds to its element. */
export const PAGE_TOKEN_OVERHEAD = 1 + CHECKSUM_BYTES;

function checksum(key: string, element: Uint8Array): Buffer {
  const keyBytes = Buffer.from(key, "utf8");
  const len = Buffer.alloc(4);
  len.writeUInt32BE(keyBytes.length);
  return createHash("sha256").update(Buffer.from([VERSION])).update(len).update(keyBytes).update(element).digest().subarray(0, CHECKSUM_BYTES);
}

export function encodePageToken(key: string, lastElement: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([VERSION]), lastElement, checksum(key, lastElement)]);
}

/** The element a token continues after, or undefined when the token does not check out. */
export function decodePageToken(key: string, token: Uint8Array): Buffer | undefined {
  // An element has at least one byte, so a real token is longer than the overhead.
  if (token.length <= PAGE_TOKEN_OVERHEAD || token[0] !== VERSION) return undefined;
  const element = Buffer.from(token.subarray(1, token.length - CHECKSUM_BYTES));
  const sum = token.subarray(token.length - CHECKSUM_BYTES);
  return checksum(key, element).equals(sum) ? element : undefined;
}
