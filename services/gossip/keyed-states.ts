// Partition payloads made of many keys: key → (type, state or delta). The join is per key with
// the key's lattice from the registry. Payload values are treated as immutable: joins copy
// before they change anything, so a payload handed to the engine or put in a frame is never
// modified afterwards.
import { type DecodeBound, DecodeError, type Lattice, StateLimitError, UnknownTypeError, joinGroupInPlace, latticeFor, ObjectType } from "../crdt/index.js";
import type { KeyState } from "../gen/deltaset/v1/gossip.js";
import type { PayloadOps } from "./payload.js";
import { lengthDelimitedSize, varintSize } from "../common/varint.js";

export interface KeyedState {
  readonly type: ObjectType;
  readonly state: unknown;
}

/** A partition payload: key → typed state (a delta-group or a full state). */
export type KeyedStates = ReadonlyMap<string, KeyedState>;

/** Two payloads disagree on the type of a key (the type is fixed when a key is first written). */
export class KeyTypeConflictError extends Error {
  override readonly name = "KeyTypeConflictError";
  constructor(
    readonly key: string,
    readonly a: ObjectType,
    readonly b: ObjectType,
  ) {
    super(`key ${JSON.stringify(key)} has type ${ObjectType[a]} on one side and ${ObjectType[b]} on the other`);
  }
}

function latticeOf(key: string, a: KeyedState, b: KeyedState): Lattice<unknown> {
  if (a.type !== b.type) throw new KeyTypeConflictError(key, a.type, b.type);
  return latticeFor(a.type);
}

function joinKeyed(ps: readonly KeyedStates[]): KeyedStates {
  // A key present in one input only is shared by reference (values are immutable); a key in
  // several is cloned once and the others are joined into the clone, in order, as a delta-group
  // (Lattice.joinGroupInPlace): payloads are delta-groups, whole states aside.
  const out = new Map<string, KeyedState>();
  const owned = new Set<string>();
  for (const p of ps) {
    for (const [key, ks] of p) {
      const cur = out.get(key);
      if (cur === undefined) {
        out.set(key, ks);
        continue;
      }
      const l = latticeOf(key, cur, ks);
      if (!owned.has(key)) {
        const copy = { type: cur.type, state: l.clone(cur.state) };
        out.set(key, copy);
        owned.add(key);
        joinGroupInPlace(l, copy.state, ks.state);
      } else {
        joinGroupInPlace(l, cur.state, ks.state);
      }
    }
  }
  return out;
}

const utf8 = new TextEncoder();

/** Encoded size of one KeyState message body for a key whose encoded state has `payload` bytes. */
export function keyStateSize(key: string, type: ObjectType, payload: number): number {
  const encodedState = (type === 0 ? 0 : 1 + varintSize(type)) + (payload === 0 ? 0 : lengthDelimitedSize(payload));
  return (key.length === 0 ? 0 : lengthDelimitedSize(utf8.encode(key).length)) + lengthDelimitedSize(encodedState);
}

export const keyedStatesOps: PayloadOps<KeyedStates> = {
  bottom: () => new Map(),
  join: (a, b) => joinKeyed([a, b]),
  joinAll: (ps) => joinKeyed(ps),
  isBottom(p) {
    for (const ks of p.values()) if (!latticeFor(ks.type).isBottom(ks.state)) return false;
    return true;
  },
  /** The bytes these keys take inside a PartitionPayload (each key as a length-delimited KeyState). */
  sizeBytes(p) {
    let n = 0;
    for (const [key, ks] of p) n += lengthDelimitedSize(keyStateSize(key, ks.type, latticeFor(ks.type).encodedSize(ks.state)));
    return n;
  },
};

/** The bytes encoded KeyStates take inside a PartitionPayload (same measure as sizeBytes). */
export function protoKeysSize(keys: readonly KeyState[]): number {
  let n = 0;
  for (const k of keys) n += lengthDelimitedSize(keyStateSize(k.key, k.state?.type ?? 0, k.state?.payload.length ?? 0));
  return n;
}

/** a ⊑ b, key by key (a key missing from b is ⊥ there). */
export function keyedLeq(a: KeyedStates, b: KeyedStates): boolean {
  for (const [key, ks] of a) {
    const l = latticeFor(ks.type);
    const other = b.get(key);
    if (other === undefined) {
      if (!l.isBottom(ks.state)) return false;
      continue;
    }
    if (!latticeOf(key, ks, other).leq(ks.state, other.state)) return false;
  }
  return true;
}

/** Δ(a, b) key by key: the part of a that is new to b. Keys with nothing new are left out. */
export function keyedDifference(a: KeyedStates, b: KeyedStates): KeyedStates {
  const out = new Map<string, KeyedState>();
  for (const [key, ks] of a) {
    const l = latticeFor(ks.type);
    const other = b.get(key);
    const diff = other === undefined ? ks.state : latticeOf(key, ks, other).difference(ks.state, other.state);
    if (!l.isBottom(diff)) out.set(key, { type: ks.type, state: diff });
  }
  return out;
}

/**
 * The receiver side of the engine's contract: what to hand the engine for a received payload,
 * computed BEFORE the payload is joined into the local state.
 *  - rr off: the whole payload when it inflates the local state (d ⋢ X), else undefined;
 *  - rr on (redundancy removal): Δ(d, X), the part of d that is new, or undefined when empty.
 */
export function receivedPart(received: KeyedStates, local: KeyedStates, rr: boolean): KeyedStates | undefined {
  if (rr) {
    const diff = keyedDifference(received, local);
    return diff.size === 0 ? undefined : diff;
  }
  return keyedLeq(received, local) ? undefined : received;
}

/**
 * Join a payload into a state the caller owns and mutates (its X). Keys new to the target are
 * cloned, so the payload stays untouched. Returns true when the target changed.
 */
export function joinKeyedInto(target: Map<string, KeyedState>, other: KeyedStates): boolean {
  let changed = false;
  for (const [key, ks] of other) {
    const cur = target.get(key);
    const l = latticeFor(ks.type);
    if (cur === undefined) {
      if (l.isBottom(ks.state)) continue;
      target.set(key, { type: ks.type, state: l.clone(ks.state) });
      changed = true;
    } else if (latticeOf(key, cur, ks).joinInPlace(cur.state, ks.state)) {
      changed = true;
    }
  }
  return changed;
}

/** Keyed states → the repeated KeyState of a PartitionPayload (keys in sorted order). */
export function keyedToProto(p: KeyedStates, nowMs: number): KeyState[] {
  return [...p.keys()].sort().map((key) => {
    const ks = p.get(key)!;
    return { key, state: { type: ks.type, payload: Buffer.from(latticeFor(ks.type).encode(ks.state, nowMs)) } };
  });
}

/**
 * The repeated KeyState of a PartitionPayload → keyed states. Throws RangeError (missing state,
 * duplicate key), and DecodeError (bad encoding) or UnknownTypeError (type not served here) unless
 * undecodable is given: then such a key is left out and told to it. A key whose state asks for
 * more than bound allows is left out and told to oversized.
 */
export function keyedFromProto(
  keys: readonly KeyState[],
  nowMs: number,
  bound?: DecodeBound,
  oversized?: (key: string, err: StateLimitError) => void,
  undecodable?: (key: string, err: DecodeError | UnknownTypeError) => void,
): KeyedStates {
  const out = new Map<string, KeyedState>();
  for (const [i, k] of keys.entries()) {
    if (k.state === undefined) throw new RangeError(`keys[${i}]: no state`);
    if (out.has(k.key)) throw new RangeError(`keys[${i}]: key ${JSON.stringify(k.key)} appears twice`);
    const type = k.state.type;
    try {
      out.set(k.key, { type, state: latticeFor(type).decode(k.state.payload, nowMs, bound) });
    } catch (err) {
      if (err instanceof StateLimitError && oversized !== undefined) oversized(k.key, err);
      else if ((err instanceof DecodeError || err instanceof UnknownTypeError) && undecodable !== undefined) undecodable(k.key, err);
      else throw err;
    }
  }
  return out;
}
