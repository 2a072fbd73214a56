// Settle announcements: which keys of a type whose deltas can lose information in transit (a
// probabilistic set: its filters union only in part, a false positive refuses an add) a node
// sends whole to its neighbours, and when. A key is due once what reads return of it changed
// here (a local operation, or a join that took or dropped an element's dot) and it then had no
// such change for quietMs: one announcement per quiet spell, whatever the number of changes
// before it. Receivers join it as any state; where that changes what they read, they announce in
// turn, so replicas that ended a burst of writes apart meet again without another write. Changes
// to a filter alone do not count: unions of partly shared filters keep setting bits, and
// announcing them would never stop. Pure: the caller passes the time.
export class SettleAnnouncer<T> {
  /** key → what to announce it as, and when it last changed (insertion order = oldest change first). */
  private readonly changed = new Map<string, { type: T; at: number }>();

  constructor(private readonly quietMs: number) {}

  /** What reads return of key changed at now. */
  touch(key: string, type: T, now: number): void {
    // Re-inserted so that the map stays ordered by last change.
    this.changed.delete(key);
    this.changed.set(key, { type, at: now });
  }

  /** The keys quiet for quietMs at now, oldest first, still tracked (done() drops one). */
  quiet(now: number): Array<{ key: string; type: T }> {
    const out: Array<{ key: string; type: T }> = [];
    for (const [key, c] of this.changed) {
      if (now - c.at < this.quietMs) break;
      out.push({ key, type: c.type });
    }
    return out;
  }

  /** key was announced (or will not be): stop tracking it until its next change. */
  done(key: string): void {
    this.changed.delete(key);
  }

  /** Keys changed and not yet due. */
  get pending(): number {
    return this.changed.size;
  }
}
