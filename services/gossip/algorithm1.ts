// Algorithm 1 (basic anti-entropy for δ-CRDTs; seed 000 section 1.2) for one partition.
//
//   on operation(m^δ):  d = m^δ(X); X ⊔= d; D ⊔= d
//   on receive(d):      X ⊔= d; if transitive then D ⊔= d
//   periodically:       m = choose(X, D); send m to every neighbour; D = ⊥
//
// X is not held here: the caller owns it, and a "state" choice is returned as an instruction to
// ship X. Receipts: the engine joins into D what the caller hands it (see the engine's receive
// contract), which is the received payload only when it inflated X. Forwarding only inflations
// is what lets delta-groups die out in a cyclic overlay; the literal line 16 (D ⊔= d for every d)
// would re-forward redundant payloads around every cycle forever.
//
// Convergence needs full state now and then. A lost delta-group is never resent (D is reset
// after each ship), so over a lossy channel only a later full state repairs the loss. And in
// non-transitive mode a node ships only its own deltas, only to its neighbours: on a partial
// mesh an update reaches a node two hops away only inside a full state of a node in between,
// so without choose = state or delta+periodic-state it never arrives, even with no loss.
import type { PayloadOps } from "./payload.js";

export type Choose = "state" | "delta" | "delta+periodic-state";

/**
 * state: ship X; with periodic state, also the delta-group D (payload), so that a state the
 * transport cannot send yet (one is running to that peer) delays nothing new.
 */
export type Alg1Plan<P> = { kind: "none" } | { kind: "state"; payload?: P } | { kind: "delta"; payload: P };

export class Alg1Partition<P> {
  private group: P;
  /** Something new arrived too big to hold in D: ship the full state next period. */
  private stateOwed = false;

  constructor(
    private readonly ops: PayloadOps<P>,
    readonly partition: number,
  ) {
    this.group = ops.bottom();
  }

  /** The delta-group D not yet shipped. */
  get deltaGroup(): P {
    return this.group;
  }

  /** on operation: D ⊔= d. */
  local(delta: P): void {
    this.group = this.ops.join(this.group, delta);
  }

  /** on receive: in transitive mode, D ⊔= the new part. */
  receive(fresh: P | undefined, transitive: boolean): void {
    if (transitive && fresh !== undefined && !this.ops.isBottom(fresh)) {
      this.group = this.ops.join(this.group, fresh);
    }
  }

  /**
   * on receive, when the new part was too big to join into D (a large catch-up): in transitive
   * mode the next period ships X, which holds it, instead of D.
   */
  receiveTooLarge(transitive: boolean): void {
    if (transitive) this.stateOwed = true;
  }

  /**
   * A state this partition planned was not sent (the transport had one running to that peer):
   * the delta-group went with the plan, so the next period ships the state instead.
   */
  oweState(): void {
    this.stateOwed = true;
  }

  /**
   * periodically: choose(X, D), then D = ⊥. With periodic state, partition p ships its state on
   * the periods where (period + p) mod k = 0, so the partitions take turns instead of all
   * shipping state in the same period.
   */
  plan(choose: Choose, period: number, statePeriod: number): Alg1Plan<P> {
    const d = this.group;
    this.group = this.ops.bottom();
    const owed = this.stateOwed;
    this.stateOwed = false;
    const stateNow =
      owed || choose === "state" || (choose === "delta+periodic-state" && (period + this.partition) % statePeriod === 0);
    if (stateNow) return choose === "state" || this.ops.isBottom(d) ? { kind: "state" } : { kind: "state", payload: d };
    if (this.ops.isBottom(d)) return { kind: "none" };
    return { kind: "delta", payload: d };
  }
}
