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
import { StallTimer } from "../common/stall-timer.js";
import { RpcError } from "./errors.js";

export class PacedWriter {
  /** The watch of the wait under way, if any: a chunk the reader takes meanwhile moves it. */
  private stall: StallTimer | undefined;
  /** A write's callback: the chunk went out to the transport, so the reader took one. */
  private readonly taken = () => this.stall?.moved();

  /** `resume` tells the client how to go on after a stall. */
  constructor(
    private readonly call: Writable,
    private readonly stallMs: number,
    private readonly resume: string,
  ) {}

  /**
   * Write a chunk. Resolves at once while gRPC's buffer has room; else once the reader has emptied
   * it ("drain") or the call is cancelled. Rejects with RESOURCE_EXHAUSTED when the reader takes no
   * chunk for the stall limit meanwhile (counted from the start of the wait, or the last chunk taken).
   */
  async write(chunk: unknown): Promise<void> {
    if (this.call.write(chunk, this.taken)) return;
    const ac = new AbortController();
    const stalled = new Promise<never>((_, reject) => {
      this.stall = new StallTimer(this.stallMs, () =>
        reject(new RpcError(status.RESOURCE_EXHAUSTED, `the reader took no chunk for ${this.stallMs} ms (--stream-stall-ms), so the node stopped reading; ${this.resume}`)),
      );
    });
    try {
      await Promise.race([once(this.call, "drain", { signal: ac.signal }), once(this.call, "cancelled", { signal: ac.signal }), stalled]);
    } finally {
      this.stall?.stop();
      this.stall = undefined;
      ac.abort(); // the listener of the event that did not come is removed
    }
  }
}
