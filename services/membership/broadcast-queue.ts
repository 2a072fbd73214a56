// Membership updates waiting to be piggybacked. One entry per member (a newer update replaces the
// older one). Each pick takes the entries sent the fewest times, newest first, and an entry is
// dropped after it was sent `limit` times, so every update spreads epidemically for O(log n)
// rounds and then stops costing bandwidth.
import type { MemberInfo } from "../gen/deltaset/v1/membership.js";

interface Entry {
  info: MemberInfo;
  transmits: number;
  order: number;
}

export class BroadcastQueue {
  private readonly entries = new Map<string, Entry>();
  private counter = 0;

  /** Queue (or replace) the update about info.nodeId with a fresh transmit budget. */
  enqueue(info: MemberInfo): void {
    this.entries.set(info.nodeId, { info, transmits: 0, order: this.counter++ });
  }

  remove(nodeId: string): void {
    this.entries.delete(nodeId);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Up to `max` updates for one message, skipping `exclude`; counts the transmission. */
  pick(max: number, limit: number, exclude?: ReadonlySet<string>): MemberInfo[] {
    if (max <= 0 || this.entries.size === 0) return [];
    const candidates: Entry[] = [];
    for (const entry of this.entries.values()) {
      if (exclude?.has(entry.info.nodeId)) continue;
      candidates.push(entry);
    }
    candidates.sort((a, b) => a.transmits - b.transmits || b.order - a.order);
    const picked = candidates.slice(0, max);
    for (const entry of picked) {
      entry.transmits++;
      if (entry.transmits >= limit) this.entries.delete(entry.info.nodeId);
    }
    return picked.map((entry) => entry.info);
  }
}
