// What a client's Add, Remove and Query mean for a replicated type that is stored whole: delta
// mutators and reads over its state, registered per type. The Replica service and the store
// dispatch through this table, so a new type of this kind needs an entry here and no code of its
// own in the service. (The add-wins set and the counter have their own paths: the set is stored
// element by element, and the counter has Increment.)
import type { ObjectType } from "./lattice.js";
import type { ReplicatedFbf } from "./replicated-fbf.js";
import type { RetryRequest } from "./retry-filter.js";

/** Parameters of a new key, as the client gave them (0 or undefined: the type's default). */
export interface CreateParams {
  capacity?: number;
  falsePositiveRate?: number;
  hashes?: number;
  bits?: number;
  fingerprintBits?: number;
  bucketSize?: number;
  /** AWSET_PROB: APBF level (0..5). */
  level?: number;
  /** AWSET_PROB: APBF older slices l (with hashes = k and bits = m per slice). */
  ageSlices?: number;
  /** AWSET_PROB: the union strategy (apbf-params.ts UnionStrategy). */
  unionStrategy?: number;
}

/** What a mutator may use of the node: its replica id and a source of random choices. */
export interface MutatorEnv {
  replica: string;
  random: () => number;
  /** A fresh 64-bit id from a cryptographic source at the node (anonymous dots); seeded in simulations. */
  randomId: () => bigint;
}

/** Figures a Query reports about a probabilistic key. */
export interface StateFigures {
  estimatedFalsePositiveRate: number;
  loadFactor: number;
  estimatedCount: number;
  /** The key's parameters (JSON-friendly). */
  parameters: unknown;
}

export interface ClientOperations<S> {
  /** An empty state with the parameters of the Add that creates the key (throws FilterParamError). */
  create(params: CreateParams): S;
  /** Bytes a state with these parameters takes (checked against the node's limit before creating). */
  sizeOf(params: CreateParams): number;
  /**
   * Bytes a state's filters take when full, for types that grow by adding filters as they fill
   * (the scalable series): checked against --max-state-bytes after each Add. Absent: fixed by sizeOf.
   */
  stateBytes?(s: S): number;
  /** Insert elements into s, changing it in place; returns the delta (what changed). */
  add(s: S, elements: readonly Uint8Array[], env: MutatorEnv): S;
  /**
   * add, once per request id: a retry (the key's retry filter holds the id) changes nothing;
   * otherwise the add and the id's insert, in s and in one delta. Absent: the type's Adds ignore ids.
   */
  addOnce?(s: S, elements: readonly Uint8Array[], env: MutatorEnv, retry: RetryRequest): { duplicate: boolean; delta?: S };
  /** The retry filter of s's request ids, or undefined when it has none (Query reports it). */
  retryIds?(s: S): ReplicatedFbf | undefined;
  /** Remove elements from s in place; returns the delta. Absent when the type cannot remove. */
  remove?(s: S, elements: readonly Uint8Array[], env: MutatorEnv): S;
  /** Membership per element (for filters: "maybe present"). */
  contains(s: S, elements: readonly Uint8Array[]): boolean[];
  /** Members in element order, for types that can list them (a set); absent for filters. */
  members?(s: S): Buffer[];
  /** Whether present means "maybe present" (false positives possible). */
  readonly probabilistic: boolean;
  describe(s: S): StateFigures;
  /** Whether s has no parameters yet (a key not yet created). */
  isUnset(s: S): boolean;
}

const table = new Map<ObjectType, ClientOperations<unknown>>();

export function registerOperations<S>(type: ObjectType, ops: ClientOperations<S>): void {
  table.set(type, ops as ClientOperations<unknown>);
}

/** The operations of a type stored whole, or undefined (sets and counters have their own paths). */
export function operationsFor(type: ObjectType): ClientOperations<unknown> | undefined {
  return table.get(type);
}

/** The outcome of a client operation on a state: the state to store, the delta to spread, and how many elements changed. */
export interface OperationOutcome {
  state: unknown;
  delta?: unknown;
  /** Add: elements that were not (maybe) present before. Remove: elements present before and absent after. */
  changed: number;
  /** Add with a request id: a retry of an Add already applied; nothing changed. */
  duplicate?: boolean;
}

const distinct = (elements: readonly Uint8Array[]) => [...new Map(elements.map((e) => [Buffer.from(e).toString("latin1"), e])).values()];

/**
 * Run an Add or Remove of a type stored whole on its current state (⊥ for a new key, which an Add
 * creates with params). The one place this is written: the Replica service and the gossip
 * simulator both call it. Throws the type's errors (FilterParamError, FilterFullError...) with
 * nothing to store.
 */
export function runOperation(
  ops: ClientOperations<unknown>,
  current: unknown,
  op: { kind: "add"; elements: readonly Uint8Array[]; params: CreateParams; checkSize?: (bytes: number) => void; retry?: RetryRequest } | { kind: "remove"; elements: readonly Uint8Array[] },
  env: MutatorEnv,
): OperationOutcome {
  const fresh = distinct(op.elements);
  if (op.kind === "add") {
    let state = current;
    if (ops.isUnset(state)) {
      op.checkSize?.(ops.sizeOf(op.params));
      state = ops.create(op.params);
    }
    const before = ops.contains(state, fresh);
    if (op.retry !== undefined && ops.addOnce !== undefined) {
      const r = ops.addOnce(state, op.elements, env, op.retry);
      if (r.duplicate) return { state, changed: 0, duplicate: true };
      return { state, delta: r.delta, changed: before.filter((p) => !p).length };
    }
    const delta = ops.add(state, op.elements, env);
    return { state, delta, changed: before.filter((p) => !p).length };
  }
  if (ops.remove === undefined) throw new RangeError("this type cannot remove");
  if (ops.isUnset(current)) return { state: current, changed: 0 };
  const before = ops.contains(current, fresh);
  const delta = ops.remove(current, op.elements, env);
  const after = ops.contains(current, fresh);
  return { state: current, delta, changed: before.filter((p, i) => p && !after[i]).length };
}
