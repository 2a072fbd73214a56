// The stored form of a COUNTER: its whole state (PN-counter × retry filter, crdt/pncounter.ts) in
// the key's header body, like any small type (whole-state-layout.ts), with two additions for the
// retry filter. Epochs a received state carries that this node has already forgotten (older than
// its retention window) are not joined back in. And the epochs new to this node tell how far the
// sender's clock is from ours: beyond the clock-skew bound the store reports it (a metric and a
// log line at the node), since retries are then recognised for less than the reported retention.
import { CounterLattice, type PNCounter, RetryFilterLattice, counterRangeProblems, skewReport } from "../crdt/index.js";
import type { ObjectLayout } from "./layout.js";
import { wholeStateLayout } from "./whole-state-layout.js";

export function counterLayout(): ObjectLayout<PNCounter> {
  const inner = wholeStateLayout(CounterLattice, { problems: counterRangeProblems });
  const join: ObjectLayout<PNCounter>["join"] = async (o, env, incoming, wantNewPart) => {
    if (incoming.filter.params === null) return inner.join(o, env, incoming, wantNewPart);
    const now = env.now();
    const received = incoming.pruned(now);
    const before = CounterLattice.decode(o.h.body).filter;
    const r = await inner.join(o, env, received, wantNewPart);
    if (r.changed && r.refused === undefined) {
      const fresh = RetryFilterLattice.difference(received.filter, before);
      if (fresh.params !== null && fresh.epochs.size > 0) {
        const report = skewReport(fresh.epochs.keys(), now, fresh.params.periodMs, env.clockSkewBoundMs);
        if (report !== null) env.clockSkew(o.key, report);
      }
    }
    return r;
  };
  return { ...inner, join, applyChunk: (o, env, chunk) => join(o, env, chunk.slice, true) };
}
