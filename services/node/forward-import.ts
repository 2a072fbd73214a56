// Import under placement: the key is named by the stream's first chunk, so that chunk is read
// before anything is decided. A key this node owns (or a call already forwarded) is imported here
// with the chunk put back in front of the stream; otherwise the whole stream is proxied to one
// owner. The owner is chosen before the first chunk is sent: the first in placement order whose
// connection is ready within --forward-timeout-ms (and the caller's deadline). Once chunks flow,
// an owner's failure ends the call with its error: the chunks it applied stay (each is safe
// alone) and the client may import the whole export again, which is idempotent.
import * as grpc from "@grpc/grpc-js";
import type { ExportChunk, ImportResponse, ReplicaClient } from "../gen/deltaset/v1/replica.js";

type ImportCall = grpc.ServerReadableStream<ExportChunk, ImportResponse>;
type Target = { nodeId: string; address: string };

/** What proxying an Import needs of the router (node/routing.ts, which imports this file). */
export interface ImportRouter {
  ownerReady(address: string, options: Partial<grpc.CallOptions>): Promise<boolean>;
  routes(metadata: grpc.Metadata): boolean;
  targets(key: unknown, metadata: grpc.Metadata): Target[] | undefined;
  outgoing(call: ImportCall): { metadata: grpc.Metadata; options: Partial<grpc.CallOptions> };
  client(address: string): ReplicaClient;
  record(method: string, outcome: "ok" | "error" | "failover"): void;
}

export function forwardImport(router: ImportRouter, local: grpc.handleClientStreamingCall<ExportChunk, ImportResponse>): grpc.handleClientStreamingCall<ExportChunk, ImportResponse> {
  return (call, callback) => {
    if (!router.routes(call.metadata)) return local(call, callback);
    firstChunk(call).then(async (first) => {
      if (first === "cancelled") return;
      // An empty stream: the local import gives the error it deserves.
      if (first === undefined) return local(call, callback);
      call.unshift(first);
      const targets = router.targets(first.key, call.metadata);
      if (targets === undefined) return local(call, callback);
      await proxy(router, call, callback, first.key, targets);
    });
  };
}

/** The stream's first chunk, left unconsumed by anything else; undefined if the stream ended first. */
function firstChunk(call: ImportCall): Promise<ExportChunk | undefined | "cancelled"> {
  return new Promise((resolve) => {
    const done = (c: ExportChunk | undefined | "cancelled") => {
      call.off("readable", onReadable);
      call.off("end", onEnd);
      call.off("cancelled", onCancel);
      resolve(c);
    };
    const onReadable = () => {
      const c = call.read() as ExportChunk | null;
      if (c !== null) done(c);
    };
    const onEnd = () => done(undefined);
    const onCancel = () => done("cancelled");
    call.on("readable", onReadable);
    call.once("end", onEnd);
    call.once("cancelled", onCancel);
  });
}

async function proxy(router: ImportRouter, call: ImportCall, callback: grpc.sendUnaryData<ImportResponse>, key: string, targets: Target[]): Promise<void> {
  const { metadata, options } = router.outgoing(call);
  let target: Target | undefined;
  for (const [i, t] of targets.entries()) {
    if (await router.ownerReady(t.address, options)) {
      target = t;
      break;
    }
    if (call.cancelled) return;
    router.record("Import", i + 1 < targets.length ? "failover" : "error");
  }
  if (target === undefined) {
    callback({
      code: grpc.status.UNAVAILABLE,
      details: `no owner of "${key}" could be reached (${targets.map((t) => t.nodeId).join(", ")}); nothing was imported, retry`,
      metadata: new grpc.Metadata(),
    });
    return;
  }
  let settled = false;
  const up = router.client(target.address).import(metadata, options, (err, res) => {
    if (settled) return;
    settled = true;
    router.record("Import", err === null ? "ok" : "error");
    if (err !== null) callback({ code: err.code, details: `at owner ${target.nodeId} (${target.address}): ${err.details}`, metadata: new grpc.Metadata() });
    else callback(null, res);
  });
  call.on("data", (c: ExportChunk) => {
    if (settled) return;
    // Back-pressure: read no further from the client until the owner took what was sent.
    if (!up.write(c)) {
      call.pause();
      up.once("drain", () => call.resume());
    }
  });
  call.on("end", () => up.end());
  call.on("cancelled", () => up.cancel());
  call.resume();
}
