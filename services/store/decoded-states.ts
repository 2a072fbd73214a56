// Decoded states of the keys stored whole (whole-state-layout.ts), kept in memory so that an
// operation or a received delta on a large filter works on the state it left behind instead of
// decoding the header body again: an ORCF of 2^19 entries took 0.34 s to decode and 0.56 s more
// to rebuild its tag index, on every write and every received delta.
//
// An entry is valid only for the exact version of the state it was read as or written as: the
// header's body, or its state log (records.ts StateLog), is a new object whenever the state
// changes, so that object compared by identity names one version of the state, and nothing else
// (a delete, a transfer, an upgrade) needs to invalidate entries.
//
// Ownership: a writer takes the entry out (take), changes the state in place, and puts it back
// with the version it wrote. A writer that throws half-way leaves no entry behind, so the next one
// reads the stored state again: a half-changed state is never served. Readers (peek) share the object
// and must use it before their next await.
//
// The budget counts the memory the states take, as their layout estimates it from their encoded
// size (whole-state-layout.ts memoryPerEncodedByte: 1 for a bloom filter, 36 for a cuckoo filter).
export class DecodedStates {
  private readonly entries = new Map<string, { version: object; state: unknown; bytes: number }>();
  private bytes = 0;
  hits = 0;
  misses = 0;

  constructor(private readonly budgetBytes: number) {}

  /** The state at version, shared with other readers; undefined when not cached. counted: in hits and misses. */
  peek(key: string, version: object, counted = true): unknown {
    const e = this.entries.get(key);
    if (e === undefined || e.version !== version) {
      if (counted) this.misses++;
      return undefined;
    }
    if (counted) this.hits++;
    // Most recently used last.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.state;
  }

  /** The state at version, now owned by the caller (out of the cache); undefined when not cached. */
  take(key: string, version: object): unknown {
    const state = this.peek(key, version);
    if (state !== undefined) this.drop(key);
    return state;
  }

  /** Remember state as the key's state at version, taking about `bytes` of memory (a state larger than the whole budget is not kept). */
  put(key: string, version: object, state: unknown, bytes: number): void {
    this.drop(key);
    if (bytes > this.budgetBytes) return;
    this.entries.set(key, { version, state, bytes });
    this.bytes += bytes;
    for (const [k] of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.drop(k);
    }
  }

  drop(key: string): void {
    const e = this.entries.get(key);
    if (e === undefined) return;
    this.entries.delete(key);
    this.bytes -= e.bytes;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The memory the states held take, as estimated when they were put. */
  get estimatedBytes(): number {
    return this.bytes;
  }
}
