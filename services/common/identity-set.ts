// A set of objects by identity, as a list linked through the objects themselves, for sets that
// live long and take and drop an object per call (a connection's calls in flight). A Set that turns
// its members over leaves old backing stores that, once a full collection has moved it to the old
// generation, keep every member alive through young-generation collections (key-table.ts says
// how); this one keeps nothing of a member it has dropped.
//
// Each set marks its members with a symbol of its own (an object may be in several sets).
interface Link<T> {
  readonly value: T;
  prev: Link<T> | undefined;
  next: Link<T> | undefined;
}

export class IdentitySet<T extends object> {
  private readonly slot = Symbol("identity-set link");
  private head: Link<T> | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  private linkOf(value: T): Link<T> | undefined {
    return (value as Record<symbol, Link<T> | undefined>)[this.slot];
  }

  has(value: T): boolean {
    return this.linkOf(value) !== undefined;
  }

  add(value: T): this {
    if (this.linkOf(value) !== undefined) return this;
    const link: Link<T> = { value, prev: undefined, next: this.head };
    if (this.head !== undefined) this.head.prev = link;
    this.head = link;
    (value as Record<symbol, Link<T> | undefined>)[this.slot] = link;
    this.count++;
    return this;
  }

  delete(value: T): boolean {
    const link = this.linkOf(value);
    if (link === undefined) return false;
    if (link.prev === undefined) this.head = link.next;
    else link.prev.next = link.next;
    if (link.next !== undefined) link.next.prev = link.prev;
    link.prev = link.next = undefined;
    (value as Record<symbol, Link<T> | undefined>)[this.slot] = undefined;
    this.count--;
    return true;
  }

  clear(): void {
    for (const v of this.members()) this.delete(v);
  }

  /** The members now (most recently added first). */
  private members(): T[] {
    const out: T[] = [];
    for (let l = this.head; l !== undefined; l = l.next) out.push(l.value);
    return out;
  }

  /**
   * The members as the walk starts, each visited unless deleted before it is reached (members
   * added during the walk are not visited).
   */
  *[Symbol.iterator](): IterableIterator<T> {
    for (const v of this.members()) if (this.has(v)) yield v;
  }

  values(): IterableIterator<T> {
    return this[Symbol.iterator]();
  }

  forEach(fn: (value: T, same: T, set: this) => void): void {
    for (const v of this) fn(v, v, this);
  }
}
