// The Watch call: a key (with a catch-up of its state or delta since a context, as Export chunks)
// or a prefix, followed through the store's change feed (Store.onChange: local operations and
// every join, after they are durable). Each change goes out as the delta a copy joins, with the
// key's context after it. Writes never wait: a watcher whose stream does not drain has its events
// queued up to the node's watch buffer, and past it the stream is ended with RESOURCE_EXHAUSTED.
// The catch-up is read at the pace the watcher takes it.
// A node that stops ends its watches at once with UNAVAILABLE: a watch never ends by itself, so
// left open it would hold the node's drain to its timeout and then be cut as CANCELLED. Under
// partition placement a watch also ends with UNAVAILABLE once its node no longer owns what it
// follows (a key's partition; for a prefix, any partition it owned): the key's changes go to its
// owners from then on, and a watch left open would fall silent with no sign to the client.
import { type ServerWritableStream, status } from "@grpc/grpc-js";
import { type CausalContext, ObjectType, contextToProto, latticeFor } from "../crdt/index.js";
import type { KeyEvent, WatchKeysRequest } from "../gen/deltaset/v1/replica.js";
import type { CausalContext as CausalContextMsg } from "../gen/deltaset/v1/types.js";
import type { Logger } from "../common/logger.js";
import type { Store } from "../store/store.js";
import { RpcError, invalid, toServiceError, tooLarge } from "./errors.js";
import { exportChunks } from "./export-stream.js";
import type { Limits } from "./limits.js";
import { checkKey, sinceFrom } from "./validation.js";

export interface WatchDeps {
  store: Store;
  limits: Limits;
  log: Logger;
  onCall?: (method: string, code: number, ms: number) => void;
  /** Aborted when the node starts to stop: open watches end then. */
  stopping?: AbortSignal;
  /** Partition placement (gossip/ownership.ts); default: this node holds every key for good. */
  placement?: WatchPlacement;
}

/** What a watch asks of the placement: where a key lives, what this node owns, and when that changes. */
export interface WatchPlacement {
  partitionOf(key: string): number;
  owns(partition: number): boolean;
  owned(): number[];
  /** Calls listener after each placement change; returns its removal. */
  onChange(listener: () => void): () => void;
}

export function watchCall(deps: WatchDeps) {
  const { store, limits, log } = deps;
  let watchers = 0;

  return async (call: ServerWritableStream<WatchKeysRequest, KeyEvent>): Promise<void> => {
    const started = performance.now();
    const req = call.request;
    let unsubscribe: (() => void) | undefined;
    let unfollowPlacement: (() => void) | undefined;
    let ended = false;
    let counted = false;
    /** Wakes what waits for the stream to drain (a paced catch-up) when the watch ends. */
    const endWaiters: Array<() => void> = [];
    const onStop = () => end(new RpcError(status.UNAVAILABLE, "the node is stopping: watch again on another node, or on this one once it is back, with since = the context of the last event received"));
    const end = (err?: unknown) => {
      if (ended) return;
      ended = true;
      for (const wake of endWaiters.splice(0)) wake();
      deps.stopping?.removeEventListener("abort", onStop);
      unsubscribe?.();
      unfollowPlacement?.();
      if (counted) watchers--;
      if (err === undefined) {
        deps.onCall?.("Watch", 0, performance.now() - started);
        call.end();
        return;
      }
      const e = toServiceError(err, (x) => log.error("unexpected error", { method: "Watch", err: x }));
      deps.onCall?.("Watch", e.code ?? status.INTERNAL, performance.now() - started);
      call.emit("error", e);
    };
    call.on("cancelled", () => end());
    try {
      const byKey = req.key !== "";
      if (byKey && req.prefix !== "") throw invalid("set key or prefix, not both (prefix applies only when key is empty)");
      if (byKey) checkKey(req.key, limits);
      else if (req.prefix === "") throw invalid("name a key, or a prefix with key empty");
      else if (Buffer.byteLength(req.prefix, "utf8") > limits.maxKeyBytes) throw tooLarge(`prefix is longer than the key limit of ${limits.maxKeyBytes} bytes`);
      if (!byKey && req.since !== undefined) throw invalid("since applies to a key watch only (a prefix watch has no catch-up)");
      const since = sinceFrom(req.since);
      if (watchers >= limits.maxWatchers) throw new RpcError(status.RESOURCE_EXHAUSTED, `this node already serves ${watchers} watchers (--max-watchers); try another node or later`);
      watchers++;
      counted = true;
      if (deps.stopping?.aborted) return onStop();
      deps.stopping?.addEventListener("abort", onStop, { once: true });
      unfollowPlacement = followPlacement(deps.placement, byKey ? req.key : undefined, end);
      if (ended) return;

      // Events queue here while the stream is not drained; the queue is bounded.
      const queue: KeyEvent[] = [];
      let draining = false;
      const flush = () => {
        while (queue.length > 0 && !ended) {
          if (!call.write(queue.shift()!)) {
            draining = true;
            call.once("drain", () => {
              draining = false;
              flush();
            });
            return;
          }
        }
      };
      const push = (e: KeyEvent) => {
        if (ended) return;
        if (queue.length >= limits.watchBuffer) {
          end(new RpcError(status.RESOURCE_EXHAUSTED, `the watcher fell ${queue.length} events behind (--watch-buffer): resume from the last event's context`));
          return;
        }
        queue.push(e);
        if (!draining) flush();
      };
      /** Resolves once the transport took what was written (or the watch ended). */
      const drained = () =>
        new Promise<void>((resolve) => {
          if (!draining || ended) return resolve();
          endWaiters.push(resolve);
          call.once("drain", () => {
            endWaiters.splice(endWaiters.indexOf(resolve), 1);
            resolve();
          });
        });
      // Subscribed before the catch-up is read: a change made meanwhile is sent after it (perhaps
      // twice; joins are idempotent), never lost. The catch-up is read at the pace the watcher
      // takes it, so it never overflows the watch buffer however large the key; the changes made
      // meanwhile wait, and past --watch-buffer of them the watcher has fallen behind.
      let catchingUp = byKey;
      const held: Array<[string, ObjectType, unknown, CausalContext]> = [];
      const send = (key: string, type: ObjectType, delta: unknown, ctx: CausalContext) =>
        push({ key, type, catchUp: undefined, delta: { type, payload: Buffer.from(latticeFor(type).encode(delta, store.now())) }, context: type === ObjectType.AWSET ? contextToProto(ctx) : undefined });
      unsubscribe = store.onChange((key, type, delta, ctx) => {
        if (byKey ? key !== req.key : !key.startsWith(req.prefix)) return;
        if (!catchingUp) return send(key, type, delta, ctx);
        if (held.length >= limits.watchBuffer) {
          end(new RpcError(status.RESOURCE_EXHAUSTED, `the watcher fell ${held.length} changes behind during its catch-up (--watch-buffer): resume from the last event's context`));
          return;
        }
        held.push([key, type, delta, ctx]);
      });
      if (byKey && (await store.typeOf(req.key)) !== undefined) {
        // The context to resume from is the export's next_since (its first chunk's), and only once
        // the last chunk is applied: a client resuming from it after an earlier chunk would skip
        // the chunks it never got. Earlier catch-up events carry none.
        let resumeFrom: CausalContextMsg | undefined;
        for await (const chunk of exportChunks(store, req.key, { maxEntries: limits.defaultExportChunk, maxBytes: limits.maxExportChunkBytes, since })) {
          if (ended) return;
          resumeFrom ??= chunk.nextSince;
          push({ key: req.key, type: chunk.type, catchUp: chunk, delta: undefined, context: chunk.last ? resumeFrom : undefined });
          while (draining && !ended) await drained();
        }
      }
      catchingUp = false;
      for (const [key, type, delta, ctx] of held.splice(0)) send(key, type, delta, ctx);
    } catch (err) {
      end(err);
    }
  };
}

/**
 * Ends the watch (through end) with UNAVAILABLE after a placement change that took from this node
 * the key's partition (key) or any partition it owned (a prefix watch: key undefined), and a key
 * watch at once when this node does not own the key. Returns the function that stops following.
 */
function followPlacement(placement: WatchPlacement | undefined, key: string | undefined, end: (err: unknown) => void): (() => void) | undefined {
  if (placement === undefined) return undefined;
  const again = "watch again through any node (a key watch goes to an owner) with since = the context of the last event received";
  if (key !== undefined) {
    const p = placement.partitionOf(key);
    // A forwarded watch reaching a node whose view already moved the key on: its caller tries the
    // next owner (or the client again).
    if (!placement.owns(p)) {
      end(new RpcError(status.UNAVAILABLE, `this node does not own key "${key}" (the views of the placement differ for a moment): ${again}`));
      return undefined;
    }
    return placement.onChange(() =>
      queueMicrotask(() => {
        if (!placement.owns(p)) end(new RpcError(status.UNAVAILABLE, `this node no longer owns key "${key}" (the placement changed: a node joined, left or came back): ${again}`));
      }),
    );
  }
  let mine = new Set(placement.owned());
  return placement.onChange(() =>
    queueMicrotask(() => {
      const now = new Set(placement.owned());
      const lost = [...mine].filter((p) => !now.has(p)).length;
      if (lost > 0) {
        end(new RpcError(status.UNAVAILABLE, `this node no longer owns ${lost} of the partitions whose keys it followed (the placement changed: a node joined, left or came back); their changes go to their owners now: watch the prefix again, and catch each key you follow up with a key watch sent to this node from your copy's context`));
        return;
      }
      mine = now;
    }),
  );
}
