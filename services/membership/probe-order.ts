// Round-robin probe order over a shuffled member list (as memberlist does): every live member is
// probed once per round, a new round reshuffles, and a member that joins mid-round is inserted at a
// random place in the rest of the round. So a prober reaches any member within 2(n - 1) - 1 probes,
// where random picks alone give no bound.
import { randomInt, shuffleInPlace, type Random } from "../common/prng.js";

export class ProbeOrder {
  private order: string[] = [];
  private index = 0;

  /** The next member to probe, or undefined when there is none. */
  next(isProbeable: (nodeId: string) => boolean, candidates: () => string[], random: Random): string | undefined {
    for (let pass = 0; pass < 2; pass++) {
      while (this.index < this.order.length) {
        const id = this.order[this.index++]!;
        if (isProbeable(id)) return id;
      }
      this.order = shuffleInPlace(candidates(), random);
      this.index = 0;
    }
    return undefined;
  }

  /** A newly known member joins the current round at a random remaining position. */
  add(nodeId: string, random: Random): void {
    if (this.order.includes(nodeId)) {
      // Still in this round: nothing to do. Already probed this round: it comes up next round.
      return;
    }
    const at = this.index + randomInt(random, this.order.length - this.index + 1);
    this.order.splice(at, 0, nodeId);
  }
}
