// What a node does with the retry filter of request ids a received state carries (a counter's,
// crdt/pncounter.ts, or a filter key's, crdt/filter-siblings.ts): the same for both. Epochs this
// node has already forgotten (older than its retention window) are not joined back in. And the
// epochs new to this node tell how far the sender's clock is from ours: beyond the clock-skew
// bound the store reports it (a metric and a log line at the node), since retries are then
// recognised for less than the reported retention.
import { FilterSiblings, type PNCounter, type ReplicatedFbf, RetryFilterLattice, prune, skewReport } from "../crdt/index.js";
import type { StoreEnv } from "./layout.js";

/** Where a state keeps its retry filter. */
export interface RetryIdsOf<S> {
  /** The state's retry filter (bottom: none). */
  of(s: S): ReplicatedFbf;
  /** A copy of the state whose retry filter has no epoch older than the window at now. */
  pruned(s: S, now: number): S;
}

export const counterRetryIds: RetryIdsOf<PNCounter> = { of: (s) => s.filter, pruned: (s, now) => s.pruned(now) };

export const filterKeyRetryIds: RetryIdsOf<FilterSiblings<unknown>> = {
  of: (s) => s.retry,
  pruned: (s, now) => new FilterSiblings(s.filters, prune(s.retry, now)),
};

/**
 * Before incoming is joined into state: the state to join instead (incoming without the epochs
 * this node has forgotten), and the check to run once the join has changed the key.
 */
export function receiveRetryIds<S>(ids: RetryIdsOf<S>, env: StoreEnv, key: string, state: S, incoming: S): { incoming: S; joined(): void } {
  if (ids.of(incoming).params === null) return { incoming, joined: () => {} };
  const now = env.now();
  const received = ids.pruned(incoming, now);
  // Asked of the state before the join: the epochs that are new here.
  const fresh = RetryFilterLattice.difference(ids.of(received), ids.of(state));
  return {
    incoming: received,
    joined() {
      if (fresh.params === null || fresh.epochs.size === 0) return;
      const report = skewReport(fresh.epochs.keys(), now, fresh.params.periodMs, env.clockSkewBoundMs);
      if (report !== null) env.clockSkew(key, report);
    },
  };
}
