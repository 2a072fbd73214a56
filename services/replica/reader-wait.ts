// The writes of a server stream (Scan, Export) paced by its reader. The handler reads the store
// only as fast as the client takes chunks, and a store read holds a LevelDB snapshot (old versions
// of the keys it covers cannot be compacted away): when the reader takes no chunk for the stall
// limit, the handler gives up with RESOURCE_EXHAUSTED and its store read is closed, so an
// abandoned or stuck client cannot hold it forever. A reader that keeps taking chunks, however
// slowly, is never cut. (The HTTP/2 stream itself lasts until the client reads the status or goes
// away: grpc-js sends the status after the chunks already queued, and has no way to reset it.)
import { once } from "node:events";
import type { Writable } from "node:stream";
import { status } from "@grpc/grpc-js";
import { RpcError } from "./errors.js";

export class PacedWriter {
  /** When the reader last took a chunk (a write's callback: the chunk went out to the transport). */
  private lastTaken = performance.now();
  private readonly taken = () => (this.lastTaken = performance.now());

  /** `resume` tells the client how to go on after a stall. */
  constructor(
    private readonly call: Writable,
    private readonly stallMs: number,
    private readonly resume: string,
  ) {}

  /**
   * Write a chunk. Resolves at once while gRPC's buffer has room; else once the reader has emptied
   * it ("drain") or the call is cancelled. Rejects with RESOURCE_EXHAUSTED when the reader takes no
   * chunk for the stall limit meanwhile.
   */
  async write(chunk: unknown): Promise<void> {
    if (this.call.write(chunk, this.taken)) return;
    this.lastTaken = performance.now(); // the stall is counted from here, or from a chunk taken later
    const ac = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<never>((_, reject) => {
      const check = () => {
        const idle = performance.now() - this.lastTaken;
        if (idle < this.stallMs) {
          timer = setTimeout(check, this.stallMs - idle);
          return;
        }
        reject(new RpcError(status.RESOURCE_EXHAUSTED, `the reader took no chunk for ${this.stallMs} ms (--stream-stall-ms), so the node stopped reading; ${this.resume}`));
      };
      timer = setTimeout(check, this.stallMs);
    });
    try {
      await Promise.race([once(this.call, "drain", { signal: ac.signal }), once(this.call, "cancelled", { signal: ac.signal }), stalled]);
    } finally {
      clearTimeout(timer);
      ac.abort(); // the listener of the event that did not come is removed
    }
  }
}
