// A table from string or integer keys to values, on a plain object rather than a Map, for tables
// that live long and turn their entries over on every call (an HTTP/2 session's open streams,
// node/http2-stream-table.ts).
//
// Why not a Map: a Map appends each new entry to its backing store and only marks deleted ones, so
// one that turns entries over moves to a new store every few entries. V8 copies the live entries
// over and leaves the old store as it was, entries and all, pointing at the new one (for iterators
// still walking it); and once a full collection has moved the Map's store to the old generation, it
// allocates each new store there too. Those dead old stores then keep every value that passed
// through the Map alive through young-generation collections, which copy it twice and promote it,
// and the promoted garbage brings on the next full collection, after which it starts over
// (docs/results/replica-history.md measures it). An object's property store reuses deleted slots
// and clears them: it moves only when it grows or shrinks.
//
// Keys are property names: an integer key and its decimal string are the same key. Iteration
// order is the object's (integer-like keys ascending, then the others in insertion order).
export class KeyTable<V> {
  private entries: Record<string, V> = Object.create(null);
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string | number): V | undefined {
    return this.entries[key];
  }

  has(key: string | number): boolean {
    return key in this.entries;
  }

  set(key: string | number, value: V): this {
    if (!(key in this.entries)) this.count++;
    this.entries[key] = value;
    return this;
  }

  delete(key: string | number): boolean {
    if (!(key in this.entries)) return false;
    delete this.entries[key];
    // An emptied table starts a fresh object: one that has shed many keys keeps a large store.
    if (--this.count === 0) this.entries = Object.create(null);
    return true;
  }

  clear(): void {
    this.entries = Object.create(null);
    this.count = 0;
  }

  /** Each entry; entries deleted during the walk and not yet reached are skipped. */
  forEach(fn: (value: V, key: string, table: this) => void): void {
    const entries = this.entries;
    for (const key of Object.keys(entries)) if (key in entries) fn(entries[key]!, key, this);
  }

  values(): V[] {
    return Object.values(this.entries);
  }
}
