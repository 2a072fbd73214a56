// Decoded states of the keys stored whole (whole-state-layout.ts), kept in memory so that an
// operation or a received delta on a large filter works on the state it left behind instead of
// decoding the header body again: an ORCF of 2^19 entries took 0.34 s to decode and 0.56 s more
// to rebuild its tag index, on every write and every received delta.
//
// An entry is valid only for the exact body it was decoded from or encoded to: the header's body
// is a new buffer whenever the state changes, so a body compared by identity names one version
// of the state, and nothing else (a delete, a transfer, an upgrade) needs to invalidate entries.
//
// Ownership: a writer takes the entry out (take), changes the state in place, and puts it back
// with the body it encoded. A writer that throws half-way leaves no entry behind, so the next one
// decodes the body again: a half-changed state is never served. Readers (peek) share the object
// and must use it before their next await.
//
// The budget counts encoded bytes (a decoded state takes a multiple of that in memory: about 30x
// for an ORCF, whose entries are objects, and about 1x for a bit filter).
export class DecodedStates {
  private readonly entries = new Map<string, { body: Uint8Array; state: unknown }>();
  private bytes = 0;
  hits = 0;
  misses = 0;

  constructor(private readonly budgetBytes: number) {}

  /** The state decoded from body, shared with other readers; undefined when not cached. */
  peek(key: string, body: Uint8Array): unknown {
    const e = this.entries.get(key);
    if (e === undefined || e.body !== body) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    // Most recently used last.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.state;
  }

  /** The state decoded from body, now owned by the caller (out of the cache); undefined when not cached. */
  take(key: string, body: Uint8Array): unknown {
    const state = this.peek(key, body);
    if (state !== undefined) this.drop(key);
    return state;
  }

  /** Remember state as the decoding of body (a state larger than the whole budget is not kept). */
  put(key: string, body: Uint8Array, state: unknown): void {
    this.drop(key);
    if (body.length > this.budgetBytes) return;
    this.entries.set(key, { body, state });
    this.bytes += body.length;
    for (const [k] of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.drop(k);
    }
  }

  drop(key: string): void {
    const e = this.entries.get(key);
    if (e === undefined) return;
    this.entries.delete(key);
    this.bytes -= e.body.length;
  }

  get size(): number {
    return this.entries.size;
  }

  get encodedBytes(): number {
    return this.bytes;
  }
}
