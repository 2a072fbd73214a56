// Gossip bytes of a run, scraped from each node's Prometheus endpoint: the sum over kinds
// (delta, state, ack) of deltaset_gossip_sent_bytes_total (anti-entropy payload bytes, not
// counting gRPC/HTTP2 framing). A restarted node starts again at 0, so the counter is read just
// before a node is killed or stopped and carried over.

/** Sum of every sample of a metric in a Prometheus text exposition. */
export function sumMetric(text: string, name: string): number | undefined {
  let found = false;
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest !== "" && rest[0] !== "{" && rest[0] !== " ") continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (!Number.isFinite(value)) continue;
    found = true;
    sum += value;
  }
  return found ? sum : undefined;
}

export const GOSSIP_SENT_METRIC = "deltaset_gossip_sent_bytes_total";

/** Gossip bytes a node sent so far, or undefined when it has no metrics endpoint or does not answer. */
export async function scrapeGossipBytes(metricsAddress: string | undefined, timeoutMs = 2000): Promise<number | undefined> {
  if (metricsAddress === undefined) return undefined;
  try {
    const res = await fetch(`http://${metricsAddress}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return undefined;
    return sumMetric(await res.text(), GOSSIP_SENT_METRIC);
  } catch {
    return undefined;
  }
}

/** Counts gossip bytes per node across restarts. */
export class GossipBytesMeter {
  private readonly carried = new Map<string, number>();
  private readonly baseline = new Map<string, number>();
  private missing = false;

  constructor(private readonly metricsAddress: (nodeId: string) => string | undefined) {}

  /** Read every node at the start of the measured span. */
  async begin(nodeIds: readonly string[]): Promise<void> {
    for (const id of nodeIds) {
      const v = await scrapeGossipBytes(this.metricsAddress(id));
      if (v === undefined) this.missing = true;
      this.baseline.set(id, v ?? 0);
    }
  }

  /** Read a node that is about to go away (its counter restarts at 0 with the process). */
  async beforeRestart(nodeId: string): Promise<void> {
    const v = await scrapeGossipBytes(this.metricsAddress(nodeId), 1000);
    if (v === undefined) {
      this.missing = true;
      return;
    }
    this.carried.set(nodeId, (this.carried.get(nodeId) ?? 0) + v);
  }

  /** Total bytes sent by every node since begin(); null when some node could not be read. */
  async end(nodeIds: readonly string[]): Promise<{ total: number | null; perNode: Record<string, number | null> }> {
    const perNode: Record<string, number | null> = {};
    let total = 0;
    for (const id of nodeIds) {
      const v = await scrapeGossipBytes(this.metricsAddress(id));
      if (v === undefined) {
        this.missing = true;
        perNode[id] = null;
        continue;
      }
      perNode[id] = v + (this.carried.get(id) ?? 0) - (this.baseline.get(id) ?? 0);
      total += perNode[id]!;
    }
    return { total: this.missing ? null : total, perNode };
  }
}
