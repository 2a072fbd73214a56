// Versioned binary encoding of an APBF carrying every parameter, the hash family, the base slot,
// the per-slot hash indices, the union strategy, the generation count, the bits and the shadows.
//
// Layout, version 1 (integers little-endian):
//   off  size  field
//    0    1    version (1)
//    1    1    hash family (element-hash.ts HASH_FAMILY)
//    2    1    union strategy (0 Whole Filter, 1 Active Slices, 2 Current Generation)
//    3    1    k
//    4    2    l
//    6    4    m (bits per slice)
//   10    2    base (physical slot of logical slice 0)
//   12    4    count (insertions in the current generation)
//   16    n    hash index of each physical slot, n = k + l
//   16+n  n·m/8     slices, physical order
//   …     k·m/8     shadows, logical active order (Current Generation only)
// so the encoding is HEADER_BYTES + (k+l) bytes longer than apbfByteSize: 116 bytes for the
// seed's (k, l) = (12, 88).
//
// Decoding checks everything the filter relies on and throws DecodeError on any inconsistency.
import { Apbf, popcount } from "./apbf.js";
import { type ApbfParams, apbfByteSize, checkParams, isUnionStrategy } from "./apbf-params.js";
import { HASH_FAMILY } from "./element-hash.js";
import { DecodeError } from "./errors.js";

export const APBF_CODEC_VERSION = 1;
export const HEADER_BYTES = 16;

/** Encoded length of a filter of these parameters (the same for every state). */
export function apbfEncodedSize(p: ApbfParams): number {
  return HEADER_BYTES + p.k + p.l + apbfByteSize(p);
}

export function encodeApbf(f: Apbf): Uint8Array {
  const out = new Uint8Array(apbfEncodedSize(f.params));
  writeApbf(f, out, 0);
  return out;
}

/** Write f at out[offset…]; returns the offset after it. */
export function writeApbf(f: Apbf, out: Uint8Array, offset: number): number {
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  v.setUint8(offset, APBF_CODEC_VERSION);
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
  out.set(f.bits, at);
  at += f.bits.length;
  out.set(f.shadows, at);
  return at + f.shadows.length;
}

/** Decode a whole buffer holding exactly one filter. */
export function decodeApbf(bytes: Uint8Array): Apbf {
  const { filter, next } = readApbf(bytes, 0);
  if (next !== bytes.length) throw new DecodeError(`APBF: ${bytes.length - next} trailing bytes`);
  return filter;
}

/** Read a filter at bytes[offset…]; returns it and the offset after it. */
export function readApbf(bytes: Uint8Array, offset: number): { filter: Apbf; next: number } {
  if (bytes.length - offset < HEADER_BYTES) throw new DecodeError("APBF: truncated header");
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = v.getUint8(offset);
  if (version !== APBF_CODEC_VERSION) throw new DecodeError(`APBF: unsupported version ${version}`);
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
  const size = apbfEncodedSize(params);
  if (bytes.length - offset < size) throw new DecodeError(`APBF: truncated, need ${size} bytes, have ${bytes.length - offset}`);
  const f = Apbf.blank(params, family);
  const base = v.getUint16(offset + 10, true);
  if (base >= f.n) throw new DecodeError(`APBF: base ${base} out of range for ${f.n} slices`);
  const count = v.getUint32(offset + 12, true);
  if (count >= f.g) throw new DecodeError(`APBF: generation count ${count} not below the generation size ${f.g}`);
  let at = offset + HEADER_BYTES;
  f.hashIndex.set(bytes.subarray(at, at + f.n));
  at += f.n;
  f.bits.set(bytes.subarray(at, at + f.bits.length));
  at += f.bits.length;
  f.shadows.set(bytes.subarray(at, at + f.shadows.length));
  at += f.shadows.length;
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
