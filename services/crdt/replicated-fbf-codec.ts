// The byte codec of the replicated Forgetful Bloom Filter (replicated-fbf.ts). It works on the wire
// form of a state -- parameters (or none, for bottom) and a map epoch -> filter bits -- so it does
// not depend on the ReplicatedFbf class; ReplicatedFbfLattice.encode/encodedSize/decode wrap it.
//
// Version 1, all integers unsigned LEB128 varints (minimal, at most 2^53 - 1):
//   u8 version = 1 | u8 flags (bit 0: parameters follow; other bits zero)
//   [hashFamily, m, k, periodMs, pastEpochs]            when flag bit 0
//   count of epochs (0 without parameters), then per epoch in ascending order:
//     epoch (the first absolute, then the gap minus one to the previous)
//     u8 form: 0 = sparse: count of set bits, then bit indexes (first absolute, then gap minus one)
//              1 = dense: ceil(m/8) bytes, bit i in byte i>>3 at position i&7, bits >= m zero
// The encoder picks the smaller form per epoch (sparse on a tie), and decode accepts only that
// choice, so equal states have equal bytes. An insert delta costs about 2·(k+3) bytes plus the
// parameters, whatever m is.
import { DecodeError, StateLimitError, checkFilterBytes } from "./errors.js";
import { ownedCopy } from "./owned-copy.js";
import { type ReplicatedFbfParams, paramsProblem, retryFilterBytes, setBits } from "./replicated-fbf-params.js";

/** What the codec reads and writes: a state's parameters and its non-empty epoch filters. */
export interface ReplicatedFbfWire {
  params: ReplicatedFbfParams | null;
  epochs: ReadonlyMap<number, Uint8Array>;
}

export const FBF_CODEC_VERSION = 1;
const FORM_SPARSE = 0;
const FORM_DENSE = 1;

function varintSize(v: number): number {
  let n = 1;
  while (v >= 128) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

function sparseSize(idx: readonly number[]): number {
  let n = varintSize(idx.length);
  for (let j = 0; j < idx.length; j++) n += varintSize(j === 0 ? idx[0]! : idx[j]! - idx[j - 1]! - 1);
  return n;
}

function paramList(p: ReplicatedFbfParams): number[] {
  return [p.hashFamily, p.m, p.k, p.periodMs, p.pastEpochs];
}

/** Per-epoch layout, shared by encode and encodedSize. */
function layout(s: ReplicatedFbfWire): { epoch: number; gap: number; idx: number[]; dense: boolean }[] {
  const m = s.params?.m ?? 0;
  const sorted = [...s.epochs.keys()].sort((x, y) => x - y);
  return sorted.map((epoch, j) => {
    const idx = setBits(s.epochs.get(epoch)!, m);
    return { epoch, gap: j === 0 ? epoch : epoch - sorted[j - 1]! - 1, idx, dense: Math.ceil(m / 8) < sparseSize(idx) };
  });
}

export function encodedSizeReplicatedFbf(s: ReplicatedFbfWire): number {
  let n = 2;
  if (s.params !== null) for (const v of paramList(s.params)) n += varintSize(v);
  const rows = layout(s);
  n += varintSize(rows.length);
  for (const r of rows) n += varintSize(r.gap) + 1 + (r.dense ? Math.ceil(s.params!.m / 8) : sparseSize(r.idx));
  return n;
}

export function encodeReplicatedFbf(s: ReplicatedFbfWire): Uint8Array {
  const out: number[] = [FBF_CODEC_VERSION, s.params === null ? 0 : 1];
  const put = (v: number) => {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`cannot encode ${v} as a varint`);
    while (v >= 128) {
      out.push((v % 128) | 128);
      v = Math.floor(v / 128);
    }
    out.push(v);
  };
  if (s.params !== null) for (const v of paramList(s.params)) put(v);
  const rows = layout(s);
  put(rows.length);
  for (const r of rows) {
    put(r.gap);
    if (r.dense) {
      out.push(FORM_DENSE);
      for (const b of s.epochs.get(r.epoch)!) out.push(b);
    } else {
      out.push(FORM_SPARSE);
      put(r.idx.length);
      r.idx.forEach((v, j) => put(j === 0 ? v : v - r.idx[j - 1]! - 1));
    }
  }
  return Uint8Array.from(out);
}

class Reader {
  pos = 0;
  constructor(private readonly b: Uint8Array) {}
  get left(): number {
    return this.b.length - this.pos;
  }
  byte(what: string): number {
    if (this.pos >= this.b.length) throw new DecodeError(`forgetful Bloom filter: truncated at ${what}`);
    return this.b[this.pos++]!;
  }
  varint(what: string): number {
    let v = 0;
    for (let i = 0; ; i++) {
      const x = this.byte(what);
      if (i === 7 && x > 0x0f) throw new DecodeError(`forgetful Bloom filter: ${what} exceeds 2^53 - 1`);
      v += (x & 0x7f) * 2 ** (7 * i);
      if ((x & 0x80) === 0) {
        if (x === 0 && i > 0) throw new DecodeError(`forgetful Bloom filter: ${what} is not a minimal varint`);
        return v;
      }
    }
  }
}

/**
 * Decode the canonical bytes of a state; anything else is a DecodeError. With maxFilterBytes (a
 * state from outside), parameters whose filter is larger are refused, and so are more epochs than
 * twice that filter holds (or the limit, if larger): each sparse epoch is allocated whole, so a few
 * bytes per epoch could otherwise ask for gigabytes. (A cluster's states hold N+2 epochs, or N+3
 * next to a peer whose clock is ahead within the skew bound.)
 */
export function decodeReplicatedFbf(bytes: Uint8Array, maxFilterBytes?: number): { params: ReplicatedFbfParams | null; epochs: Map<number, Uint8Array> } {
  const r = new Reader(bytes);
  const version = r.byte("version");
  if (version !== FBF_CODEC_VERSION) throw new DecodeError(`forgetful Bloom filter: unknown codec version ${version}`);
  const flags = r.byte("flags");
  if (flags > 1) throw new DecodeError(`forgetful Bloom filter: unknown flags ${flags}`);
  let params: ReplicatedFbfParams | null = null;
  if (flags === 1) {
    const [hashFamily, m, k, periodMs, pastEpochs] = ["hash family", "m", "k", "period", "past epochs"].map((w) =>
      r.varint(w),
    ) as [number, number, number, number, number];
    params = { m, k, hashFamily, periodMs, pastEpochs };
    const why = paramsProblem(params);
    if (why !== undefined) throw new DecodeError(`forgetful Bloom filter: ${why}`);
  }
  const count = r.varint("epoch count");
  if (params === null && count > 0) throw new DecodeError("forgetful Bloom filter: epochs without parameters");
  // Each epoch takes at least 3 bytes: refuse counts the input cannot hold before allocating.
  if (count * 3 > r.left) throw new DecodeError(`forgetful Bloom filter: ${count} epochs in ${r.left} bytes`);
  if (params !== null && maxFilterBytes !== undefined) {
    const window = retryFilterBytes(params);
    checkFilterBytes("a retry filter", window, maxFilterBytes);
    const held = count * Math.ceil(params.m / 8);
    const allowed = Math.max(maxFilterBytes, 2 * window);
    if (held > allowed) throw new StateLimitError(`a retry filter of ${count} epochs`, held, allowed);
  }
  const epochs = new Map<number, Uint8Array>();
  let epoch = -1;
  for (let j = 0; j < count; j++) {
    const what = `epoch[${j}]`;
    epoch = j === 0 ? r.varint(what) : epoch + 1 + r.varint(what);
    if (!Number.isSafeInteger(epoch)) throw new DecodeError(`forgetful Bloom filter: ${what} out of range`);
    const m = params!.m;
    const denseLen = Math.ceil(m / 8);
    const form = r.byte(`${what} form`);
    let bits: Uint8Array;
    let idx: number[];
    if (form === FORM_DENSE) {
      if (r.left < denseLen) throw new DecodeError(`forgetful Bloom filter: truncated at ${what} bits`);
      bits = ownedCopy(bytes.subarray(r.pos, r.pos + denseLen));
      r.pos += denseLen;
      if (m % 8 !== 0 && bits[denseLen - 1]! >>> (m % 8) !== 0) {
        throw new DecodeError(`forgetful Bloom filter: ${what} has bits at or beyond m = ${m}`);
      }
      idx = setBits(bits, m);
    } else if (form === FORM_SPARSE) {
      const n = r.varint(`${what} bit count`);
      if (n === 0 || n > m || n > r.left) throw new DecodeError(`forgetful Bloom filter: ${what} bit count ${n} invalid`);
      bits = new Uint8Array(denseLen);
      idx = [];
      let i = -1;
      for (let q = 0; q < n; q++) {
        i = q === 0 ? r.varint(`${what} bit`) : i + 1 + r.varint(`${what} bit`);
        if (i >= m) throw new DecodeError(`forgetful Bloom filter: ${what} bit ${i} is not below m = ${m}`);
        bits[i >>> 3]! |= 1 << (i & 7);
        idx.push(i);
      }
    } else {
      throw new DecodeError(`forgetful Bloom filter: ${what} has unknown form ${form}`);
    }
    if (idx.length === 0) throw new DecodeError(`forgetful Bloom filter: ${what} is empty`);
    if ((form === FORM_DENSE) !== denseLen < sparseSize(idx)) {
      throw new DecodeError(`forgetful Bloom filter: ${what} is not in its canonical (smaller) form`);
    }
    epochs.set(epoch, bits);
  }
  if (r.left !== 0) throw new DecodeError(`forgetful Bloom filter: ${r.left} trailing bytes`);
  return { params, epochs };
}
