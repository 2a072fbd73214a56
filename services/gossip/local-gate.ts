// Keeps a node's gossip buffer in the order its store took changes, where received frames and
// local operations meet. A frame's keys are joined into the store first and their new parts
// reach the buffer together afterwards, so a local change made while the frame was being joined
// would otherwise enter the buffer before new parts the store took earlier. Joining the buffer
// into a delta-group in that order can differ from what the store did: a probabilistic set's
// group would test the local add against a filter the store applied before the add existed, and
// drop a dot the store kept. So a local change that arrives while frames are being joined waits
// until those frames (only those) are done, and then goes in, in its own order.
export class LocalGate<T> {
  private nextGate = 0;
  private readonly open = new Set<number>();
  /** Held changes, each with the gates that were open when it arrived. */
  private readonly held: Array<{ item: T; waitsFor: number[] }> = [];

  constructor(private readonly release: (item: T) => void) {}

  /** A frame starts joining: returns its gate, to close once its new parts are in the buffer. */
  openGate(): number {
    const id = this.nextGate++;
    this.open.add(id);
    return id;
  }

  /** The frame's new parts are in the buffer: release what waited only for open gates now closed. */
  closeGate(id: number): void {
    this.open.delete(id);
    while (this.held.length > 0 && this.held[0]!.waitsFor.every((g) => !this.open.has(g))) this.release(this.held.shift()!.item);
  }

  /** A local change: into the buffer now, or after the frames being joined (behind earlier held ones). */
  offer(item: T): void {
    if (this.open.size === 0 && this.held.length === 0) this.release(item);
    else this.held.push({ item, waitsFor: [...this.open] });
  }

  /** Local changes waiting. */
  get waiting(): number {
    return this.held.length;
  }
}
