// The interface every replicated type implements, and the registry keyed by proto ObjectType.
// The gossip engine and the store work through this interface only; they know nothing of sets.
import type { CausalContext } from "./causal-context.js";
import type { ChunkRange } from "./chunk-slice.js";
import { UnknownTypeError } from "./errors.js";
import { ObjectType } from "../gen/deltaset/v1/types.js";

/** What a state received from outside may ask for (the node's --max-filter-bytes and --max-state-bytes). */
export interface DecodeBound {
  /** The largest filter (a series: its first sub-filter). */
  maxFilterBytes: number;
  /** The most all of a state's filters may take together (a series' sub-filters). */
  maxStateBytes: number;
}

/** The bound of a node's limits (none without a filter limit: a simulation's unbounded nodes). */
export function decodeBoundOf(o: { maxFilterBytes?: number; maxStateBytes?: number }): DecodeBound | undefined {
  return o.maxFilterBytes === undefined ? undefined : { maxFilterBytes: o.maxFilterBytes, maxStateBytes: o.maxStateBytes ?? Number.MAX_SAFE_INTEGER };
}

export interface Lattice<S> {
  readonly type: ObjectType;
  readonly name: string;
  bottom(): S;
  isBottom(s: S): boolean;
  clone(s: S): S;
  /** Pure join (least upper bound). */
  join(a: S, b: S): S;
  /** Join other into target, mutating target; true when target changed. */
  joinInPlace(target: S, other: S): boolean;
  /**
   * Join a later delta into a delta-group in place (gossip buffers and groups, a batch's delta):
   * the deltas one replica made or took in, in the order its state took them. Left out, joinInPlace.
   * A type whose join also depends on what the joining side remembers (a filter that reports dots)
   * sets its own rule: the group must keep what the replica's state kept.
   */
  joinGroupInPlace?(group: S, later: S): boolean;
  /** a ⊑ b, i.e. a ⊔ b = b. */
  leq(a: S, b: S): boolean;
  equals(a: S, b: S): boolean;
  /** Join-decomposition into irreducible states: joins back to s, none redundant. */
  decompose(s: S): S[];
  /** Δ(a, b): the join of the irreducibles of a that are not ⊑ b (the part of a new to b). */
  difference(a: S, b: S): S;
  /**
   * Join other into target and return, with whether target changed, a part of other new to
   * target before the join such that target ⊔ newPart is the same join: what difference(other,
   * target) followed by joinInPlace gives, for types that find it during their join for less.
   */
  joinInPlaceWithNewPart?(target: S, other: S): { changed: boolean; newPart: S };
  /** The causal context of a causal state. */
  context(s: S): CausalContext;
  /**
   * nowMs: the local time, for states that carry time (an AWSET's adds with a time to live travel
   * as remaining TTLs); TtlClockError when such a state is encoded or decoded without it.
   */
  encode(s: S, nowMs?: number): Uint8Array;
  /** encode(s).length, computed without encoding (sizes of gossip buffers and frames). */
  encodedSize(s: S): number;
  /**
   * Decode and validate; throws DecodeError on malformed or inconsistent input. bound: for a
   * state received from outside (Merge, Import, gossip), what its parameters may ask for, checked
   * before anything of that size is allocated (StateLimitError); left out for the node's own
   * records, which it accepted when they were written.
   */
  decode(bytes: Uint8Array, nowMs?: number, bound?: DecodeBound): S;
  /**
   * Decode one chunk of a chunked full-state transfer, checked against the sender's context (sent
   * on the key's first chunk). Types that travel whole leave it out: decode is used.
   */
  decodeSlice?(bytes: Uint8Array, senderCtx: CausalContext, range: ChunkRange, nowMs?: number): S;
  /** How many entries a state holds (elements of a set), for buffer limits; 1 when left out. */
  size?(s: S): number;
  /**
   * Sets whose converged replicas need not hold the same state bit for bit (a filter as context):
   * a digest (16 bytes) of what reads answer and the live adds behind them, equal on two replicas
   * exactly when those are (short of a hash collision). Keys lists it as the key's state digest.
   */
  readsDigest?(s: S): Uint8Array;
  /**
   * Its deltas can lose information on the way (filters that union only in part, forget, or
   * report what they never held), so replicas can end a burst of writes apart with nothing more to
   * send: a replica whose reads of a key changed sends the key's whole state to its neighbours once
   * the key has been quiet a while (gossip/settle-announcer.ts).
   */
  readonly settlesByState?: boolean;
}

/** Join a later delta into a delta-group (Lattice.joinGroupInPlace, else joinInPlace). */
export function joinGroupInPlace<S>(l: Lattice<S>, group: S, later: S): boolean {
  return l.joinGroupInPlace !== undefined ? l.joinGroupInPlace(group, later) : l.joinInPlace(group, later);
}

/** The pure join of a type whose join is in place: join into a copy of a. */
export function joinIntoCopy<S>(clone: (s: S) => S, joinInPlace: (target: S, other: S) => boolean): (a: S, b: S) => S {
  return (a, b) => {
    const out = clone(a);
    joinInPlace(out, b);
    return out;
  };
}

const registry = new Map<ObjectType, Lattice<unknown>>();

export function registerLattice<S>(l: Lattice<S>): void {
  registry.set(l.type, l as Lattice<unknown>);
}

export function latticeFor(type: ObjectType): Lattice<unknown> {
  const l = registry.get(type);
  if (l === undefined) throw new UnknownTypeError(type);
  return l;
}

/** Decode a state-transfer chunk of a type (decodeSlice, or decode for types that travel whole). */
export function decodeSlice(type: ObjectType, bytes: Uint8Array, senderCtx: CausalContext, range: ChunkRange, nowMs?: number, bound?: DecodeBound): unknown {
  const l = latticeFor(type);
  return l.decodeSlice !== undefined ? l.decodeSlice(bytes, senderCtx, range, nowMs) : l.decode(bytes, nowMs, bound);
}

/** Entries of a state of a type, for buffer limits. */
export function sizeOf(type: ObjectType, s: unknown): number {
  return latticeFor(type).size?.(s) ?? 1;
}

export { ObjectType };
