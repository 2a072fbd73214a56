// The AddStream call: batches of elements arrive on a stream and are added like unary Adds, up to
// `streamWindow` batches at once, and acknowledged in order once durable, one ack covering every
// batch that became durable since the previous one. While the window is full the call is paused,
// so the transport's flow control slows the client down instead of batches piling up here. A
// batch that fails (validation, another type, the store) ends the stream with its error naming
// the batch's seq, after the batches before it have been acknowledged.
import { type ServerDuplexStream, status } from "@grpc/grpc-js";
import { ObjectType } from "../crdt/index.js";
import type { AddStreamAck, AddStreamRequest } from "../gen/deltaset/v1/replica.js";
import type { Logger } from "../common/logger.js";
import type { Store } from "../store/store.js";
import { RpcError, invalid, toServiceError } from "./errors.js";
import type { Limits } from "./limits.js";
import { checkKey, collectElements } from "./validation.js";

export interface AddStreamDeps {
  store: Store;
  limits: Limits;
  log: Logger;
  notify: (key: string, type: ObjectType, delta: unknown) => void;
  onCall?: (method: string, code: number, ms: number) => void;
}

interface Batch {
  seq: bigint;
  elements: number;
  added: number;
  done: boolean;
  error?: unknown;
}

export function addStreamCall(deps: AddStreamDeps) {
  const { store, limits, log } = deps;

  /** One batch: validated, then added (AWSET keys only) and spread. Resolves once durable. */
  async function apply(req: AddStreamRequest): Promise<number> {
    checkKey(req.key, limits);
    const elements = collectElements(req.elements, req.texts, limits, { required: true });
    const type = store.cachedTypeOf(req.key) ?? (await store.typeOf(req.key));
    if (type !== undefined && type !== ObjectType.AWSET) {
      throw new RpcError(status.FAILED_PRECONDITION, `key "${req.key}" is not an AWSET; AddStream adds to add-wins sets only (use Add)`);
    }
    const r = await store.add(req.key, elements);
    deps.notify(req.key, ObjectType.AWSET, r.delta);
    return r.added;
  }

  return (call: ServerDuplexStream<AddStreamRequest, AddStreamAck>): void => {
    const started = performance.now();
    const window = limits.streamWindow;
    const queue: Batch[] = [];
    let lastSeq = -1n;
    let inputEnded = false;
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
      while (queue.length > 0 && queue[0]!.done) {
        const b = queue.shift()!;
        if (b.error !== undefined) {
          if (batches > 0) call.write({ seq, batches, elements: BigInt(elements), added: BigInt(added) });
          const e = b.error instanceof RpcError ? new RpcError(b.error.code, `batch seq ${b.seq}: ${b.error.message}`) : b.error;
          finish(e);
          return;
        }
        seq = b.seq;
        batches++;
        elements += b.elements;
        added += b.added;
      }
      if (batches > 0) call.write({ seq, batches, elements: BigInt(elements), added: BigInt(added) });
      if (call.isPaused() && queue.length < window) call.resume();
      if (inputEnded && queue.length === 0) finish();
    };

    call.on("data", (req: AddStreamRequest) => {
      if (finished) return;
      const batch: Batch = { seq: req.seq, elements: req.elements.length + req.texts.length, added: 0, done: false };
      queue.push(batch);
      const run =
        req.seq <= lastSeq
          ? Promise.reject(invalid(`seq ${req.seq} is not above the previous batch's ${lastSeq}: seqs must increase along the stream`))
          : apply(req);
      if (req.seq > lastSeq) lastSeq = req.seq;
      run.then(
        (added) => {
          batch.added = added;
          batch.done = true;
          settle();
        },
        (err: unknown) => {
          batch.error = err;
          batch.done = true;
          settle();
        },
      );
      if (queue.length >= window) call.pause();
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
