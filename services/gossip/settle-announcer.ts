// Settle announcements: which keys of a type whose deltas can lose information in transit (a
// probabilistic set: its filters union only in part, a false positive refuses an add) a node
// sends whole to its neighbours, and when. A key is due once what reads return of it changed
// here (a local operation, or a join that took or dropped an element's dot) and it then had no
// such change for quietMs: one announcement per quiet spell, whatever the number of changes
// before it. Receivers join it as any state; where that changes what they read, they announce in
// turn, so replicas that ended a burst of writes apart meet again without another write. A key
// that never goes quiet (written without a pause) is due anyway once maxWaitMs passed since its
// first change not yet announced, so replicas of a hot key cannot stay apart for good. Changes
// to a filter alone do not count: unions of partly shared filters keep setting bits, and
// announcing them would never stop. Pure: the caller passes the time.
export class SettleAnnouncer<T> {
  /** key → what to announce it as, and when it last changed (insertion order = oldest last change first). */
  private readonly changed = new Map<string, { type: T; at: number }>();
  /** key → its first change since it was last announced (insertion order = oldest first change first). */
  private readonly since = new Map<string, number>();

  /** maxWaitMs: announce a key still changing this long after its first unannounced change (Infinity: never). */
  constructor(
    private readonly quietMs: number,
    private readonly maxWaitMs = Infinity,
  ) {}

  /** What reads return of key changed at now. */
  touch(key: string, type: T, now: number): void {
    // Re-inserted so that the map stays ordered by last change.
    this.changed.delete(key);
    this.changed.set(key, { type, at: now });
    if (!this.since.has(key)) this.since.set(key, now);
  }

  /**
   * The keys due at now, still tracked (done() drops one): first those whose first unannounced
   * change is maxWaitMs old, oldest first (overdue: not quiet yet), then the other keys quiet for
   * quietMs, oldest last change first.
   */
  quiet(now: number): Array<{ key: string; type: T; overdue: boolean }> {
    const out: Array<{ key: string; type: T; overdue: boolean }> = [];
    const listed = new Set<string>();
    for (const [key, first] of this.since) {
      if (now - first < this.maxWaitMs) break;
      const c = this.changed.get(key)!;
      // overdue: due only because of the wait, still changing.
      out.push({ key, type: c.type, overdue: now - c.at < this.quietMs });
      listed.add(key);
    }
    for (const [key, c] of this.changed) {
      if (now - c.at < this.quietMs) break;
      if (!listed.has(key)) out.push({ key, type: c.type, overdue: false });
    }
    return out;
  }

  /** key was announced (or will not be): stop tracking it until its next change. */
  done(key: string): void {
    this.changed.delete(key);
    this.since.delete(key);
  }

  /** Keys changed and not yet due. */
  get pending(): number {
    return this.changed.size;
  }
}
