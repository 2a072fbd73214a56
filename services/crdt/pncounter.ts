// PN-counter on the causal kernel: Causal<DotFun<(positive, negative)>>.
//
// Each replica keeps one live dot whose value is its running totals. An increment mints a new dot
// with the new totals and its delta's context covers all the replica's earlier dots (one range
// 1..n), so older entries are superseded wherever the delta arrives, in any order, and a state
// never holds two entries of one replica. value = Σ positive − Σ negative.
//
// A COUNTER key's state is the product (product.ts) of that PN-counter and the retry filter of the
// request ids its Increments carried (retry-filter.ts, issue 17): retryIncrementDelta checks the id
// and increments in one delta holding both parts, so one stored record, one gossip delta and one
// Merge carry both. The filter is bottom (absent) for a counter never incremented with an id, and
// its encoding is then exactly the plain CounterState of earlier versions.
import { CausalContext } from "./causal-context.js";
import { type Dot, dotKey } from "./dot.js";
import { type DotFun, type DotFunEntry, dotFunStore } from "./dot-store.js";
import { DecodeError } from "./errors.js";
import { contextFromProto, contextToProto, decodeState, dotFromProto, dotToProto } from "./codec.js";
import { type Lattice, ObjectType, registerLattice } from "./lattice.js";
import { type Totals, addToTotals, checkIncrement } from "./counter-range.js";
import { CounterState } from "../gen/deltaset/v1/types.js";
import { productOps } from "./product.js";
import { type ReplicatedFbfParams, type ReplicatedFbf, RetryFilterLattice, prune, retryIdDelta } from "./retry-filter.js";

export type { Totals };

const totals = {
  join: (a: Totals, b: Totals): Totals => ({
    positive: a.positive > b.positive ? a.positive : b.positive,
    negative: a.negative > b.negative ? a.negative : b.negative,
  }),
  equals: (a: Totals, b: Totals) => a.positive === b.positive && a.negative === b.negative,
};
const store = dotFunStore(totals);

export class PNCounter {
  constructor(
    readonly entries: DotFun<Totals>,
    readonly ctx: CausalContext,
    /** The retry filter (bottom when the counter never saw a request id). */
    public filter: ReplicatedFbf = RetryFilterLattice.bottom(),
  ) {}

  static bottom(): PNCounter {
    return new PNCounter(new Map(), new CausalContext());
  }

  value(): bigint {
    let v = 0n;
    for (const e of this.entries.values()) v += e.value.positive - e.value.negative;
    return v;
  }

  /** The live entry of one replica (at most one in a state built by these mutators). */
  entryOf(replica: string): DotFunEntry<Totals> | undefined {
    let best: DotFunEntry<Totals> | undefined;
    for (const e of this.entries.values()) {
      if (e.dot.replica === replica && (best === undefined || e.dot.counter > best.dot.counter)) best = e;
    }
    return best;
  }

  /**
   * increment^δ: a new dot with the replica's new totals, superseding its old dots. Throws
   * CounterRangeError when the totals or the value would leave int64 (see counter-range.ts).
   */
  incrementDelta(replica: string, amount: bigint): PNCounter {
    checkIncrement(this, replica, amount);
    const cur = this.entryOf(replica)?.value ?? { positive: 0n, negative: 0n };
    const d = this.ctx.nextDot(replica);
    const value = addToTotals(cur, amount);
    // The context covers every dot of the replica up to d: all its earlier increments are
    // superseded by these totals, including ones a receiver got out of order and the replica
    // itself no longer holds (covering only the held entry would let them double count).
    const ctx = new CausalContext();
    ctx.addRange(replica, 1, d.counter);
    return new PNCounter(new Map([[dotKey(d), { dot: d, value }]]), ctx);
  }

  /** The full increment mutator, written directly (range-checked as incrementDelta). */
  increment(replica: string, amount: bigint): PNCounter {
    checkIncrement(this, replica, amount);
    const cur = this.entryOf(replica)?.value ?? { positive: 0n, negative: 0n };
    const d = this.ctx.nextDot(replica);
    const entries = new Map([...this.entries].filter(([, e]) => e.dot.replica !== replica));
    entries.set(dotKey(d), { dot: d, value: addToTotals(cur, amount) });
    const ctx = this.ctx.clone();
    ctx.addRange(replica, 1, d.counter);
    return new PNCounter(entries, ctx, this.filter);
  }

  /**
   * Increment with a request id at now (ms, the node's clock): a retry, when the filter holds id
   * (nothing to apply, delta null); otherwise the delta of the increment and of the id's insert,
   * one state holding both. A counter without a filter gets one of params (the caller's choice or
   * defaults). explicit: params were named by the client, so a filter of other parameters is a
   * RetryFilterConflictError rather than silently kept. Range errors as incrementDelta.
   */
  retryIncrementDelta(
    replica: string,
    amount: bigint,
    id: string,
    now: number,
    params: ReplicatedFbfParams,
    explicit: boolean,
  ): { duplicate: boolean; delta: PNCounter | null } {
    const ids = retryIdDelta(this.filter, { id, now, params, explicit }, "the counter's");
    if (ids === null) return { duplicate: true, delta: null };
    const c = this.incrementDelta(replica, amount);
    return { duplicate: false, delta: new PNCounter(c.entries, c.ctx, ids) };
  }

  /** This state with its filter's epochs older than the retention window at now dropped. */
  pruned(now: number): PNCounter {
    return new PNCounter(this.entries, this.ctx, prune(this.filter, now));
  }
}

function counterJoin(a: PNCounter, b: PNCounter): PNCounter {
  return new PNCounter(newestPerReplica(store.join(a.entries, a.ctx, b.entries, b.ctx)), a.ctx.join(b.ctx));
}

/**
 * A replica's entry holds its running totals, so its newest entry supersedes every older one (an
 * increment's delta says so by covering the replica's dots 1..d). Deltas made by redundancy removal
 * or decomposition cover only the dots they name, and an Algorithm 2 interval that leaves out a
 * neighbour's own deltas can join two of them with nothing covering the older entry: the causal
 * join would keep both (and the encoding refuses two entries of one replica). Keep the newest.
 */
function newestPerReplica(entries: DotFun<Totals>): DotFun<Totals> {
  const newest = new Map<string, DotFunEntry<Totals>>();
  for (const e of entries.values()) {
    const cur = newest.get(e.dot.replica);
    if (cur === undefined || e.dot.counter > cur.dot.counter) newest.set(e.dot.replica, e);
  }
  if (newest.size === entries.size) return entries;
  return new Map([...newest.values()].map((e) => [dotKey(e.dot), e]));
}

function sortedEntries(c: PNCounter): DotFunEntry<Totals>[] {
  return [...c.entries.values()].sort((x, y) =>
    x.dot.replica < y.dot.replica ? -1 : x.dot.replica > y.dot.replica ? 1 : x.dot.counter - y.dot.counter,
  );
}

function removedOf(c: PNCounter): CausalContext {
  return c.ctx.subtract(CausalContext.of([...c.entries.values()].map((e) => e.dot)));
}

/** The PN-counter part alone (a state's filter is ignored, and bottom in what it returns). */
const PNPart: Lattice<PNCounter> = {
  type: ObjectType.COUNTER,
  name: "PN_COUNTER",
  bottom: () => PNCounter.bottom(),
  isBottom: (s) => s.entries.size === 0 && s.ctx.isEmpty(),
  clone: (s) => new PNCounter(new Map(s.entries), s.ctx.clone()),
  join: counterJoin,
  joinInPlace(t, o) {
    const j = counterJoin(t, o);
    if (PNPart.equals(j, t)) return false;
    const m = t.entries as Map<string, DotFunEntry<Totals>>;
    m.clear();
    for (const [k, e] of j.entries) m.set(k, e);
    t.ctx.joinInPlace(o.ctx);
    return true;
  },
  leq: (a, b) => PNPart.equals(counterJoin(a, b), b),
  equals: (a, b) => store.equals(a.entries, b.entries) && a.ctx.equals(b.ctx),
  decompose(s) {
    const out: PNCounter[] = [];
    for (const e of s.entries.values()) {
      out.push(new PNCounter(new Map([[dotKey(e.dot), e]]), CausalContext.of([e.dot])));
    }
    for (const d of removedOf(s).dots()) out.push(new PNCounter(new Map(), CausalContext.of([d])));
    return out;
  },
  difference(a, b) {
    const entries = new Map<string, DotFunEntry<Totals>>();
    for (const [k, e] of a.entries) if (!b.ctx.containsDot(e.dot)) entries.set(k, e);
    const ctx = a.ctx.subtract(b.ctx);
    // Removal irreducibles of a that b still holds. b holds at most one entry per replica, so
    // look those up rather than enumerate a's removed dots (a whole range 1..n for a delta).
    for (const e of b.entries.values()) {
      if (a.ctx.containsDot(e.dot) && !a.entries.has(dotKey(e.dot))) ctx.addDot(e.dot);
    }
    return new PNCounter(entries, ctx);
  },
  context: (s) => s.ctx,
  encode: () => {
    throw new Error("the PN part is encoded with its counter");
  },
  encodedSize: () => 0,
  decode: () => {
    throw new Error("the PN part is decoded with its counter");
  },
};

const product = productOps<PNCounter, PNCounter, ReplicatedFbf>({
  first: PNPart,
  second: RetryFilterLattice,
  split: (p) => [p, p.filter],
  make: (a, b) => new PNCounter(a.entries, a.ctx, b),
  assign(t, j) {
    PNPart.joinInPlace(t, j);
    t.filter = j.filter;
  },
});

/** The COUNTER lattice: PN-counter × retry filter (product.ts, retry-filter.ts). */
export const CounterLattice: Lattice<PNCounter> = {
  type: ObjectType.COUNTER,
  name: "COUNTER",
  ...product,
  context: (s) => s.ctx,
  encode: (s) =>
    CounterState.encode({
      entries: sortedEntries(s).map((e) => ({
        dot: dotToProto(e.dot),
        positive: e.value.positive,
        negative: e.value.negative,
      })),
      context: contextToProto(s.ctx),
      retryFilter: RetryFilterLattice.isBottom(s.filter) ? undefined : Buffer.from(RetryFilterLattice.encode(s.filter)),
    }).finish(),
  // A counter's state is one small entry per replica: encoding it is the simplest exact measure.
  encodedSize: (s) => CounterLattice.encode(s).length,
  decode(bytes, _now, bound) {
    const msg = decodeState("CounterState", "CounterState", bytes, CounterState);
    const ctx = contextFromProto(msg.context);
    const entries = new Map<string, DotFunEntry<Totals>>();
    let prev: Dot | undefined;
    for (const [i, e] of msg.entries.entries()) {
      const d = dotFromProto(e.dot, `entries[${i}]`);
      if (prev !== undefined && prev.replica === d.replica) {
        throw new DecodeError(`entries[${i}]: a second entry for replica ${d.replica} (at most one per replica)`);
      }
      if (prev !== undefined && prev.replica > d.replica) {
        throw new DecodeError(`entries[${i}]: entries not sorted by replica id`);
      }
      if (!ctx.containsDot(d)) throw new DecodeError(`entries[${i}]: dot not covered by the context`);
      prev = d;
      entries.set(dotKey(d), { dot: d, value: { positive: e.positive, negative: e.negative } });
    }
    // Absent in every counter never incremented with a request id, and in all earlier versions;
    // another encoder may write it empty or as the empty filter instead, which mean the same.
    const filter =
      msg.retryFilter === undefined || msg.retryFilter.length === 0 ? RetryFilterLattice.bottom() : RetryFilterLattice.decode(msg.retryFilter, undefined, bound);
    return new PNCounter(entries, ctx, filter);
  },
};

registerLattice(CounterLattice);
