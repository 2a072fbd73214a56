// A lossy network model for simulations and tests: each message is dropped with a seeded
// probability, duplicated with another, and delayed by a random time in [minDelay, maxDelay],
// so messages overtake each other (reordering). Deterministic for a given seed and call order.
import { MinHeap } from "../common/min-heap.js";
import type { Random } from "../common/prng.js";

export interface ChannelFaults {
  /** Probability that a message is lost. */
  drop: number;
  /** Probability that a delivered message arrives twice (each copy has its own delay). */
  duplicate: number;
  /** Delay range, in the simulation's time unit. */
  minDelay: number;
  maxDelay: number;
}

export const NO_FAULTS: ChannelFaults = { drop: 0, duplicate: 0, minDelay: 0, maxDelay: 0 };

export interface Envelope<M> {
  from: string;
  to: string;
  msg: M;
  sentAt: number;
  deliverAt: number;
}

export interface ChannelStats {
  sent: number;
  dropped: number;
  duplicated: number;
  delivered: number;
}

interface Queued<M> {
  env: Envelope<M>;
  /** Insertion number: ties on deliverAt are delivered in send order. */
  order: number;
}

export class LossyChannel<M> {
  readonly stats: ChannelStats = { sent: 0, dropped: 0, duplicated: 0, delivered: 0 };
  private faults: ChannelFaults;
  /** In delivery order: by deliverAt, then send order. */
  private readonly heap = new MinHeap<Queued<M>>(
    (a, b) => a.env.deliverAt < b.env.deliverAt || (a.env.deliverAt === b.env.deliverAt && a.order < b.order),
  );
  private order = 0;

  constructor(
    private readonly random: Random,
    faults: ChannelFaults = NO_FAULTS,
  ) {
    this.faults = checkFaults(faults);
  }

  setFaults(faults: ChannelFaults): void {
    this.faults = checkFaults(faults);
  }

  getFaults(): ChannelFaults {
    return { ...this.faults };
  }

  get pending(): number {
    return this.heap.size;
  }

  send(now: number, from: string, to: string, msg: M): void {
    this.stats.sent++;
    const f = this.faults;
    if (this.random() < f.drop) {
      this.stats.dropped++;
      return;
    }
    const copies = this.random() < f.duplicate ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let i = 0; i < copies; i++) {
      const delay = f.minDelay + this.random() * (f.maxDelay - f.minDelay);
      this.heap.push({ env: { from, to, msg, sentAt: now, deliverAt: now + delay }, order: this.order++ });
    }
  }

  /** The next message due strictly before `until`, or undefined. */
  popBefore(until: number): Envelope<M> | undefined {
    const top = this.heap.peek();
    if (top === undefined || top.env.deliverAt >= until) return undefined;
    this.stats.delivered++;
    this.heap.pop();
    return top.env;
  }

  /** Drop every queued message to a node (it crashed; in-flight messages to it are lost). */
  dropTo(node: string): number {
    const dropped = this.heap.retain((q) => q.env.to !== node);
    this.stats.dropped += dropped;
    return dropped;
  }
}

function checkFaults(f: ChannelFaults): ChannelFaults {
  const prob = (x: number) => x >= 0 && x <= 1;
  if (!prob(f.drop) || !prob(f.duplicate)) throw new RangeError("drop and duplicate are probabilities in [0, 1]");
  if (!(f.minDelay >= 0 && f.maxDelay >= f.minDelay)) throw new RangeError("need 0 <= minDelay <= maxDelay");
  return { ...f };
}
