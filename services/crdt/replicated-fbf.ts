// The replicated Forgetful Bloom Filter: the FBF of seed 003 as a join-semilattice, so that a
// retry reaching another replica of a counter is still recognised (issue 17; the seed's own
// per-replica FBFs diverge, digest of seed 003, §12 item 5).
//
// Generations are epochs of a fixed period P: epoch(t) = floor(t / P). Every node agrees which
// filter is "present" without coordination. At local epoch e the seed's filters map to epochs:
// future = e+1, present = e, past_1 = e-1 ... past_N = e-N.
//
// State: parameters (m, k, hash family, P, N) and a map epoch -> Bloom filter bits. Join is the
// bitwise OR per epoch. insert(id, now) sets the id's k bits in epochs e and e+1 and returns a delta
// carrying exactly those bits (all k per epoch, even bits already set locally: a receiver may not
// hold them). contains(id, now) is the seed's corrected Alg 2 over epochs e+1 .. e-N.
//
// Forgetting. prune(now) drops epochs older than e-N. Pruning is not monotone, so over time the
// structure is not a lattice (like the seed's forgetting); for a fixed now, join, leq, decompose
// and difference are the lattice of the powerset of (epoch, bit) pairs. joinAt(a, b, now) ignores
// epochs the receiver has already forgotten instead of resurrecting them.
//
// Clock skew: nodes' clocks are assumed within B of each other, with B much smaller than P. Then an
// id inserted on any node at t is found on every node that has its delta for all t' in
// [t, t + (N+1)·P - B) of local time. skewReport flags deltas whose epochs put the sender further
// than B from the local clock (the node turns that into a metric and a log line).
//
// The state travels inside a counter key, not as an object type of its own: the lattice has type
// OBJECT_TYPE_UNSPECIFIED and is not registered.
import { CausalContext } from "./causal-context.js";
import { bloomIndexes, HASH_FAMILY } from "./element-hash.js";
import { DecodeError } from "./errors.js";
import { type FbfId, eq43, idBytes } from "./fbf.js";
import { type Lattice, ObjectType } from "./lattice.js";

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

const LIMITS = { m: [8, 1 << 24], k: [1, 64], periodMs: [1, 2 ** 40], pastEpochs: [1, 1 << 12] } as const;

/** Why params are invalid, or undefined when they are valid. */
function paramsProblem(p: ReplicatedFbfParams): string | undefined {
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

/** Guaranteed retention (N+1)·P: an id stays present at least this long after its insert. */
export function retentionMs(p: ReplicatedFbfParams): number {
  return (p.pastEpochs + 1) * p.periodMs;
}

function checkNow(now: number): void {
  if (!Number.isSafeInteger(now) || now < 0) throw new RangeError(`now must be a non-negative integer (ms), got ${now}`);
}

const hasBit = (bits: Uint8Array, i: number) => (bits[i >>> 3]! & (1 << (i & 7))) !== 0;
const isZero = (bits: Uint8Array) => bits.every((b) => b === 0);

function popcount(bits: Uint8Array): number {
  let n = 0;
  for (let b of bits) {
    for (; b !== 0; b &= b - 1) n++;
  }
  return n;
}

/**
 * A replicated FBF state (or delta). params is null only in the bottom of the lattice, which joins
 * with states of any parameters. Invariant: no epoch holds an all-zero filter.
 */
export class ReplicatedFbf {
  constructor(
    public params: ReplicatedFbfParams | null,
    readonly epochs: Map<number, Uint8Array> = new Map(),
  ) {}

  static empty(params: ReplicatedFbfParams): ReplicatedFbf {
    const why = paramsProblem(params);
    if (why !== undefined) throw new RangeError(why);
    return new ReplicatedFbf({ ...params });
  }

  private p(): ReplicatedFbfParams {
    if (this.params === null) throw new RangeError("the bottom state has no parameters: start from ReplicatedFbf.empty");
    return this.params;
  }

  private indexes(id: FbfId): number[] {
    const p = this.p();
    return bloomIndexes(idBytes(id), p.k, p.m);
  }

  /** The delta of inserting id at now: its k bits in the present and the future epoch. Pure. */
  insertDelta(id: FbfId, now: number): ReplicatedFbf {
    checkNow(now);
    const p = this.p();
    const e = epochOf(now, p.periodMs);
    const bits = new Uint8Array(Math.ceil(p.m / 8));
    for (const i of this.indexes(id)) bits[i >>> 3]! |= 1 << (i & 7);
    return new ReplicatedFbf(p, new Map([[e, bits], [e + 1, bits.slice()]]));
  }

  /** Insert id at now into this state and return the delta to ship to the other replicas. */
  insert(id: FbfId, now: number): ReplicatedFbf {
    const d = this.insertDelta(id, now);
    ReplicatedFbfLattice.joinInPlace(this, d);
    return d;
  }

  /**
   * The seed's Alg 1 for a counter update: a member is a retry (nothing inserted, delta null);
   * otherwise the id is inserted and its delta returned.
   */
  checkAndInsert(id: FbfId, now: number): { duplicate: boolean; delta: ReplicatedFbf | null } {
    if (this.contains(id, now)) return { duplicate: true, delta: null };
    return { duplicate: false, delta: this.insert(id, now) };
  }

  /** Corrected Alg 2 over epochs e+1 (future), e (present), e-1 .. e-N (past). */
  contains(id: FbfId, now: number): boolean {
    checkNow(now);
    if (this.params === null) return false;
    const idx = this.indexes(id);
    const e = epochOf(now, this.params.periodMs);
    const has = (ep: number) => {
      const bits = this.epochs.get(ep);
      return bits !== undefined && idx.every((i) => hasBit(bits, i));
    };
    if (has(e + 1)) return true;
    let prev = has(e);
    for (let j = 1; j <= this.params.pastEpochs; j++) {
      const cur = has(e - j);
      if (prev && cur) return true;
      prev = cur;
    }
    return prev; // the oldest retained epoch alone
  }

  /**
   * Eq 4.3 of seed 003 with p(B) = (bits set / m)^k per epoch filter. Replicas do not know how many
   * ids each filter holds (a delta may carry several, and duplicates are absorbed), but the fill
   * ratio gives the same per-filter estimate without counts.
   */
  fppEstimate(now: number): number {
    checkNow(now);
    if (this.params === null) return 0;
    const { m, k, periodMs, pastEpochs } = this.params;
    const e = epochOf(now, periodMs);
    const ps: number[] = [];
    for (let ep = e + 1; ep >= e - pastEpochs; ep--) {
      const bits = this.epochs.get(ep);
      ps.push(bits === undefined ? 0 : Math.pow(popcount(bits) / m, k));
    }
    return eq43(ps);
  }
}

/** The epochs a node at now still retains: [e-N, +inf). Later epochs come from skewed peers. */
function oldestRetained(p: ReplicatedFbfParams, now: number): number {
  return epochOf(now, p.periodMs) - p.pastEpochs;
}

/** s without the epochs older than the retention window at now. Pure (shares the kept arrays). */
export function prune(s: ReplicatedFbf, now: number): ReplicatedFbf {
  checkNow(now);
  if (s.params === null) return s;
  const lo = oldestRetained(s.params, now);
  return new ReplicatedFbf(s.params, new Map([...s.epochs].filter(([e]) => e >= lo)));
}

/** Prune in place; true when something was dropped. */
export function pruneInPlace(s: ReplicatedFbf, now: number): boolean {
  checkNow(now);
  if (s.params === null) return false;
  const lo = oldestRetained(s.params, now);
  let dropped = false;
  for (const e of [...s.epochs.keys()]) {
    if (e < lo) {
      s.epochs.delete(e);
      dropped = true;
    }
  }
  return dropped;
}

/** The join a receiver at now performs: forgotten epochs of either side are not resurrected. */
export function joinAt(a: ReplicatedFbf, b: ReplicatedFbf, now: number): ReplicatedFbf {
  return prune(ReplicatedFbfLattice.join(a, b), now);
}

/** joinAt into target; true when target changed. */
export function joinInPlaceAt(target: ReplicatedFbf, other: ReplicatedFbf, now: number): boolean {
  const dropped = pruneInPlace(target, now);
  const changed = ReplicatedFbfLattice.joinInPlace(target, prune(other, now));
  return dropped || changed;
}

export interface SkewReport {
  /** ahead: the sender's clock is later than ours; behind: earlier (or the delta was delayed). */
  direction: "ahead" | "behind";
  senderEpoch: number;
  localEpoch: number;
  /** The least skew (ms) consistent with the delta; more than boundMs. */
  minSkewMs: number;
}

/**
 * Compare a received delta's epochs with the local clock. An insert at the sender's time s puts
 * bits in epochs floor(s/P) and floor(s/P)+1, so the sender's present epoch is the highest epoch
 * minus one and s lies in [senderEpoch·P, (senderEpoch+1)·P). "ahead" is conclusive: the delta
 * cannot have been sent before now. "behind" is a lower bound that includes the delivery delay, so
 * it is meaningful only for fresh insert deltas (not for resends or full-state transfers).
 */
export function skewReport(epochs: Iterable<number>, now: number, periodMs: number, boundMs: number): SkewReport | null {
  let max = -Infinity;
  for (const e of epochs) if (e > max) max = e;
  if (max === -Infinity) return null;
  const senderEpoch = max - 1;
  const localEpoch = epochOf(now, periodMs);
  const ahead = senderEpoch * periodMs - now;
  if (ahead > boundMs) return { direction: "ahead", senderEpoch, localEpoch, minSkewMs: ahead };
  const behind = now - (senderEpoch + 1) * periodMs;
  if (behind > boundMs) return { direction: "behind", senderEpoch, localEpoch, minSkewMs: behind };
  return null;
}

// ---- lattice operations at a fixed now -------------------------------------------------------

/** The parameters of a join, or a thrown FbfParamsMismatchError. */
function joinedParams(a: ReplicatedFbf, b: ReplicatedFbf): ReplicatedFbfParams | null {
  if (a.params === null) return b.params;
  if (b.params !== null && !sameParams(a.params, b.params)) throw new FbfParamsMismatchError(a.params, b.params);
  return a.params;
}

function bitsLeq(a: Uint8Array, b: Uint8Array | undefined): boolean {
  if (b === undefined) return false; // a is never all zero
  for (let i = 0; i < a.length; i++) if ((a[i]! & ~b[i]!) !== 0) return false;
  return true;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** One irreducible: a single bit of one epoch. */
function singleBit(p: ReplicatedFbfParams, epoch: number, i: number): ReplicatedFbf {
  const bits = new Uint8Array(Math.ceil(p.m / 8));
  bits[i >>> 3] = 1 << (i & 7);
  return new ReplicatedFbf(p, new Map([[epoch, bits]]));
}

export const ReplicatedFbfLattice: Lattice<ReplicatedFbf> = {
  // Not an object type of its own: the state travels inside a counter key.
  type: ObjectType.OBJECT_TYPE_UNSPECIFIED,
  name: "FORGETFUL_BLOOM_FILTER",
  bottom: () => new ReplicatedFbf(null),
  isBottom: (s) => s.params === null && s.epochs.size === 0,
  clone: (s) => new ReplicatedFbf(s.params, new Map([...s.epochs].map(([e, b]) => [e, b.slice()]))),
  join(a, b) {
    const out = ReplicatedFbfLattice.clone(a);
    ReplicatedFbfLattice.joinInPlace(out, b);
    return out;
  },
  joinInPlace(t, o) {
    const params = joinedParams(t, o);
    let changed = false;
    if (t.params === null && params !== null) {
      t.params = params;
      changed = true;
    }
    for (const [e, ob] of o.epochs) {
      const tb = t.epochs.get(e);
      if (tb === undefined) {
        t.epochs.set(e, ob.slice());
        changed = true;
        continue;
      }
      for (let i = 0; i < tb.length; i++) {
        const v = tb[i]! | ob[i]!;
        if (v !== tb[i]) {
          tb[i] = v;
          changed = true;
        }
      }
    }
    return changed;
  },
  leq(a, b) {
    if (a.params === null) return true;
    if (b.params === null || !sameParams(a.params, b.params)) return false;
    for (const [e, ab] of a.epochs) if (!bitsLeq(ab, b.epochs.get(e))) return false;
    return true;
  },
  equals(a, b) {
    if (a.params === null || b.params === null) {
      if (a.params !== b.params) return false;
    } else if (!sameParams(a.params, b.params)) return false;
    if (a.epochs.size !== b.epochs.size) return false;
    for (const [e, ab] of a.epochs) {
      const bb = b.epochs.get(e);
      if (bb === undefined || !bytesEqual(ab, bb)) return false;
    }
    return true;
  },
  decompose(s) {
    if (s.params === null) return [];
    // An empty state with parameters is itself irreducible (it is above bottom).
    if (s.epochs.size === 0) return [new ReplicatedFbf(s.params)];
    const out: ReplicatedFbf[] = [];
    for (const e of [...s.epochs.keys()].sort((x, y) => x - y)) {
      const bits = s.epochs.get(e)!;
      for (let i = 0; i < s.params.m; i++) if (hasBit(bits, i)) out.push(singleBit(s.params, e, i));
    }
    return out;
  },
  difference(a, b) {
    if (a.params === null) return new ReplicatedFbf(null);
    if (b.params === null || !sameParams(a.params, b.params)) return ReplicatedFbfLattice.clone(a);
    const epochs = new Map<number, Uint8Array>();
    for (const [e, ab] of a.epochs) {
      const bb = b.epochs.get(e);
      const d = bb === undefined ? ab.slice() : ab.map((x, i) => x & ~bb[i]!);
      if (!isZero(d)) epochs.set(e, d);
    }
    return epochs.size === 0 ? new ReplicatedFbf(null) : new ReplicatedFbf(a.params, epochs);
  },
  context: () => new CausalContext(),
  encode: (s) => encode(s),
  encodedSize: (s) => encodedSize(s),
  decode: (bytes) => decode(bytes),
  size: (s) => Math.max(1, s.epochs.size),
};

// ---- codec --------------------------------------------------------------------------------------
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

function setBits(bits: Uint8Array, m: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < m; i++) if (hasBit(bits, i)) out.push(i);
  return out;
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
function layout(s: ReplicatedFbf): { epoch: number; gap: number; idx: number[]; dense: boolean }[] {
  const m = s.params?.m ?? 0;
  const sorted = [...s.epochs.keys()].sort((x, y) => x - y);
  return sorted.map((epoch, j) => {
    const idx = setBits(s.epochs.get(epoch)!, m);
    return { epoch, gap: j === 0 ? epoch : epoch - sorted[j - 1]! - 1, idx, dense: Math.ceil(m / 8) < sparseSize(idx) };
  });
}

function encodedSize(s: ReplicatedFbf): number {
  let n = 2;
  if (s.params !== null) for (const v of paramList(s.params)) n += varintSize(v);
  const rows = layout(s);
  n += varintSize(rows.length);
  for (const r of rows) n += varintSize(r.gap) + 1 + (r.dense ? Math.ceil(s.params!.m / 8) : sparseSize(r.idx));
  return n;
}

function encode(s: ReplicatedFbf): Uint8Array {
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

function decode(bytes: Uint8Array): ReplicatedFbf {
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
      bits = bytes.slice(r.pos, r.pos + denseLen);
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
  return new ReplicatedFbf(params, epochs);
}
