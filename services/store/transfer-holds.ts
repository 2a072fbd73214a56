// Keys with a chunked state transfer in progress. From a key's first chunk until its release
// (after finishKey, or when the stream ends), merges into the key wait: a dot a merge brought into
// a range already applied would otherwise survive finishKey even when the sender had removed it
// (gossip/chunk-order.ts). Transfers of one key from two senders run one after the other.
export class TransferHolds {
  private readonly holds = new Map<string, { ended: Promise<void> }>();

  /** Take the key's hold (waiting for another transfer of it to end); returns its release. */
  async begin(key: string): Promise<() => void> {
    // The check and the taking of the hold run with no await between them: two callers waiting on
    // the same transfer cannot both take the next one. (So this does not reuse ended().)
    while (this.holds.has(key)) await this.holds.get(key)!.ended;
    let release!: () => void;
    const ended = new Promise<void>((r) => (release = r));
    const hold = { ended };
    this.holds.set(key, hold);
    return () => {
      if (this.holds.get(key) === hold) this.holds.delete(key);
      release();
    };
  }

  /** Whether a transfer of the key is in progress. */
  held(key: string): boolean {
    return this.holds.has(key);
  }

  /** Resolves when no transfer of the key is in progress. */
  async ended(key: string): Promise<void> {
    while (this.holds.has(key)) await this.holds.get(key)!.ended;
  }
}
