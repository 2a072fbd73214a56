// Live tags (replica, counter) of an ORCF and what each names (where its entry sits), keyed by
// replica and then by counter: no tag string is built per entry. A filter of 2^19 entries built
// its index of "t@replica" strings in 0.56 s and held 2x its decoded size with it.
export class TagIndex<V> {
  private readonly byReplica: Map<string, Map<number, V>>;
  private n: number;

  constructor(from?: TagIndex<V>) {
    this.byReplica = new Map();
    this.n = from?.n ?? 0;
    if (from !== undefined) for (const [r, m] of from.byReplica) this.byReplica.set(r, new Map(m));
  }

  get size(): number {
    return this.n;
  }

  get(replica: string, t: number): V | undefined {
    return this.byReplica.get(replica)?.get(t);
  }

  has(replica: string, t: number): boolean {
    return this.byReplica.get(replica)?.has(t) ?? false;
  }

  set(replica: string, t: number, v: V): void {
    let m = this.byReplica.get(replica);
    if (m === undefined) this.byReplica.set(replica, (m = new Map()));
    if (!m.has(t)) this.n++;
    m.set(t, v);
  }

  delete(replica: string, t: number): void {
    const m = this.byReplica.get(replica);
    if (m === undefined || !m.delete(t)) return;
    this.n--;
    if (m.size === 0) this.byReplica.delete(replica);
  }

  *entries(): IterableIterator<[replica: string, t: number, v: V]> {
    for (const [r, m] of this.byReplica) for (const [t, v] of m) yield [r, t, v];
  }
}
