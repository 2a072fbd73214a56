// What a client's Add, Remove and Query mean for a replicated type that is stored whole: delta
// mutators and reads over its state, registered per type. The Replica service and the store
// dispatch through this table, so a new type of this kind needs an entry here and no code of its
// own in the service. (The add-wins set and the counter have their own paths: the set is stored
// element by element, and the counter has Increment.)
import type { ObjectType } from "./lattice.js";

/** Parameters of a new key, as the client gave them (0 or undefined: the type's default). */
export interface CreateParams {
  capacity?: number;
  falsePositiveRate?: number;
  hashes?: number;
  bits?: number;
  fingerprintBits?: number;
  bucketSize?: number;
}

/** What a mutator may use of the node: its replica id and a source of random choices. */
export interface MutatorEnv {
  replica: string;
  random: () => number;
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
  /** Insert elements into s, changing it in place; returns the delta (what changed). */
  add(s: S, elements: readonly Uint8Array[], env: MutatorEnv): S;
  /** Remove elements from s in place; returns the delta. Absent when the type cannot remove. */
  remove?(s: S, elements: readonly Uint8Array[], env: MutatorEnv): S;
  /** Membership per element (for filters: "maybe present"). */
  contains(s: S, elements: readonly Uint8Array[]): boolean[];
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
