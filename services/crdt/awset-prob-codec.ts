// Binary encoding of an AWSetProb state (own format, versioned; integers little-endian):
//
//   u8   version: 1 for a state, 2 for a delta that lists its removed dots
//   …    the tombstone APBF (apbf-codec.ts; self-delimiting, its header fixes its length)
//   u32  number of entries
//   per entry, elements in strictly ascending byte order:
//     u32  element length, then the element bytes
//     u32  number of dots (>= 1), then each dot as u64, strictly ascending
//   version 2 only:
//     u32  number of removed dots, then each as u64, strictly ascending
//
// The encoding is canonical (one byte string per state), so equal states encode equally. A state
// (no list) encodes as it always did: version 1, which earlier versions read. Decoding validates
// and throws DecodeError; a dot may appear under one element only, and a removed dot is not live.
// A listed dot may be one the filter no longer reports: a delta-group that waited for a slow
// neighbour can list more removes than its filter's window holds.
import { apbfStateEncodedSize, readApbf, writeApbf } from "./apbf-codec.js";
import { AWSetProb, type ElementKey, type ProbDot, compareDots } from "./awset-prob-state.js";
import { elementBytes, elementKey } from "./awset.js";
import { DecodeError } from "./errors.js";

export const AWSET_PROB_CODEC_VERSION = 1;
/** The version of a delta that lists its removed dots. */
export const AWSET_PROB_LISTED_VERSION = 2;

/** Entries in canonical order: element keys sorted (latin1 order = byte order), dots ascending. */
function canonicalEntries(s: AWSetProb): [ElementKey, ProbDot[]][] {
  return [...s.entries.keys()].sort().map((k) => [k, [...s.entries.get(k)!].sort(compareDots)]);
}

export function awsetProbEncodedSize(s: AWSetProb): number {
  let size = 1 + apbfStateEncodedSize(s.tombstones) + 4;
  for (const [k, dots] of s.entries) size += 4 + k.length + 4 + 8 * dots.size;
  if (s.removed !== undefined) size += 4 + 8 * s.removed.size;
  return size;
}

export function encodeAWSetProb(s: AWSetProb): Uint8Array {
  const out = new Uint8Array(awsetProbEncodedSize(s));
  out[0] = s.removed === undefined ? AWSET_PROB_CODEC_VERSION : AWSET_PROB_LISTED_VERSION;
  const at = writeEntries(s, out, writeApbf(s.tombstones, out, 1));
  if (s.removed !== undefined) {
    const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
    v.setUint32(at, s.removed.size, true);
    let p = at + 4;
    for (const d of [...s.removed].sort(compareDots)) {
      v.setBigUint64(p, d, true);
      p += 8;
    }
  }
  return out;
}

/**
 * The entries part of the encoding alone (the live elements with their dots, canonical): what
 * reads of the state answer and the adds behind them, without the filter.
 */
export function encodeAWSetProbEntries(s: AWSetProb): Uint8Array {
  const listBytes = s.removed === undefined ? 0 : 4 + 8 * s.removed.size;
  const out = new Uint8Array(awsetProbEncodedSize(s) - 1 - apbfStateEncodedSize(s.tombstones) - listBytes);
  writeEntries(s, out, 0);
  return out;
}

/** Writes the entries part at from; returns where it ends. */
function writeEntries(s: AWSetProb, out: Uint8Array, from: number): number {
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let at = from;
  const entries = canonicalEntries(s);
  v.setUint32(at, entries.length, true);
  at += 4;
  for (const [k, dots] of entries) {
    const el = elementBytes(k);
    v.setUint32(at, el.length, true);
    out.set(el, at + 4);
    at += 4 + el.length;
    v.setUint32(at, dots.length, true);
    at += 4;
    for (const d of dots) {
      v.setBigUint64(at, d, true);
      at += 8;
    }
  }
  return at;
}

export function decodeAWSetProb(bytes: Uint8Array, maxFilterBytes?: number): AWSetProb {
  if (bytes.length < 1) throw new DecodeError("AWSET_PROB: empty input");
  const version = bytes[0];
  if (version !== AWSET_PROB_CODEC_VERSION && version !== AWSET_PROB_LISTED_VERSION) throw new DecodeError(`AWSET_PROB: unsupported version ${version}`);
  const { filter, next } = readApbf(bytes, 1, maxFilterBytes);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = next;
  const need = (n: number, what: string): void => {
    if (bytes.length - at < n) throw new DecodeError(`AWSET_PROB: truncated ${what}`);
  };
  need(4, "entry count");
  const count = v.getUint32(at, true);
  at += 4;
  const entries = new Map<ElementKey, Set<ProbDot>>();
  const seen = new Set<ProbDot>();
  let prev: ElementKey | undefined;
  for (let i = 0; i < count; i++) {
    need(4, `entries[${i}] element length`);
    const len = v.getUint32(at, true);
    at += 4;
    if (len === 0) throw new DecodeError(`AWSET_PROB: entries[${i}]: an empty element (an element has at least one byte)`);
    need(len, `entries[${i}] element`);
    const key = elementKey(bytes.subarray(at, at + len));
    at += len;
    if (prev !== undefined && !(prev < key)) throw new DecodeError(`AWSET_PROB: entries[${i}]: elements not sorted and unique`);
    prev = key;
    need(4, `entries[${i}] dot count`);
    const n = v.getUint32(at, true);
    at += 4;
    if (n === 0) throw new DecodeError(`AWSET_PROB: entries[${i}]: an element with no dots`);
    need(8 * n, `entries[${i}] dots`);
    const dots = new Set<ProbDot>();
    let last = -1n;
    for (let j = 0; j < n; j++) {
      const d = v.getBigUint64(at, true);
      at += 8;
      if (d <= last) throw new DecodeError(`AWSET_PROB: entries[${i}]: dots not ascending and unique`);
      if (seen.has(d)) throw new DecodeError(`AWSET_PROB: entries[${i}]: dot ${d} appears under two elements`);
      last = d;
      seen.add(d);
      dots.add(d);
    }
    entries.set(key, dots);
  }
  let removed: Set<ProbDot> | undefined;
  if (version === AWSET_PROB_LISTED_VERSION) {
    need(4, "removed dot count");
    const n = v.getUint32(at, true);
    at += 4;
    need(8 * n, "removed dots");
    removed = new Set();
    let last = -1n;
    for (let j = 0; j < n; j++) {
      const d = v.getBigUint64(at, true);
      at += 8;
      if (d <= last) throw new DecodeError(`AWSET_PROB: removed dots not ascending and unique`);
      if (seen.has(d)) throw new DecodeError(`AWSET_PROB: removed dot ${d} is also live`);
      last = d;
      removed.add(d);
    }
  }
  if (at !== bytes.length) throw new DecodeError(`AWSET_PROB: ${bytes.length - at} trailing bytes`);
  return AWSetProb.fromParts(entries, filter, removed);
}
