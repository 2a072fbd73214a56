// The wait of a server stream (Scan, Export) for its reader once gRPC's write buffer is full. The
// handler reads the store only as fast as the client takes chunks, and a store read holds a
// LevelDB snapshot (old versions of the keys it covers cannot be compacted away) and the call's
// buffers: a reader that takes nothing for the stall limit ends the stream, so an abandoned or
// stuck client cannot hold them forever.
import { once } from "node:events";
import type { EventEmitter } from "node:events";
import { status } from "@grpc/grpc-js";
import { RpcError } from "./errors.js";

/**
 * Resolves when the reader has taken what was written ("drain") or the call is cancelled; rejects
 * with RESOURCE_EXHAUSTED when neither happens within stallMs. `resume` says how to go on.
 */
export async function awaitReader(call: EventEmitter, stallMs: number, resume: string): Promise<void> {
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RpcError(status.RESOURCE_EXHAUSTED, `the reader took nothing for ${stallMs} ms (--stream-stall-ms): the stream is ended; ${resume}`)), stallMs);
  });
  try {
    await Promise.race([once(call, "drain", { signal: ac.signal }), once(call, "cancelled", { signal: ac.signal }), stalled]);
  } finally {
    clearTimeout(timer);
    ac.abort(); // the listener of the event that did not come is removed
  }
}
