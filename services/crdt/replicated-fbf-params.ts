// Parameters of the replicated Forgetful Bloom Filter (replicated-fbf.ts): their validation, the
// epoch arithmetic every node shares without coordination, and the bit helpers used by both the
// state and its codec (replicated-fbf-codec.ts). Nothing here holds state.
import { HASH_FAMILY } from "./element-hash.js";

export interface ReplicatedFbfParams {
  /** Bits per epoch filter. */
  m: number;
  /** Hash functions per filter. */
  k: number;
  /** The element-hash family (HASH_FAMILY). */
  hashFamily: number;
  /** Epoch period P in ms. */
  periodMs: number;
  /** Past epochs retained (the seed's N >= 1). */
  pastEpochs: number;
}

/** Joining states built with different parameters: their bits mean different things. */
export class FbfParamsMismatchError extends Error {
  override readonly name = "FbfParamsMismatchError";
  constructor(
    readonly a: ReplicatedFbfParams,
    readonly b: ReplicatedFbfParams,
  ) {
    super(`cannot join forgetful Bloom filters with different parameters: ${fmt(a)} vs ${fmt(b)}`);
  }
}

const fmt = (p: ReplicatedFbfParams) =>
  `(m=${p.m}, k=${p.k}, hash=${p.hashFamily}, P=${p.periodMs}ms, N=${p.pastEpochs})`;

/** Bits of one epoch filter, and hash functions, at most. */
export const MAX_EPOCH_BITS = 1 << 24;
export const MAX_EPOCH_HASHES = 64;

const LIMITS = { m: [8, MAX_EPOCH_BITS], k: [1, MAX_EPOCH_HASHES], periodMs: [1, 2 ** 40], pastEpochs: [1, 1 << 12] } as const;

/** Bytes the filter of these parameters holds on one clock: N+2 epoch filters of m bits. */
export function retryFilterBytes(p: ReplicatedFbfParams): number {
  return (p.pastEpochs + 2) * Math.ceil(p.m / 8);
}

/** Why params are invalid, or undefined when they are valid. */
export function paramsProblem(p: ReplicatedFbfParams): string | undefined {
  for (const [name, [lo, hi]] of Object.entries(LIMITS)) {
    const v = p[name as keyof typeof LIMITS];
    if (!Number.isInteger(v) || v < lo || v > hi) return `${name} must be an integer in [${lo}, ${hi}], got ${v}`;
  }
  if (p.hashFamily !== HASH_FAMILY) return `unknown hash family ${p.hashFamily} (this node has ${HASH_FAMILY})`;
  return undefined;
}

export function sameParams(a: ReplicatedFbfParams, b: ReplicatedFbfParams): boolean {
  return (
    a.m === b.m && a.k === b.k && a.hashFamily === b.hashFamily && a.periodMs === b.periodMs && a.pastEpochs === b.pastEpochs
  );
}

export function epochOf(now: number, periodMs: number): number {
  return Math.floor(now / periodMs);
}

/**
 * Guaranteed retention (N+1)·P on one clock: an id stays present at least this long after its
 * insert, as read on the clock that inserted it. Across nodes whose clocks differ by up to B the
 * guarantee is (N+1)·P - B of reference time (header of replicated-fbf.ts).
 */
export function retentionMs(p: ReplicatedFbfParams): number {
  return (p.pastEpochs + 1) * p.periodMs;
}

export function checkNow(now: number): void {
  if (!Number.isSafeInteger(now) || now < 0) throw new RangeError(`now must be a non-negative integer (ms), got ${now}`);
}

export const hasBit = (bits: Uint8Array, i: number) => (bits[i >>> 3]! & (1 << (i & 7))) !== 0;
export const isZero = (bits: Uint8Array) => bits.every((b) => b === 0);

export function popcount(bits: Uint8Array): number {
  let n = 0;
  for (let b of bits) {
    for (; b !== 0; b &= b - 1) n++;
  }
  return n;
}

/** The indexes of the set bits below m, ascending. */
export function setBits(bits: Uint8Array, m: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < m; i++) if (hasBit(bits, i)) out.push(i);
  return out;
}
