// Unsigned base-128 varints (protobuf's encoding), for hand-rolled encoders on hot paths.
// Numbers up to 2^53: arithmetic instead of 32-bit bit operations.

/** Bytes the varint of n takes. */
export function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Bytes of a protobuf field with a one-byte tag and a length-delimited body of n bytes. */
export function lengthDelimitedSize(n: number): number {
  return 1 + varintSize(n) + n;
}

/** Write the varint of n at `at`; returns the offset after it. */
export function writeVarint(out: Uint8Array, at: number, n: number): number {
  while (n >= 128) {
    out[at++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}
