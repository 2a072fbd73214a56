// Keeps a node's gossip buffer in the order its store took changes, where received payloads and
// local operations meet. A received frame's keys (or a full-state stream's partition) are joined
// into the store first and their new parts reach the buffer together afterwards, so a local change
// made meanwhile would otherwise enter the buffer before new parts the store took earlier. Joining
// the buffer into a delta-group in that order can differ from what the store did: a probabilistic
// set's group would test the local add against a filter the store applied before the add existed,
// and drop a dot the store kept. So a local change of a partition that arrives while received
// payloads of that partition are being joined waits until those (only those) are in the buffer,
// and then goes in, in its own order among the partition's changes.
export class LocalGate<T> {
  private nextGate = 0;
  /** Open gates: id → partition. */
  private readonly open = new Map<number, number>();
  /** Held changes per partition, each with the gates of its partition open when it arrived, and when. */
  private readonly held = new Map<number, Array<{ item: T; waitsFor: number[]; at: number }>>();
  /** Per partition, who waits for its held changes to be released (released). */
  private readonly drainWaiters = new Map<number, Array<() => void>>();

  constructor(
    private readonly release: (item: T) => void,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Received payloads of partition p start joining: returns the gate, to close once their new parts are in the buffer. */
  openGate(partition: number): number {
    const id = this.nextGate++;
    this.open.set(id, partition);
    return id;
  }

  /** The payloads' new parts are in the buffer: release what waited only for gates now closed. */
  closeGate(id: number): void {
    const partition = this.open.get(id);
    if (partition === undefined) return;
    this.open.delete(id);
    const queue = this.held.get(partition);
    if (queue === undefined) return;
    while (queue.length > 0 && queue[0]!.waitsFor.every((g) => !this.open.has(g))) this.release(queue.shift()!.item);
    if (queue.length === 0) {
      this.held.delete(partition);
      const waiters = this.drainWaiters.get(partition);
      this.drainWaiters.delete(partition);
      for (const w of waiters ?? []) w();
    }
  }

  /** Resolves once no local change of partition p waits here: every one offered so far has its seq. */
  released(partition: number): Promise<void> {
    if (!this.holds(partition)) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.drainWaiters.get(partition);
      if (list === undefined) this.drainWaiters.set(partition, [resolve]);
      else list.push(resolve);
    });
  }

  /** A local change of partition p: into the buffer now, or after the payloads of p being joined (behind earlier held ones). */
  offer(partition: number, item: T): void {
    const waitsFor: number[] = [];
    for (const [g, p] of this.open) if (p === partition) waitsFor.push(g);
    const queue = this.held.get(partition);
    if (waitsFor.length === 0 && queue === undefined) {
      this.release(item);
      return;
    }
    const at = this.clock();
    if (queue === undefined) this.held.set(partition, [{ item, waitsFor, at }]);
    else queue.push({ item, waitsFor, at });
  }

  /** Whether local changes of partition p wait here (they have no seq yet). */
  holds(partition: number): boolean {
    return (this.held.get(partition)?.length ?? 0) > 0;
  }

  /** When the oldest change waiting here arrived (undefined: none waits): it has no seq yet. */
  oldestHeldAt(): number | undefined {
    let oldest: number | undefined;
    for (const q of this.held.values()) if (q.length > 0 && (oldest === undefined || q[0]!.at < oldest)) oldest = q[0]!.at;
    return oldest;
  }

  /** Local changes waiting. */
  get waiting(): number {
    let n = 0;
    for (const q of this.held.values()) n += q.length;
    return n;
  }
}
