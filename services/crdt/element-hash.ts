// Seeded hashing of byte strings for the probabilistic types (Bloom, cuckoo and age-partitioned
// filters). One family, versioned, so that every replica computes the same bit positions and a
// filter's encoding can name the family it was built with (a union of filters hashed by different
// families is refused, never silently OR-ed).
//
// The function is a 32-bit MurmurHash3-style mix (public-domain algorithm by Austin Appleby),
// written here from its published description. Two seeds give two independent 32-bit hashes,
// combined into k indexes by Kirsch-Mitzenmacher double hashing: g_i(x) = h1(x) + i·h2(x) mod m.

/** The id of this hash family, recorded in every encoded filter. Bump it if the function changes. */
export const HASH_FAMILY = 1;

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** 32-bit seeded hash of bytes (unsigned). */
export function hash32(bytes: Uint8Array, seed: number): number {
  let h = seed >>> 0;
  const n = bytes.length;
  const blocks = n & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  // The 1-3 trailing bytes, little-endian.
  const tail = n & 3;
  if (tail > 0) {
    let k = bytes[blocks]!;
    if (tail > 1) k |= bytes[blocks + 1]! << 8;
    if (tail > 2) k |= bytes[blocks + 2]! << 16;
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
  }
  return fmix32(h ^ n);
}

/** MurmurHash3's 32-bit finalizer: every input bit affects every output bit. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The two base hashes of an element for double hashing (h2 forced odd, so it never degenerates to 0). */
export function hashPair(bytes: Uint8Array, seed = 0): [number, number] {
  return [hash32(bytes, seed ^ 0x9747b28c), (hash32(bytes, seed ^ 0x5bd1e995) | 1) >>> 0];
}

/** The i-th of a family of indexes in [0, m) from one hash pair: (h1 + i·h2) mod m. */
export function nthIndex(pair: readonly [number, number], i: number, m: number): number {
  // Exact in float arithmetic: h1 < 2^32, i·h2 < 2^32·i; fine for i < 2^20.
  return (pair[0] + i * pair[1]) % m;
}

/** k indexes in [0, m) for an element (a Bloom filter's bit positions). */
export function bloomIndexes(bytes: Uint8Array, k: number, m: number, seed = 0): number[] {
  const pair = hashPair(bytes, seed);
  const out = new Array<number>(k);
  for (let i = 0; i < k; i++) out[i] = nthIndex(pair, i, m);
  return out;
}
