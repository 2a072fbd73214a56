// Versioned binary encoding of an APBF carrying every parameter, the hash family, the base slot,
// the per-slot hash indices, the union strategy, the generation count, the bits and the shadows.
//
// Layout (integers little-endian):
//   off  size  field
//    0    1    version: 1 dense, 2 sparse
//    1    1    hash family (element-hash.ts HASH_FAMILY)
//    2    1    union strategy (0 Whole Filter, 1 Active Slices, 2 Current Generation)
//    3    1    k
//    4    2    l
//    6    4    m (bits per slice)
//   10    2    base (physical slot of logical slice 0)
//   12    4    count (insertions in the current generation)
//   16    n    hash index of each physical slot, n = k + l
//   16+n  the bit arrays: the slices (n·m/8 bytes, physical order), then the shadows (k·m/8
//         bytes, logical active order; Current Generation only), either
//           dense (version 1): the arrays' bytes as they are, or
//           sparse (version 2): per array, a u32 count of set bits, then each set bit's index
//           as a LEB128 varint of the gap from the previous one (index - previous - 1, the first
//           from -1).
// A dense encoding is HEADER_BYTES + (k+l) bytes longer than apbfByteSize: 116 bytes for the seed's
// (k, l) = (12, 88). The encoder writes whichever form is shorter (dense on a tie), so the encoding
// stays canonical; a delta of a few removes (k bits per dot) then costs tens of bytes, not 11.8 kB.
//
// Decoding checks everything the filter relies on and throws DecodeError on any inconsistency.
import { Apbf, popcount } from "./apbf.js";
import { type ApbfParams, apbfByteSize, checkParams, isUnionStrategy } from "./apbf-params.js";
import { HASH_FAMILY } from "./element-hash.js";
import { DecodeError, checkFilterBytes } from "./errors.js";

export const APBF_DENSE_VERSION = 1;
export const APBF_SPARSE_VERSION = 2;
export const HEADER_BYTES = 16;

/** Encoded length of a dense filter of these parameters (the longest any state of them encodes to). */
export function apbfEncodedSize(p: ApbfParams): number {
  return HEADER_BYTES + p.k + p.l + apbfByteSize(p);
}

function varintSize(x: number): number {
  let n = 1;
  while (x >= 0x80) {
    x = Math.floor(x / 128);
    n++;
  }
  return n;
}

/** Call fn with the gap before each set bit of a (index - previous index - 1), in order. */
function forEachGap(a: Uint8Array, fn: (gap: number) => void): void {
  let prev = -1;
  for (let i = 0; i < a.length; i++) {
    const byte = a[i]!;
    if (byte === 0) continue;
    for (let b = 0; b < 8; b++) {
      if ((byte & (1 << b)) === 0) continue;
      const idx = i * 8 + b;
      fn(idx - prev - 1);
      prev = idx;
    }
  }
}

/** Bytes of an array's sparse form: the u32 count and the gap varints of its set bits. */
function sparseSize(a: Uint8Array): number {
  let size = 4;
  forEachGap(a, (gap) => (size += varintSize(gap)));
  return size;
}

/** The arrays' sparse length, or undefined when the dense form is not longer. */
function sparseBody(f: Apbf): number | undefined {
  const dense = f.bits.length + f.shadows.length;
  const sparse = sparseSize(f.bits) + (f.shadows.length > 0 ? sparseSize(f.shadows) : 0);
  return sparse < dense ? sparse : undefined;
}

/** Encoded length of this filter (dense or sparse, as encodeApbf writes it). */
export function apbfStateEncodedSize(f: Apbf): number {
  return HEADER_BYTES + f.n + (sparseBody(f) ?? f.bits.length + f.shadows.length);
}

export function encodeApbf(f: Apbf): Uint8Array {
  const out = new Uint8Array(apbfStateEncodedSize(f));
  writeApbf(f, out, 0);
  return out;
}

function writeSparse(a: Uint8Array, out: Uint8Array, v: DataView, at: number): number {
  const countAt = at;
  at += 4;
  let count = 0;
  forEachGap(a, (gap) => {
    while (gap >= 0x80) {
      out[at++] = (gap & 0x7f) | 0x80;
      gap = Math.floor(gap / 128);
    }
    out[at++] = gap;
    count++;
  });
  v.setUint32(countAt, count, true);
  return at;
}

/** Read a sparse array into a (zeroed, of its final length); returns the offset after it. */
function readSparse(bytes: Uint8Array, v: DataView, at: number, a: Uint8Array, what: string): number {
  if (bytes.length - at < 4) throw new DecodeError(`APBF: truncated ${what} count`);
  const count = v.getUint32(at, true);
  at += 4;
  const limit = a.length * 8;
  if (count > limit) throw new DecodeError(`APBF: ${count} set bits in ${what} of ${limit} bits`);
  let prev = -1;
  for (let c = 0; c < count; c++) {
    let gap = 0;
    let scale = 1;
    for (;;) {
      if (at >= bytes.length) throw new DecodeError(`APBF: truncated ${what} bit list`);
      const byte = bytes[at++]!;
      gap += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) break;
      scale *= 128;
      if (scale > limit * 128) throw new DecodeError(`APBF: ${what} gap out of range`);
    }
    const idx = prev + 1 + gap;
    if (idx >= limit) throw new DecodeError(`APBF: ${what} bit ${idx} out of range (${limit} bits)`);
    a[idx >>> 3]! |= 1 << (idx & 7);
    prev = idx;
  }
  return at;
}

/** Write f at out[offset…]; returns the offset after it. */
export function writeApbf(f: Apbf, out: Uint8Array, offset: number): number {
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const sparse = sparseBody(f) !== undefined;
  v.setUint8(offset, sparse ? APBF_SPARSE_VERSION : APBF_DENSE_VERSION);
  v.setUint8(offset + 1, f.hashFamily);
  v.setUint8(offset + 2, f.strategy);
  v.setUint8(offset + 3, f.k);
  v.setUint16(offset + 4, f.l, true);
  v.setUint32(offset + 6, f.m, true);
  v.setUint16(offset + 10, f.base, true);
  v.setUint32(offset + 12, f.count, true);
  let at = offset + HEADER_BYTES;
  out.set(f.hashIndex, at);
  at += f.n;
  if (sparse) {
    at = writeSparse(f.bits, out, v, at);
    return f.shadows.length > 0 ? writeSparse(f.shadows, out, v, at) : at;
  }
  out.set(f.bits, at);
  at += f.bits.length;
  out.set(f.shadows, at);
  return at + f.shadows.length;
}

/** Decode a whole buffer holding exactly one filter. */
export function decodeApbf(bytes: Uint8Array, maxFilterBytes?: number): Apbf {
  const { filter, next } = readApbf(bytes, 0, maxFilterBytes);
  if (next !== bytes.length) throw new DecodeError(`APBF: ${bytes.length - next} trailing bytes`);
  return filter;
}

/**
 * Read a filter at bytes[offset…]; returns it and the offset after it. A filter larger than
 * maxFilterBytes is refused (StateLimitError) before it is allocated: a sparse encoding of a few
 * bytes may declare hundreds of megabytes.
 */
export function readApbf(bytes: Uint8Array, offset: number, maxFilterBytes?: number): { filter: Apbf; next: number } {
  if (bytes.length - offset < HEADER_BYTES) throw new DecodeError("APBF: truncated header");
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = v.getUint8(offset);
  if (version !== APBF_DENSE_VERSION && version !== APBF_SPARSE_VERSION) throw new DecodeError(`APBF: unsupported version ${version}`);
  const family = v.getUint8(offset + 1);
  if (family !== HASH_FAMILY) throw new DecodeError(`APBF: unknown hash family ${family} (this node has ${HASH_FAMILY})`);
  const strategy = v.getUint8(offset + 2);
  if (!isUnionStrategy(strategy)) throw new DecodeError(`APBF: unknown union strategy ${strategy}`);
  const k = v.getUint8(offset + 3);
  const l = v.getUint16(offset + 4, true);
  const m = v.getUint32(offset + 6, true);
  let params: ApbfParams;
  try {
    params = checkParams({ k, l, m, strategy });
  } catch (e) {
    throw new DecodeError(`APBF: ${(e as Error).message}`);
  }
  checkFilterBytes("an APBF", apbfByteSize(params), maxFilterBytes);
  const size = version === APBF_DENSE_VERSION ? apbfEncodedSize(params) : HEADER_BYTES + params.k + params.l;
  if (bytes.length - offset < size) throw new DecodeError(`APBF: truncated, need ${size} bytes, have ${bytes.length - offset}`);
  const f = Apbf.blank(params, family);
  const base = v.getUint16(offset + 10, true);
  if (base >= f.n) throw new DecodeError(`APBF: base ${base} out of range for ${f.n} slices`);
  const count = v.getUint32(offset + 12, true);
  if (count >= f.g) throw new DecodeError(`APBF: generation count ${count} not below the generation size ${f.g}`);
  let at = offset + HEADER_BYTES;
  f.hashIndex.set(bytes.subarray(at, at + f.n));
  at += f.n;
  if (version === APBF_DENSE_VERSION) {
    f.bits.set(bytes.subarray(at, at + f.bits.length));
    at += f.bits.length;
    f.shadows.set(bytes.subarray(at, at + f.shadows.length));
    at += f.shadows.length;
  } else {
    at = readSparse(bytes, v, at, f.bits, "slices");
    if (f.shadows.length > 0) at = readSparse(bytes, v, at, f.shadows, "shadows");
  }
  f.base = base;
  f.count = count;
  checkHashIndices(f);
  checkGeneration(f);
  return { filter: f, next: at };
}

/** Hash indices must follow the strategy's rule (apbf.ts header). */
function checkHashIndices(f: Apbf): void {
  if (f.strategy === 0) {
    for (let p = 0; p < f.n; p++) {
      if (f.hashIndex[p] !== p) throw new DecodeError(`APBF: Whole Filter slot ${p} has hash index ${f.hashIndex[p]}`);
    }
    return;
  }
  const h0 = f.hashIndex[f.base]!;
  for (let i = 0; i < f.n; i++) {
    const want = (h0 + i) % f.k;
    if (f.hashIndex[f.slot(i)] !== want) {
      throw new DecodeError(`APBF: logical slice ${i} has hash index ${f.hashIndex[f.slot(i)]}, expected ${want}`);
    }
  }
}

/**
 * Invariants of the current generation: slice 0 holds only it, so its set bits never exceed the
 * count; each shadow is a subset of its active slice, and shadow 0 equals slice 0.
 */
function checkGeneration(f: Apbf): void {
  const sb = f.sliceBytes;
  if (f.setBits(0) > f.count) throw new DecodeError(`APBF: slice 0 has ${f.setBits(0)} bits for ${f.count} insertions`);
  if (f.shadows.length === 0) return;
  for (let i = 0; i < f.k; i++) {
    const slice = f.slot(i) * sb;
    for (let j = 0; j < sb; j++) {
      const s = f.shadows[i * sb + j]!;
      const b = f.bits[slice + j]!;
      if ((s & ~b) !== 0) throw new DecodeError(`APBF: shadow ${i} has bits its slice lacks`);
      if (i === 0 && s !== b) throw new DecodeError("APBF: shadow 0 differs from slice 0");
    }
  }
  if (popcount(f.shadows, 0, sb) !== f.setBits(0)) throw new DecodeError("APBF: shadow 0 differs from slice 0");
}
