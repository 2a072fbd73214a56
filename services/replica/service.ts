// The Replica gRPC service: validates each request, runs it on the store, and reports local
// deltas to the anti-entropy layer. Bad input answers a clear status and changes nothing.
import { type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, status } from "@grpc/grpc-js";
import {
  type AWSet,
  type Dot,
  ObjectType,
  type PNCounter,
  contextFromProto,
  contextToProto,
  DEFAULT_RETRY_FILTER,
  RetryFilterParamError,
  type ReplicatedFbf,
  type RetryRequest,
  RetryFilterSizeError,
  decodeBoundOf,
  dotToProto,
  inInt64,
  latticeFor,
  retentionMs,
  retryFilterBytes,
  retryFilterParams,
} from "../crdt/index.js";
import type { RetryFilterInfo, RetryFilterParams } from "../gen/deltaset/v1/replica.js";
import type { KeysRequest, OwnersResponse, QueryRequest, QueryResponse, ReplicaServer } from "../gen/deltaset/v1/replica.js";
import type { Store } from "../store/store.js";
import type { Limits } from "./limits.js";
import { PacedWriter } from "./reader-wait.js";
import type { Logger } from "../common/logger.js";
import { RpcError, invalid, outOfRange, toServiceError, tooLarge } from "./errors.js";
import { wholeTypeCalls } from "./whole-type-calls.js";
import { type AddStreamDeps, addStreamCall } from "./add-stream.js";
import { keyCalls, listedSize } from "./key-calls.js";
import { type WatchPlacement, watchCall } from "./watch-calls.js";
import { exportCalls } from "./export-calls.js";
import { TypeMismatchError } from "../store/errors.js";
import { checkCounterQuery, checkKey, collectElements, ttlFrom, withText } from "./validation.js";
import { PAGE_TOKEN_OVERHEAD, decodePageToken, encodePageToken } from "./page-token.js";
import { memberBytesBudget, membersThatFit } from "../common/member-bytes.js";
import { type CopyConfirmer, writeCopies } from "./copies.js";

/** Called after every durable local change, with the delta to spread. */
export type LocalDeltaListener = (key: string, type: ObjectType, delta: unknown) => void;

export interface ReplicaServiceDeps {
  store: Store;
  limits: Limits;
  log: Logger;
  onLocalDelta?: LocalDeltaListener;
  /** Observes every call's method, status code and duration (metrics). */
  onCall?: (method: string, code: number, ms: number) => void;
  /** The node's clock (ms), handed to the retry filters of counters; default Date.now. */
  now?: () => number;
  /** B: the most the nodes' clocks are assumed to differ (ms); default 2000 (--max-clock-skew-ms). */
  clockSkewBoundMs?: number;
  /** The owners of a key's partition (placement); default: this node alone, full replication. */
  owners?: (key: string) => OwnersResponse;
  /** Where an AddStream's adds of keys owned elsewhere go (placement); default: all are made here. */
  addRoute?: AddStreamDeps["route"];
  /** Aborted when the node starts to stop (Watch streams end then). */
  stopping?: AbortSignal;
  /** Partition placement: a watch ends once this node no longer owns what it follows (watch-calls.ts). */
  placement?: WatchPlacement;
  /** What writes asking for copies wait on (the gossip layer, once it runs); none: this node alone holds anything. */
  copies?: () => CopyConfirmer | undefined;
  /** The longest such a write waits (ms); default 5000 (--copies-timeout-ms). */
  copiesTimeoutMs?: number;
}

export function createReplicaService(deps: ReplicaServiceDeps): ReplicaServer {
  const { store, limits, log } = deps;
  const now = deps.now ?? Date.now;
  const skewBound = deps.clockSkewBoundMs ?? 2000;
  const notify = (key: string, type: ObjectType, delta: unknown) => {
    try {
      deps.onLocalDelta?.(key, type, delta);
    } catch (err) {
      log.error("local delta listener failed", { err });
    }
  };

  /** Wrap a unary handler: errors become statuses, and every call is observed. */
  function unary<Req, Res>(method: string, fn: (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>) {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      const started = performance.now();
      fn(call.request, call).then(
        (res) => {
          deps.onCall?.(method, 0, performance.now() - started);
          callback(null, res);
        },
        (err: unknown) => {
          const e = toServiceError(err, (x) => log.error("unexpected error", { method, err: x }));
          deps.onCall?.(method, e.code ?? status.INTERNAL, performance.now() - started);
          callback(e);
        },
      );
    };
  }

  /**
   * A read answered only once what it read is durable: reads see writes still queued for the disk
   * (group commit), and a crash before they land would take back what the answer showed, a dot a
   * client then names in a Remove elsewhere among it (the restarted node may mint that dot again).
   */
  const durableRead =
    <Req, Res>(fn: (req: Req) => Promise<Res>) =>
    async (req: Req): Promise<Res> => {
      const res = await fn(req);
      await store.written();
      return res;
    };

  /** What Query reports of a key's retry filter (a counter's, or a filter key's), undefined without one. */
  const retryInfo = (f: ReplicatedFbf): RetryFilterInfo | undefined => {
    const p = f.params;
    if (p === null) return undefined;
    return {
      retentionMs: BigInt(Math.max(0, retentionMs(p) - skewBound)),
      clockSkewBoundMs: BigInt(skewBound),
      periodMs: BigInt(p.periodMs),
      pastEpochs: p.pastEpochs,
      bits: BigInt(p.m),
      hashes: p.k,
      estimatedFalsePositiveRate: f.fppEstimate(now()),
    };
  };

  /**
   * An Increment's or Add's request id with its retry filter's parameters (checked), or undefined
   * without one (then retry_filter must be unset too).
   */
  const retryOf = (id: string | undefined, p: RetryFilterParams | undefined): RetryRequest | undefined => {
    if (id === undefined || id === "") {
      if (p !== undefined) throw invalid("retry_filter is used only with a request_id: set request_id, or leave retry_filter unset");
      return undefined;
    }
    const idBytes = Buffer.byteLength(id, "utf8");
    if (idBytes > limits.maxRequestIdBytes) {
      throw tooLarge(`request_id has ${idBytes} bytes; the limit is ${limits.maxRequestIdBytes} (--max-request-id-bytes): use a shorter id, such as a client id and a sequence number`);
    }
    return { id, now: now(), params: retryParamsFor(p, skewBound, limits), explicit: p !== undefined };
  };
  const whole = wholeTypeCalls({ store, limits, notify, random: Math.random });
  const keyOps = keyCalls({ store, limits, notify, clearWhole: (key, type, name) => whole.clear(key, type, name) });
  /** Writes asking for copies: checked before they are made, waited for after (copies.ts). */
  const copies = writeCopies(() => deps.copies?.(), deps.copiesTimeoutMs);

  const transfer = exportCalls({ store, limits, log, notify, onCall: deps.onCall, clockSkewBoundMs: skewBound, copies });

  /**
   * The type an Add writes: the one asked for, else the key's, else AWSET. A key of another type
   * than asked answers FAILED_PRECONDITION; counters take Increment.
   */
  async function typeForAdd(key: string, asked: ObjectType | undefined): Promise<ObjectType> {
    // The cached header spares a turn of the event loop on every Add to a key in use.
    const existing = store.cachedTypeOf(key) ?? (await store.typeOf(key));
    const requested = asked === undefined || asked === ObjectType.OBJECT_TYPE_UNSPECIFIED ? undefined : asked;
    if (requested !== undefined && (!(requested in ObjectType) || requested === ObjectType.UNRECOGNIZED)) {
      throw invalid(`type ${requested} is not an object type: leave it unset (AWSET), or name one of ${addableTypeNames()}`);
    }
    if (requested !== undefined && existing !== undefined && existing !== requested) throw new TypeMismatchError(key, existing, requested);
    // A new key under a --key-types rule gets the rule's type (the store refuses any other).
    const rule = existing === undefined ? store.keyTypeRule(key) : undefined;
    if (rule !== undefined && requested !== undefined && requested !== rule.type) throw new TypeMismatchError(key, rule.type, requested, rule.text);
    const type = requested ?? existing ?? rule?.type ?? ObjectType.AWSET;
    if (type === ObjectType.COUNTER) {
      throw new RpcError(
        status.FAILED_PRECONDITION,
        existing === undefined ? `a COUNTER key is created by Increment, not Add ("${key}")` : `key "${key}" holds a COUNTER: use Increment`,
      );
    }
    return type;
  }

  /** An Add's ttl_ms: undefined for none; AWSET keys only, at most MAX_TTL_MS. */
  function ttlOf(ttlMs: bigint | undefined, type: ObjectType): number | undefined {
    const ttl = ttlFrom(ttlMs);
    if (ttl !== undefined && type !== ObjectType.AWSET) throw new RpcError(status.FAILED_PRECONDITION, `ttl_ms applies to AWSET keys only, not ${typeName(type)}`);
    return ttl;
  }

  return {
    add: unary("Add", async (req, call) => {
      checkKey(req.key, limits);
      const elements = collectElements(req.elements, req.texts, limits, { required: true });
      const type = await typeForAdd(req.key, req.type);
      const ttlMs = ttlOf(req.ttlMs, type);
      // Checked for every type; the sets record no ids (an element added twice reads as once).
      const retry = retryOf(req.requestId, req.retryFilter);
      const asked = copies.asked(req.copies, req.key);
      if (type !== ObjectType.AWSET) {
        const res = await whole.add(req.key, type, typeName(type), elements, req.params, retry);
        return { ...res, copies: await copies.held(req.key, asked, call, "add") };
      }
      const r = await store.add(req.key, elements, ttlMs);
      notify(req.key, ObjectType.AWSET, r.delta);
      // The replica the dots were minted under, not the store's current one: hand-off may draw a
      // new replica id while the add waits to be durable.
      const res = { added: r.added, replica: r.dots[0]?.replica ?? store.replicaId, counters: r.dots.map((d) => BigInt(d.counter)), duplicate: false };
      return { ...res, copies: await copies.held(req.key, asked, call, "add") };
    }),

    remove: unary("Remove", async (req, call) => {
      checkKey(req.key, limits);
      const elements = collectElements(req.elements, req.texts, limits, { required: true });
      const asked = copies.asked(req.copies, req.key);
      const type = await store.typeOf(req.key);
      if (type !== undefined && type !== ObjectType.AWSET && type !== ObjectType.COUNTER) {
        // Its adds carry anonymous dots, which no context can name: a context would be ignored.
        if (type === ObjectType.AWSET_PROB && req.context !== undefined) {
          throw invalid(`key "${req.key}" holds an AWSET_PROB, whose removes take no context (its adds carry anonymous dots): leave context unset to remove every add of the elements this node has seen`);
        }
        const res = await whole.remove(req.key, type, typeName(type), elements);
        return { ...res, copies: await copies.held(req.key, asked, call, "remove") };
      }
      const observed = req.context === undefined ? undefined : contextFromProto(req.context);
      // Adds the context covers that have not arrived here yet are removed when they arrive
      // (deferred removes, store/pending-removes.ts): the answer says how many elements wait.
      const r = await store.remove(req.key, elements, observed);
      if (!r.delta.ctx.isEmpty()) notify(req.key, ObjectType.AWSET, r.delta);
      return { removed: r.removed, pending: r.pending, unseenAdds: BigInt(r.unseenDots), copies: await copies.held(req.key, asked, call, "remove") };
    }),

    query: unary("Query", durableRead(async (req: QueryRequest): Promise<QueryResponse> => {
      checkKey(req.key, limits);
      const info = await store.describe(req.key);
      // A page is read from the database: once the writes the context covers are in it, or the
      // context would name adds the page does not list (a Remove built from them would take
      // adds the client never saw).
      await store.written();
      const base = {
        type: info?.type ?? ObjectType.OBJECT_TYPE_UNSPECIFIED,
        presence: [],
        members: [],
        nextPageToken: Buffer.alloc(0),
        context: contextToProto(info?.ctx ?? contextFromProto(undefined)),
        size: BigInt(info?.size ?? 0),
        counterValue: 0n,
        pendingRemoves: store.pendingRemoves(req.key),
        filter: undefined,
        probabilistic: false,
      };
      if (info?.type === ObjectType.COUNTER) {
        checkCounterQuery(req);
        const counter = (await store.counter(req.key))!;
        const value = counter.value();
        // Only a data directory written before the range checks can hold such a value.
        if (!inInt64(value)) throw outOfRange(`counter "${req.key}" holds ${value}, outside the int64 range counter_value carries; decrement it back into range (deltaset verify lists such keys)`);
        return { ...base, counterValue: value, retryFilter: retryInfo(counter.filter) };
      }
      const elements = collectElements(req.elements, req.texts, limits, { required: false });
      if (elements.length > 0 && req.pageToken.length > 0) {
        throw invalid("page_token continues a listing Query; a Query that names elements answers them all in one reply: leave page_token empty");
      }
      if (info !== undefined && info.type !== ObjectType.AWSET) {
        const size = req.pageSize === 0 ? limits.defaultPageSize : Math.min(req.pageSize, limits.maxPageSize);
        const { next, members, retryIds, ...rest } = await whole.query(req.key, typeName(info.type), elements, { startAfter: startOfPage(req.key, req.pageToken, limits), size });
        return {
          ...base,
          ...rest,
          retryFilter: retryIds === undefined ? undefined : retryInfo(retryIds),
          members: members.map((m) => withText(m.element, req.withText)),
          nextPageToken: next === undefined ? Buffer.alloc(0) : encodePageToken(req.key, next),
        };
      }
      if (elements.length === 0 && req.pageSize > limits.maxPageSize) {
        throw tooLarge(`page_size ${req.pageSize} exceeds the limit ${limits.maxPageSize} (--max-page-size); ask for fewer or use Scan`);
      }
      // The context answered and the members listed come from one moment of the store, so the
      // context covers every dot listed and no add left out (store/set-snapshot.ts).
      const at = info === undefined ? undefined : await store.snapshotOf(req.key);
      try {
        const set = at === undefined ? base : { ...base, context: contextToProto(at.ctx), size: BigInt(at.size) };
        if (elements.length > 0) {
          const dots = at === undefined ? elements.map((): Dot[] => []) : await at.dotsOf(elements);
          return { ...set, presence: elements.map((element, i) => ({ element, present: dots[i]!.length > 0, dots: req.withDots === true ? dots[i]!.map((d) => dotToProto(d, store.now())) : [] })) };
        }
        const size = req.pageSize === 0 ? limits.defaultPageSize : req.pageSize;
        if (at === undefined) return set;
        const page = await at.page(startOfPage(req.key, req.pageToken, limits), size, memberBytesBudget(limits.maxMessageBytes));
        return {
          ...set,
          members: page.members.map((m, i) => ({ ...withText(m, req.withText), dots: req.withDots === true ? page.dots[i]!.map((d) => dotToProto(d, store.now())) : [] })),
          nextPageToken: page.next === undefined ? Buffer.alloc(0) : encodePageToken(req.key, page.next),
        };
      } finally {
        await at?.close();
      }
    })),

    async scan(call: ServerWritableStream<import("../gen/deltaset/v1/replica.js").ScanRequest, import("../gen/deltaset/v1/replica.js").ScanChunk>) {
      const started = performance.now();
      const req = call.request;
      let cancelled = false;
      call.on("cancelled", () => (cancelled = true));
      let at: Awaited<ReturnType<Store["snapshotOf"]>>;
      try {
        checkKey(req.key, limits);
        if (req.chunkSize > limits.maxScanChunk) {
          throw tooLarge(`chunk_size ${req.chunkSize} exceeds the limit ${limits.maxScanChunk} (--max-scan-chunk)`);
        }
        if (req.startAfter.length > limits.maxElementBytes) throw invalid(`start_after is longer than an element may be (${limits.maxElementBytes} bytes)`);
        const info = await store.describe(req.key);
        // The members are read from the database: once the writes the context covers are in it.
        await store.written();
        const listed = info !== undefined && info.type !== ObjectType.AWSET ? await whole.list(req.key, typeName(info.type), req.startAfter) : undefined;
        // A set's context and members from one moment of the store (store/set-snapshot.ts).
        at = listed === undefined && info !== undefined ? await store.snapshotOf(req.key) : undefined;
        const ctx = at?.ctx ?? info?.ctx;
        const chunkSize = req.chunkSize === 0 ? limits.defaultScanChunk : req.chunkSize;
        const total = BigInt(listed?.total ?? at?.size ?? 0);
        let sent = 0n;
        let first = true;
        // Back-pressure: read no further until the client has taken what was sent.
        const out = new PacedWriter(call, limits.streamStallMs, "resume with start_after set to the last member received");
        const maxBytes = memberBytesBudget(limits.maxMessageBytes);
        const chunks = listed !== undefined ? inChunks(listed.members, chunkSize, maxBytes) : at !== undefined ? at.members({ startAfter: req.startAfter, chunkSize, maxBytes }) : inChunks([], chunkSize, maxBytes);
        for await (const chunk of chunks) {
          if (cancelled) break;
          sent += BigInt(chunk.length);
          await out.write({
            members: chunk.map((m) => withText(m.element, req.withText)),
            context: first && ctx !== undefined ? contextToProto(ctx) : undefined,
            sent,
            total,
            last: false,
          });
          first = false;
        }
        if (!cancelled) {
          call.write({
            members: [],
            context: first && ctx !== undefined ? contextToProto(ctx) : undefined,
            sent,
            total,
            last: true,
          });
          call.end();
        }
        deps.onCall?.("Scan", 0, performance.now() - started);
      } catch (err) {
        const e = toServiceError(err, (x) => log.error("unexpected error", { method: "Scan", err: x }));
        deps.onCall?.("Scan", e.code ?? status.INTERNAL, performance.now() - started);
        call.emit("error", e);
      } finally {
        await at?.close();
      }
    },

    merge: unary("Merge", async (req, call) => {
      checkKey(req.key, limits);
      if (req.state === undefined) throw invalid("state is required: {type, payload}");
      if (req.state.type === ObjectType.OBJECT_TYPE_UNSPECIFIED) throw invalid("state.type must be set (AWSET, COUNTER or a filter type)");
      const lattice = latticeFor(req.state.type);
      const state = lattice.decode(req.state.payload, store.now(), decodeBoundOf(limits)) as AWSet | PNCounter;
      if (req.state.type === ObjectType.AWSET) {
        for (const k of (state as AWSet).entries.keys()) {
          if (k.length > limits.maxElementBytes) {
            throw tooLarge(`an element of the state has ${k.length} bytes; the limit is ${limits.maxElementBytes}`);
          }
        }
      }
      const asked = copies.asked(req.copies, req.key);
      const r = await store.merge(req.key, req.state.type, state);
      if (r.refused !== undefined) throw outOfRange(`${r.refused}; nothing was changed`);
      if (r.changed) notify(req.key, req.state.type, r.newPart);
      // A change of this node's own made by the join (deferred removes the merged adds made
      // applicable, or a probabilistic set's refusal): spread like a local operation's delta.
      if (r.settled !== undefined) notify(req.key, r.settled.type, r.settled.delta);
      // A set stored whole (AWSET_PROB) counts its members from its state, as Keys and Import do.
      const size = req.state.type === ObjectType.AWSET ? r.size : listedSize(await store.keyInfo(req.key));
      return { changed: r.changed, size: BigInt(size), copies: await copies.held(req.key, asked, call, "merge") };
    }),

    increment: unary("Increment", async (req, call) => {
      checkKey(req.key, limits);
      if (req.amount === 0n) throw invalid("amount must not be zero");
      const retry = retryOf(req.requestId, req.retryFilter);
      const asked = copies.asked(req.copies, req.key);
      if (retry === undefined) {
        const r = await store.increment(req.key, req.amount);
        notify(req.key, ObjectType.COUNTER, r.delta);
        return { value: r.value, dot: dotToProto(r.dot), duplicate: false, copies: await copies.held(req.key, asked, call, "increment") };
      }
      const r = await store.incrementOnce(req.key, req.amount, retry);
      if (r.delta !== undefined) notify(req.key, ObjectType.COUNTER, r.delta);
      // A retry recognised as a duplicate waits as well: for everything of the key's partition made here so far.
      return { value: r.value, dot: r.dot === undefined ? undefined : dotToProto(r.dot), duplicate: r.duplicate, copies: await copies.held(req.key, asked, call, "increment") };
    }),

    export: transfer.export,
    import: transfer.import,
    addStream: addStreamCall({ store, limits, log, notify, onCall: deps.onCall, route: deps.addRoute, copies }),
    keys: unary("Keys", durableRead((req: KeysRequest) => keyOps.keys(req))),
    delete: unary("Delete", async (req, call) => {
      const asked = copies.asked(req.copies, req.key);
      const res = await keyOps.deleteKey(req);
      return { ...res, copies: await copies.held(req.key, asked, call, "delete") };
    }),
    watch: watchCall({ store, limits, log, onCall: deps.onCall, stopping: deps.stopping, placement: deps.placement }),
    owners: unary("Owners", async (req) => {
      checkKey(req.key, limits);
      if (deps.owners !== undefined) return deps.owners(req.key);
      return { partition: store.partitionOf(req.key), owners: [{ nodeId: store.nodeId, address: "" }], replicationFactor: "all", local: true };
    }),
  };
}

/**
 * The retry-filter parameters of a request (defaults for unset fields), checked: INVALID_ARGUMENT
 * for impossible ones or a period not above the clock-skew bound, RESOURCE_EXHAUSTED above
 * --max-filter-bytes.
 */
function retryParamsFor(p: RetryFilterParams | undefined, skewBound: number, limits: Limits) {
  const d = DEFAULT_RETRY_FILTER;
  const choice = {
    idsPerPeriod: p === undefined || p.idsPerPeriod === 0n ? d.idsPerPeriod : Number(p.idsPerPeriod),
    falsePositiveRate: p === undefined || p.falsePositiveRate === 0 ? d.falsePositiveRate : p.falsePositiveRate,
    periodMs: p === undefined || p.periodMs === 0n ? d.periodMs : Number(p.periodMs),
    pastEpochs: p === undefined || p.pastEpochs === 0 ? d.pastEpochs : p.pastEpochs,
  };
  let params;
  try {
    params = retryFilterParams(choice);
  } catch (err) {
    if (err instanceof RetryFilterSizeError) throw tooLarge(`retry_filter: ${err.message}`);
    if (err instanceof RetryFilterParamError) throw invalid(`retry_filter: ${err.message}`);
    throw err;
  }
  if (params.periodMs <= skewBound) {
    throw invalid(`retry_filter: period_ms ${params.periodMs} must exceed this node's clock-skew bound of ${skewBound} ms (--max-clock-skew-ms)`);
  }
  const bytes = retryFilterBytes(params);
  if (bytes > limits.maxFilterBytes) {
    throw tooLarge(`retry_filter: these parameters make a filter of up to ${bytes} bytes; the limit is ${limits.maxFilterBytes} (--max-filter-bytes): ask for fewer ids_per_period, fewer past_epochs or a higher false_positive_rate`);
  }
  return params;
}

/** Where a page starts: after the element a page token names (checked), or at the first member. */
function startOfPage(key: string, token: Buffer, limits: Limits): Buffer | undefined {
  if (token.length === 0) return undefined;
  const element = token.length > limits.maxElementBytes + PAGE_TOKEN_OVERHEAD ? undefined : decodePageToken(key, token);
  if (element === undefined) {
    throw invalid(`page_token is not a next_page_token issued for key "${key}": pass it back unchanged, or leave it empty to start from the first member`);
  }
  return element;
}

/** The types an Add may name, in words. */
function addableTypeNames(): string {
  const skip = new Set<number>([ObjectType.OBJECT_TYPE_UNSPECIFIED, ObjectType.COUNTER, ObjectType.UNRECOGNIZED]);
  return Object.values(ObjectType)
    .filter((v): v is ObjectType => typeof v === "number" && !skip.has(v))
    .map((v) => ObjectType[v])
    .join(", ");
}

/** A type's name as the proto spells it (GBF, ORCF...). */
function typeName(t: ObjectType): string {
  return ObjectType[t] ?? String(t);
}

/** A list of members in chunks of at most size members and maxBytes of them. */
async function* inChunks(members: Buffer[], size: number, maxBytes: number): AsyncGenerator<Array<{ element: Buffer }>> {
  for (let i = 0; i < members.length; ) {
    const n = membersThatFit(members, size, maxBytes, i);
    yield members.slice(i, i + n).map((element) => ({ element }));
    i += n;
  }
}
