// Gossip loss realized with Toxiproxy: short windows in which one directed peer link resets every
// connection that carries data (a reset_peer toxic on its upstream stream), switched on and off
// through the API, about `windowShare` of the link time, until stopped. A reset fails the
// exchange in flight on that link (the sender counts an RPC error; the engine resends what was
// not acknowledged) and makes gRPC reconnect, so what a window costs depends on the traffic: the
// sweep reports the measured share of failed exchanges. Bounded: windows are planned one second
// at a time and stop() removes every toxic this put on.
import type { Proxy } from "toxiproxy-node-client";
import type { Random } from "../../common/prng.js";
import { lossWindows } from "./grid.js";

export class LossWindows {
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly active = new Map<string, Proxy>();
  private seq = 0;
  private planner: NodeJS.Timeout | undefined;
  /** Windows switched on so far. */
  windows = 0;
  /** API calls that failed (a window then did not happen, or ended late). */
  errors = 0;

  constructor(
    private readonly proxies: readonly Proxy[],
    private readonly share: number,
    private readonly random: Random,
    private readonly meanWindowMs = 200,
  ) {}

  start(): void {
    if (this.share <= 0 || this.proxies.length === 0) return;
    const plan = () => {
      if (this.stopped) return;
      for (const w of lossWindows(this.random, this.proxies.length, this.share, 1000, this.meanWindowMs)) {
        this.later(w.startMs, () => void this.window(this.proxies[w.link]!, w.endMs - w.startMs));
      }
    };
    plan();
    this.planner = setInterval(plan, 1000);
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.stopped) fn();
    }, ms);
    this.timers.add(t);
  }

  private async window(proxy: Proxy, lengthMs: number): Promise<void> {
    const name = `eval-loss-${++this.seq}`;
    try {
      await proxy.addToxic({ name, type: "reset_peer", stream: "upstream", toxicity: 1, attributes: { timeout: 0 } as never });
      this.windows++;
    } catch {
      this.errors++;
      return;
    }
    this.active.set(name, proxy);
    this.later(lengthMs, () => void this.remove(name));
    if (this.stopped) await this.remove(name);
  }

  private async remove(name: string): Promise<void> {
    const proxy = this.active.get(name);
    if (proxy === undefined) return;
    this.active.delete(name);
    try {
      await (await proxy.getToxic(name)).remove();
    } catch {
      this.errors++;
    }
  }

  /** Stop planning and switch every window off. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.planner) clearInterval(this.planner);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all([...this.active.keys()].map((n) => this.remove(n)));
  }
}
