// The AddStream call: batches of elements arrive on a stream and are added like unary Adds
// (consecutive batches of one key as one add, a few adds at once so that group commit batches
// their writes), and acknowledged in order once durable, one ack covering every batch that became
// durable since the previous one. Past `streamWindow` unacknowledged batches, or `streamWindowBytes`
// of their elements, the call is paused, so the transport's flow control slows the client down
// instead of batches piling up here: the count keeps small batches many enough for group commit
// (one-element batches are the stream's point), the bytes bound the memory a stream holds. A
// batch that fails (validation, another type, the store) ends the stream with its error naming
// the batch's seq, after the batches before it have been acknowledged; nothing received after a
// refusal is started. With placement, `route` may send the add of a key this node does not own to
// an owner instead (node/routing.ts): its batches are acknowledged once that owner answered, so an
// ack still means durable, and they take their place in the same in-order queue and window. Such
// adds wait a network hop and the owner's commit, not this node's disk, so more of them run at
// once (`streamForwardedAdds`).
import { type ServerDuplexStream, status } from "@grpc/grpc-js";
import { ObjectType } from "../crdt/index.js";
import type { AddStreamAck, AddStreamRequest } from "../gen/deltaset/v1/replica.js";
import type { Logger } from "../common/logger.js";
import { streamRefusalOf } from "../common/stream-refusal.js";
import type { Store } from "../store/store.js";
import { RpcError, invalid, toServiceError } from "./errors.js";
import type { Limits } from "./limits.js";
import { checkKey, collectElements, ttlFrom } from "./validation.js";
import { type Asked, type WriteCopies, writeCopies } from "./copies.js";

export interface AddStreamDeps {
  store: Store;
  limits: Limits;
  log: Logger;
  notify: (key: string, type: ObjectType, delta: unknown) => void;
  onCall?: (method: string, code: number, ms: number) => void;
  /** Per call: where adds of keys owned elsewhere go (undefined: every add is made here). */
  route?: (call: ServerDuplexStream<AddStreamRequest, AddStreamAck>) => AddRoute | undefined;
  /** Batches asking for copies (service.ts); default: none can be had beyond this node. */
  copies?: WriteCopies;
}

/**
 * For a key this node does not own: a function adding elements to it at an owner, resolving with
 * how many were new once that owner made them durable; undefined when the add is made here.
 */
export type AddRoute = (key: string) => ((elements: Uint8Array[], ttlMs: number | undefined, copies: number | undefined) => Promise<number>) | undefined;

interface Batch {
  /** Undefined for a message that did not decode (it has no seq to name). */
  seq: bigint | undefined;
  elements: number;
  /** Its elements' bytes with framing, counted in the window until it is acknowledged. */
  bytes: number;
  added: number;
  /** Nodes that held it when done, when it asked for copies (else 0). */
  copies: number;
  done: boolean;
  error?: unknown;
}

/** store.add calls a stream runs at once here: enough for group commit to batch their writes. */
const RUNNING_ADDS = 4;
/** Protobuf framing per element (tag and length) and per message (key, type, ttl), generously. */
const ELEMENT_OVERHEAD = 6;
const GROUP_OVERHEAD = 64;

export function addStreamCall(deps: AddStreamDeps) {
  const { store, limits, log } = deps;
  const copies = deps.copies ?? writeCopies(() => undefined);

  /** Several batches of one key as one add (AWSET keys only), spread. Resolves once durable. */
  async function apply(key: string, elements: Uint8Array[], ttlMs: number | undefined): Promise<number> {
    const type = store.cachedTypeOf(key) ?? (await store.typeOf(key));
    if (type !== undefined && type !== ObjectType.AWSET) {
      throw new RpcError(status.FAILED_PRECONDITION, `key "${key}" is not an AWSET; AddStream adds to add-wins sets only (use Add for the other set and filter types, Increment for a counter)`);
    }
    const r = await store.add(key, elements, ttlMs);
    deps.notify(key, ObjectType.AWSET, r.delta);
    return r.added;
  }

  return (call: ServerDuplexStream<AddStreamRequest, AddStreamAck>): void => {
    const started = performance.now();
    const window = limits.streamWindow;
    const windowBytes = limits.streamWindowBytes;
    const route = deps.route?.(call);
    /** Received and not yet acknowledged, in order, and their bytes. */
    const queue: Batch[] = [];
    let queuedBytes = 0;
    /** Received and not yet started: consecutive batches of one key start as one add. */
    const waiting: Array<{ batch: Batch; key: string; elements: Uint8Array[]; ttlMs: number | undefined; copies: Asked | undefined }> = [];
    /** Adds running here and at owners. */
    let running = 0;
    let runningAtOwners = 0;
    let lastSeq = -1n;
    let inputEnded = false;
    /** A batch was refused or failed: nothing received after it is taken. */
    let refused = false;
    /** An add failed: nothing waiting is started (all of it came after the failed batch). */
    let failed = false;
    let finished = false;

    const finish = (err?: unknown) => {
      if (finished) return;
      finished = true;
      if (err === undefined) {
        call.end();
        deps.onCall?.("AddStream", 0, performance.now() - started);
        return;
      }
      const e = toServiceError(err, (x) => log.error("unexpected error", { method: "AddStream", err: x }));
      deps.onCall?.("AddStream", e.code ?? status.INTERNAL, performance.now() - started);
      call.emit("error", e);
    };

    /** Acknowledge the durable batches at the head of the queue; end or fail when it is time. */
    const settle = () => {
      if (finished) return;
      let seq = -1n;
      let batches = 0;
      let elements = 0;
      let added = 0;
      let copies = Number.POSITIVE_INFINITY;
      const ack = () => call.write({ seq, batches, elements: BigInt(elements), added: BigInt(added), copies: copies === Number.POSITIVE_INFINITY ? 0 : copies });
      while (queue.length > 0 && queue[0]!.done) {
        const b = queue.shift()!;
        queuedBytes -= b.bytes;
        if (b.error !== undefined) {
          if (batches > 0) ack();
          const which = b.seq !== undefined ? `batch seq ${b.seq}` : lastSeq < 0n ? "the first batch" : `the batch after seq ${lastSeq}`;
          const e = b.error instanceof RpcError ? new RpcError(b.error.code, `${which}: ${b.error.message}`) : b.error;
          finish(e);
          return;
        }
        seq = b.seq!;
        batches++;
        elements += b.elements;
        added += b.added;
        copies = Math.min(copies, b.copies);
      }
      if (batches > 0) ack();
      if (call.isPaused() && queue.length < window && queuedBytes < windowBytes) call.resume();
      if (inputEnded && queue.length === 0) finish();
    };

    /** Start adds in order while their kind (here, at an owner) has room, each taking the waiting batches of one key. */
    const pump = () => {
      // A batch refused on arrival does not stop this: the batches waiting came before it, and are
      // added and acknowledged before the stream ends with its refusal.
      while (waiting.length > 0 && !failed) {
        const remote = route?.(waiting[0]!.key);
        if (remote === undefined ? running >= RUNNING_ADDS : runningAtOwners >= limits.streamForwardedAdds) return;
        const first = waiting.shift()!;
        const group = [first];
        const elements = [...first.elements];
        let bytes = first.batch.bytes;
        // A group also fits one message: a forwarded add carries it to an owner as one Add.
        const keyBytes = Buffer.byteLength(first.key, "utf8");
        const fits = (n: { batch: Batch; elements: Uint8Array[] }) =>
          elements.length + n.elements.length <= limits.maxElementsPerCall && bytes + n.batch.bytes + keyBytes + GROUP_OVERHEAD <= limits.maxMessageBytes;
        // The group waits for what changed since its first batch's mark (the earliest of its batches).
        const same = (n: { key: string; ttlMs: number | undefined; copies: Asked | undefined }) => n.key === first.key && n.ttlMs === first.ttlMs && n.copies?.copies === first.copies?.copies;
        while (waiting.length > 0 && same(waiting[0]!) && fits(waiting[0]!)) {
          const next = waiting.shift()!;
          group.push(next);
          elements.push(...next.elements);
          bytes += next.batch.bytes;
        }
        const atOwner = remote !== undefined;
        if (atOwner) runningAtOwners++;
        else running++;
        // An owner waits for the copies itself (its Add carries them); an add made here frees its
        // slot once durable here, and its batches wait for their copies outside it.
        const made = atOwner ? remote(elements, first.ttlMs, first.copies?.copies) : apply(first.key, elements, first.ttlMs);
        void made.then(
          () => {},
          // Before the slot's pump below: nothing waiting starts after a failed add.
          () => {
            refused = true;
            failed = true;
          },
        ).finally(() => {
          if (atOwner) runningAtOwners--;
          else running--;
          pump();
        });
        // How many nodes hold it: an owner checked its copies (routing.ts) before answering.
        const held = made.then(async (added) => ({
          added,
          copies: atOwner ? (first.copies?.copies ?? 0) : await copies.held(first.key, first.copies, call, "batch"),
        }));
        held.then(
          ({ added, copies: n }) => {
            for (const g of group) g.batch.copies = n;
            // The group's new elements are counted on its last batch: acks sum them anyway.
            group.at(-1)!.batch.added = added;
            for (const g of group) g.batch.done = true;
          },
          (err: unknown) => {
            refused = true;
            failed = true;
            for (const g of group) {
              g.batch.error = err;
              g.batch.done = true;
            }
          },
        ).finally(() => {
          settle();
          pump();
        });
      }
    };

    call.on("data", (req: AddStreamRequest) => {
      if (finished || refused) return;
      // Refused before it was decoded, or for a string that is not UTF-8 (node/strict-strings.ts):
      // a stand-in that may have no fields, ended here after the acks of the batches before it.
      const refusal = streamRefusalOf(req);
      const batch: Batch = { seq: typeof req.seq === "bigint" ? req.seq : undefined, elements: refusal === undefined ? req.elements.length + req.texts.length : 0, bytes: 0, added: 0, copies: 0, done: false };
      queue.push(batch);
      try {
        if (refusal !== undefined) throw new RpcError(refusal.code, refusal.details);
        if (req.seq <= lastSeq) throw invalid(`seq ${req.seq} is not above the previous batch's ${lastSeq}: seqs must increase along the stream`);
        lastSeq = req.seq;
        checkKey(req.key, limits);
        const elements = collectElements(req.elements, req.texts, limits, { required: true });
        batch.bytes = elements.reduce((n, e) => n + e.length + ELEMENT_OVERHEAD, 0);
        queuedBytes += batch.bytes;
        waiting.push({ batch, key: req.key, elements, ttlMs: ttlFrom(req.ttlMs), copies: copies.asked(req.copies, req.key) });
        pump();
      } catch (err) {
        // Nothing after a refused batch is started: the stream ends at it.
        refused = true;
        batch.error = err;
        batch.done = true;
        settle();
      }
      if (queue.length >= window || queuedBytes >= windowBytes) call.pause();
    });
    call.on("end", () => {
      inputEnded = true;
      settle();
    });
    call.on("cancelled", () => {
      finished = true;
    });
    call.on("error", () => {
      finished = true;
    });
  };
}
