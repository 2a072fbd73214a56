// The Export and Import calls of the Replica service: their requests checked against the limits,
// Export's chunks streamed with back-pressure (export-stream.ts), Import's stream applied
// (import-apply.ts). Errors become gRPC statuses, and every call is observed like the others.
import { type ServerReadableStream, type ServerWritableStream, type sendUnaryData, status } from "@grpc/grpc-js";
import type { CausalContext, ObjectType } from "../crdt/index.js";
import type { ExportChunk, ExportRequest, ImportResponse } from "../gen/deltaset/v1/replica.js";
import type { Logger } from "../common/logger.js";
import type { Store } from "../store/store.js";
import { RpcError, invalid, toServiceError, tooLarge } from "./errors.js";
import { exportChunks } from "./export-stream.js";
import { applyImport } from "./import-apply.js";
import type { Limits } from "./limits.js";
import { PacedWriter } from "./reader-wait.js";
import { checkKey, sinceFrom } from "./validation.js";
import type { WriteCopies } from "./copies.js";

export interface ExportCallsDeps {
  store: Store;
  limits: Limits;
  log: Logger;
  notify: (key: string, type: ObjectType, delta: unknown) => void;
  onCall?: (method: string, code: number, ms: number) => void;
  /** B: how far an exporting node's clock may be behind this one's (--max-clock-skew-ms); Import does not count that much of an export's wait. */
  clockSkewBoundMs: number;
  /** The write concern an Import's first chunk may ask for. */
  copies: WriteCopies;
}

export function exportCalls(deps: ExportCallsDeps) {
  const { store, limits, log } = deps;
  const failed = (method: string, started: number, err: unknown) => {
    const e = toServiceError(err, (x) => log.error("unexpected error", { method, err: x }));
    deps.onCall?.(method, e.code ?? status.INTERNAL, performance.now() - started);
    return e;
  };

  /** The chunk bounds and since of a request, checked. */
  function exportOptions(req: ExportRequest): { maxEntries: number; maxBytes: number; since?: CausalContext } {
    checkKey(req.key, limits);
    if (req.maxEntries > limits.maxExportChunk) throw tooLarge(`max_entries ${req.maxEntries} exceeds the limit ${limits.maxExportChunk} (--max-export-chunk)`);
    if (req.maxBytes > limits.maxExportChunkBytes) throw tooLarge(`max_bytes ${req.maxBytes} exceeds the limit ${limits.maxExportChunkBytes} (--max-export-chunk-bytes)`);
    const since = sinceFrom(req.since);
    return {
      maxEntries: req.maxEntries === 0 ? limits.defaultExportChunk : req.maxEntries,
      maxBytes: req.maxBytes === 0 ? limits.maxExportChunkBytes : req.maxBytes,
      since,
    };
  }

  return {
    async export(call: ServerWritableStream<ExportRequest, ExportChunk>) {
      const started = performance.now();
      let cancelled = false;
      call.on("cancelled", () => (cancelled = true));
      try {
        const opts = exportOptions(call.request);
        const key = call.request.key;
        if ((await store.typeOf(key)) === undefined) throw new RpcError(status.NOT_FOUND, `key "${key}" does not exist on this node`);
        const out = new PacedWriter(call, limits.streamStallMs, "export again with the same since (importing the chunks that arrived is safe)");
        for await (const chunk of exportChunks(store, key, opts)) {
          if (cancelled) break;
          // Back-pressure: read no further until the client has taken what was sent.
          await out.write(chunk);
        }
        if (!cancelled) call.end();
        deps.onCall?.("Export", 0, performance.now() - started);
      } catch (err) {
        call.emit("error", failed("Export", started, err));
      }
    },

    import(call: ServerReadableStream<ExportChunk, ImportResponse>, callback: sendUnaryData<ImportResponse>) {
      const started = performance.now();
      applyImport({ store, limits, notify: deps.notify, clockSkewBoundMs: deps.clockSkewBoundMs, copies: { writes: deps.copies, call } }, call).then(
        (res) => {
          deps.onCall?.("Import", 0, performance.now() - started);
          callback(null, res);
        },
        (err: unknown) => callback(failed("Import", started, err)),
      );
    },
  };
}
