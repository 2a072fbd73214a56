// Key → partition: FNV-1a (32-bit) over the key's UTF-8 bytes, modulo the partition count.
// Stable across processes, versions and machines, so every node puts a key in the same place.

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a 32-bit hash of a byte string, as an unsigned integer. */
export function fnv1a32(bytes: Uint8Array): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]!;
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}

const utf8 = new TextEncoder();

/** The partition of a key (a string is hashed as its UTF-8 bytes). */
export function partitionOf(key: string | Uint8Array, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) {
    throw new RangeError(`partition count must be a positive integer, got ${partitions}`);
  }
  return (typeof key === "string" ? fnv1a32String(key) : fnv1a32(key)) % partitions;
}

/**
 * fnv1a32 of a string's UTF-8 bytes. An ASCII string's characters are its bytes, so it is hashed
 * without encoding it (every operation hashes its key, several times); any other character sends
 * the string through the encoder.
 */
function fnv1a32String(key: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c >= 0x80) return fnv1a32(utf8.encode(key));
    h ^= c;
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}
