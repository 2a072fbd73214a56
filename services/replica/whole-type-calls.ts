// Add, Remove and Query on keys of the types stored whole, through each type's client operations
// (crdt/operations.ts): the filters of seed 001 today. Nothing here names a type: a new type of
// this kind is served once its operations are registered.
import { randomBytes } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { type CreateParams, FilterParamError, type ObjectType, type ReplicatedFbf, RetryFilterLattice, type RetryRequest, SeriesFullError, UnionStrategy, operationsFor, runOperation } from "../crdt/index.js";
import { type FilterParams, UnionStrategy as ProtoUnionStrategy } from "../gen/deltaset/v1/types.js";
import type { QueryResponse } from "../gen/deltaset/v1/replica.js";
import type { Store } from "../store/store.js";
import type { Limits } from "./limits.js";
import { RpcError, tooLarge } from "./errors.js";
import { memberBytesBudget, membersThatFit } from "../common/member-bytes.js";

export interface WholeTypeDeps {
  store: Store;
  limits: Limits;
  notify: (key: string, type: ObjectType, delta: unknown) => void;
  /** Random choices of the mutators (cuckoo kicks). */
  random: () => number;
}


function operations(type: ObjectType, name: string) {
  const ops = operationsFor(type);
  if (ops === undefined) throw new RpcError(status.FAILED_PRECONDITION, `type ${name} is not served by Add, Remove and Query`);
  return ops;
}

function createParams(p: FilterParams | undefined): CreateParams {
  if (p === undefined) return {};
  return {
    capacity: Number(p.capacity),
    falsePositiveRate: p.falsePositiveRate,
    hashes: p.hashes,
    bits: Number(p.bits),
    fingerprintBits: p.fingerprintBits,
    bucketSize: p.bucketSize,
    level: p.level,
    ageSlices: p.ageSlices,
    unionStrategy: unionStrategyOf(p.unionStrategy),
  };
}

/** The proto's UnionStrategy as apbf-params.ts numbers it (undefined: the default). */
function unionStrategyOf(s: ProtoUnionStrategy): number | undefined {
  switch (s) {
    case ProtoUnionStrategy.UNION_STRATEGY_UNSPECIFIED:
      return undefined;
    case ProtoUnionStrategy.UNION_STRATEGY_WHOLE_FILTER:
      return UnionStrategy.WholeFilter;
    case ProtoUnionStrategy.UNION_STRATEGY_ACTIVE_SLICES:
      return UnionStrategy.ActiveSlices;
    case ProtoUnionStrategy.UNION_STRATEGY_CURRENT_GENERATION:
      return UnionStrategy.CurrentGeneration;
    default:
      throw new FilterParamError(`unknown union_strategy ${String(s)}`);
  }
}

const cloneIds = (f: ReplicatedFbf | undefined) => (f === undefined ? undefined : RetryFilterLattice.clone(f));

/** The members after startAfter (all when empty or undefined), in element order, and how many there are in all. */
function membersAfter(all: Buffer[], startAfter: Buffer | undefined): { members: Buffer[]; total: number } {
  all.sort(Buffer.compare);
  const after = startAfter === undefined || startAfter.length === 0 ? all : all.filter((m) => Buffer.compare(m, startAfter) > 0);
  return { members: after, total: all.length };
}

/** What --max-filter-bytes bounds in a new key of this type, for the refusal's message. */
function sizedPart(name: string): string {
  if (name === "AWSET_PROB") return "an AWSET_PROB key's tombstone filter";
  return name.startsWith("SC") ? `an ${name} key's first sub-filter` : `${article(name)} ${name}`;
}

/** "a" or "an" before a type name read letter by letter (a GBF, an ORCF). */
function article(name: string): string {
  return /^[AEFHILMNORSX]/.test(name) ? "an" : "a";
}

/** The parameters that make a new key of this type smaller (FilterParams' names), and the type that grows instead. */
function smallerFilter(name: string): string {
  if (name === "AWSET_PROB") {
    return "ask for a smaller capacity, a higher false_positive_rate or another level (with the default current-generation strategy, from a capacity of 4096 up, a higher level takes fewer bytes; or, given as hashes, age_slices and bits, fewer of them)";
  }
  const bloom = name === "GBF" || name === "SCGBF";
  const lower = `ask for a smaller capacity or a higher false_positive_rate (or fewer ${bloom ? "bits" : "fingerprint_bits"})`;
  // A series adds sub-filters as it fills: a smaller first one still holds as many elements.
  if (name.startsWith("SC")) return `${lower}; the series adds sub-filters as it fills past capacity`;
  return `${lower}, or use an SC${name} key, which grows as it fills`;
}

export function wholeTypeCalls(deps: WholeTypeDeps) {
  const { store, limits } = deps;
  const env = () => ({ replica: store.replicaId, random: deps.random, randomId: () => randomBytes(8).readBigUInt64BE(0) });

  return {
    /**
     * Insert elements; a new key is created with the request's parameters. With a request id, a
     * type that recognises retries (the filters) applies it once (duplicate: a retry, nothing changed).
     */
    async add(key: string, type: ObjectType, name: string, elements: Uint8Array[], params: FilterParams | undefined, retry?: RetryRequest) {
      const ops = operations(type, name);
      // A set stored whole grows with its elements: past --max-state-bytes its peers would not
      // take it (they skip it), so it stops growing here first.
      if (ops.members !== undefined) {
        const stored = await store.storedStateBytes(key);
        let adding = 0;
        for (const e of elements) adding += e.length;
        if (stored + adding > limits.maxStateBytes) {
          throw tooLarge(`key "${key}" (${name}) holds about ${stored} bytes; with these ${adding} bytes of elements it would pass ${limits.maxStateBytes} (--max-state-bytes), which its peers take at most: remove elements, or use an AWSET key, which has no such bound`);
        }
      }
      const create = createParams(params);
      const checkSize = (bytes: number) => {
        if (bytes > limits.maxFilterBytes) {
          throw tooLarge(`these parameters make ${sizedPart(name)} of ${bytes} bytes; the limit is ${limits.maxFilterBytes} (--max-filter-bytes): ${smallerFilter(name)}`);
        }
      };
      // The replica the operation ran under, not the store's current one: hand-off may draw a new
      // replica id while the add waits to be durable.
      let replica = store.replicaId;
      const r = await store.update(key, type, (current) => {
        const e = env();
        replica = e.replica;
        let o: ReturnType<typeof runOperation>;
        try {
          o = runOperation(ops, current, { kind: "add", elements, params: create, checkSize, retry }, e);
        } catch (err) {
          if (err instanceof SeriesFullError) throw tooLarge(`${err.type} key "${key}" ${err.detail}`);
          throw err;
        }
        // A series grows a sub-filter as it fills: not past what its peers take. Nothing is stored
        // (a writer that throws leaves the state on disk served).
        const bytes = ops.stateBytes?.(o.state) ?? 0;
        if (bytes > limits.maxStateBytes) {
          throw tooLarge(`key "${key}" (${name}) would take ${bytes} bytes with another sub-filter, past ${limits.maxStateBytes} (--max-state-bytes), which its peers take at most; nothing was added: use a new key`);
        }
        return { state: o.state, delta: o.delta, result: { added: o.changed, duplicate: o.duplicate === true } };
      });
      // A duplicate changed nothing: no delta to spread.
      if (r.delta !== undefined) deps.notify(key, type, r.delta);
      if (r.result.duplicate) store.filterRetryAbsorbed();
      return { added: r.result.added, replica, counters: [], duplicate: r.result.duplicate };
    },

    /** Remove elements (types that can: FAILED_PRECONDITION for the others). */
    async remove(key: string, type: ObjectType, name: string, elements: Uint8Array[]) {
      const ops = operations(type, name);
      if (ops.remove === undefined) {
        throw new RpcError(status.FAILED_PRECONDITION, `key "${key}" holds a ${name}, which cannot remove elements (it only grows); use an ORCF or SCORCF key for removals`);
      }
      const r = await store.update(
        key,
        type,
        (current) => {
          const o = runOperation(ops, current, { kind: "remove", elements }, env());
          return { state: o.state, delta: o.delta, result: o.changed };
        },
        { mustExist: true },
      );
      if (r.delta !== undefined) deps.notify(key, type, r.delta);
      return { removed: r.result, pending: 0, unseenAdds: 0n };
    },

    /**
     * Delete on a set stored whole (AWSET_PROB): every member this node holds, removed in one
     * update under the key's lock, so an add that arrives after it survives (add-wins). Types that
     * cannot list or remove their elements (filters, counters) are refused.
     */
    async clear(key: string, type: ObjectType, name: string): Promise<number> {
      const ops = operationsFor(type);
      if (ops?.remove === undefined || ops.members === undefined || ops.probabilistic) {
        throw new RpcError(status.FAILED_PRECONDITION, `key "${key}" holds a ${name}: Delete removes the elements of a set (AWSET, AWSET_PROB), and this type has no elements to remove`);
      }
      const r = await store.update(
        key,
        type,
        (current) => {
          const members = ops.members!(current);
          if (members.length === 0) return { state: current, result: 0 };
          const o = runOperation(ops, current, { kind: "remove", elements: members }, env());
          return { state: o.state, delta: o.delta, result: o.changed };
        },
        { mustExist: true },
      );
      if (r.delta !== undefined) deps.notify(key, type, r.delta);
      return r.result;
    },

    /** Every member after startAfter, in element order (Scan), for a type that can list them. */
    async list(key: string, name: string, startAfter: Buffer): Promise<{ members: Buffer[]; total: number }> {
      const w = await store.wholeState(key);
      if (w === undefined) return { members: [], total: 0 };
      const members = operationsFor(w.type)?.members;
      if (members === undefined) {
        throw new RpcError(status.FAILED_PRECONDITION, `key "${key}" holds a ${name}, which cannot list its elements; Scan reads sets (AWSET, AWSET_PROB)`);
      }
      return membersAfter(members(w.state), startAfter);
    },

    /**
     * "Maybe present" or absent per element (or, for a type that can list, one page of members
     * after startAfter), with the state's figures (fill, estimated false-positive rate).
     */
    async query(
      key: string,
      name: string,
      elements: Uint8Array[],
      page: { startAfter: Buffer | undefined; size: number },
    ): Promise<Pick<QueryResponse, "presence" | "filter" | "probabilistic" | "members" | "size"> & { next?: Buffer; retryIds?: ReplicatedFbf }> {
      const w = await store.wholeState(key);
      if (w === undefined) return { presence: elements.map((element) => ({ element: Buffer.from(element), present: false, dots: [] })), filter: undefined, probabilistic: false, members: [], size: 0n };
      const ops = operations(w.type, name);
      const f = ops.describe(w.state);
      const figures = {
        estimatedFalsePositiveRate: f.estimatedFalsePositiveRate,
        loadFactor: f.loadFactor,
        estimatedCount: BigInt(f.estimatedCount),
        parameters: JSON.stringify(f.parameters),
      };
      if (elements.length === 0) {
        if (ops.members === undefined) {
          throw new RpcError(status.FAILED_PRECONDITION, `key "${key}" holds a ${name}, which cannot list its elements; ask about given elements`);
        }
        const { members, total } = membersAfter(ops.members(w.state), page.startAfter);
        const slice = members.slice(0, membersThatFit(members, page.size, memberBytesBudget(limits.maxMessageBytes)));
        return {
          presence: [],
          members: slice.map((element) => ({ element, text: "", dots: [] })),
          next: members.length > slice.length ? slice[slice.length - 1] : undefined,
          size: BigInt(total),
          filter: figures,
          probabilistic: ops.probabilistic,
        };
      }
      const present = ops.contains(w.state, elements);
      return {
        members: [],
        size: BigInt(f.estimatedCount),
        presence: elements.map((element, i) => ({ element: Buffer.from(element), present: present[i]!, dots: [] })),
        filter: figures,
        probabilistic: ops.probabilistic,
        // A copy: the state is the store's cached one, not to be read after the next await.
        retryIds: cloneIds(ops.retryIds?.(w.state)),
      };
    },
  };
}
