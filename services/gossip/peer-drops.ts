// Partitions a node dropped (hand-off under a replication factor) and what each peer said of its
// own drops (GossipFrame.dropped, GossipReply.dropped, StateReply.dropped). A node that dropped a
// partition no longer holds what it acknowledged there, so the acks its peers keep for it on that
// partition must be reset before it owns the partition again: otherwise they would go on sending
// only what came after those acks, and it would never receive the rest. Counts live as long as the
// process (a new boot id resets every ack anyway, and the counts start over with it).
export interface PartitionDropCount {
  partition: number;
  count: number;
}

export class PartitionDrops {
  private readonly own = new Map<number, number>();
  private readonly seen = new Map<string, Map<number, number>>();

  /** This node dropped its copy of partition p. */
  noteOwn(p: number): void {
    this.own.set(p, (this.own.get(p) ?? 0) + 1);
  }

  /** This node's drops, for its messages (empty when it never dropped anything). */
  ownCounts(): PartitionDropCount[] {
    return [...this.own].map(([partition, count]) => ({ partition, count }));
  }

  /** A peer's drops as its message lists them; returns the partitions whose count went up. */
  noticePeer(peer: string, drops: readonly PartitionDropCount[]): number[] {
    if (drops.length === 0) return [];
    let known = this.seen.get(peer);
    if (known === undefined) this.seen.set(peer, (known = new Map()));
    const raised: number[] = [];
    for (const { partition, count } of drops) {
      if (count > (known.get(partition) ?? 0)) {
        known.set(partition, count);
        raised.push(partition);
      }
    }
    return raised;
  }

  /** A peer restarted: its counts start over. */
  forgetPeer(peer: string): void {
    this.seen.delete(peer);
  }

  /** Forget every peer not in keep (no longer a neighbour). */
  forgetExcept(keep: ReadonlySet<string>): void {
    for (const id of this.seen.keys()) if (!keep.has(id)) this.seen.delete(id);
  }

  ids(): IterableIterator<string> {
    return this.seen.keys();
  }
}
