// Generators of reachable CRDT states for the property tests.
//
// A "universe" is what 2-4 replicas produce by replaying a random operation sequence: local
// mutations, full-state joins between replicas, and deliveries of earlier deltas in any order and
// any number of times (so contexts get gaps and clouds). Every state in one universe's pool
// (replica states, snapshots, deltas, delta-groups, bottom) is consistent with every other one:
// one dot always names one event. Elements come from a small domain (bytes 0..7) so adds and
// removes of the same element collide often.
import fc from "fast-check";
import { AWSet, CounterLattice, PNCounter } from "../../services/crdt/index.js";

export const RUNS = Number(process.env.FC_RUNS ?? 500);
export const REPLICA_IDS = ["a", "b", "c", "d"] as const;
export const ELEMENT_DOMAIN = 8;

export const el = (n: number): Uint8Array => Uint8Array.of(n);

/** A value that fast-check prints as the operation script, not as the replayed states. */
export interface Universe<S> {
  readonly script: unknown;
  readonly replicaIds: string[];
  readonly replicas: S[];
  /** Every state produced: bottom, replica states, snapshots, deltas and delta-groups. */
  readonly pool: S[];
}

function universe<S>(script: unknown, replicaIds: string[], replicas: S[], pool: S[]): Universe<S> {
  return {
    script,
    replicaIds,
    replicas,
    pool,
    [fc.toStringMethod]: () => `Universe(${JSON.stringify(script)})`,
  } as Universe<S>;
}

// ---------------------------------------------------------------- AWSet

export type AWOp =
  | { t: "add"; r: number; els: number[] }
  | { t: "remove"; r: number; els: number[]; ctxFrom: number | null }
  | { t: "clear"; r: number; ctxFrom: number | null }
  | { t: "sync"; from: number; to: number }
  | { t: "deliver"; delta: number; to: number };

const elements = fc.array(fc.integer({ min: 0, max: ELEMENT_DOMAIN - 1 }), { minLength: 1, maxLength: 3 });
const idx = fc.nat({ max: 1000 });

export const awOp: fc.Arbitrary<AWOp> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant("add" as const), r: idx, els: elements }), weight: 5 },
  {
    arbitrary: fc.record({ t: fc.constant("remove" as const), r: idx, els: elements, ctxFrom: fc.option(idx) }),
    weight: 3,
  },
  { arbitrary: fc.record({ t: fc.constant("clear" as const), r: idx, ctxFrom: fc.option(idx) }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant("sync" as const), from: idx, to: idx }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant("deliver" as const), delta: idx, to: idx }), weight: 4 },
);

export interface AWScript {
  n: number;
  ops: AWOp[];
}

export function replayAWSet(script: AWScript): Universe<AWSet> {
  const ids = REPLICA_IDS.slice(0, script.n);
  const replicas = ids.map(() => AWSet.bottom());
  const snapshots: AWSet[] = [];
  const deltas: AWSet[] = [];
  const pick = <T>(xs: T[], i: number | null): T | undefined =>
    i === null || xs.length === 0 ? undefined : xs[i % xs.length];
  for (const op of script.ops) {
    let delta: AWSet | undefined;
    switch (op.t) {
      case "add": {
        const r = op.r % ids.length;
        delta = replicas[r]!.addDelta(ids[r]!, op.els.map(el));
        replicas[r]!.joinInPlace(delta);
        snapshots.push(replicas[r]!.clone());
        break;
      }
      case "remove": {
        const r = op.r % ids.length;
        const observed = pick(snapshots, op.ctxFrom)?.ctx;
        delta = replicas[r]!.removeDelta(op.els.map(el), observed);
        replicas[r]!.joinInPlace(delta);
        snapshots.push(replicas[r]!.clone());
        break;
      }
      case "clear": {
        const r = op.r % ids.length;
        delta = replicas[r]!.clearDelta(pick(snapshots, op.ctxFrom)?.ctx);
        replicas[r]!.joinInPlace(delta);
        snapshots.push(replicas[r]!.clone());
        break;
      }
      case "sync":
        replicas[op.to % ids.length]!.joinInPlace(replicas[op.from % ids.length]!);
        break;
      case "deliver": {
        const d = pick(deltas, op.delta);
        if (d !== undefined) replicas[op.to % ids.length]!.joinInPlace(d);
        break;
      }
    }
    if (delta !== undefined) deltas.push(delta);
  }
  // Delta-groups: joins of consecutive deltas, as an anti-entropy buffer would ship them.
  const groups: AWSet[] = [];
  for (let i = 0; i + 1 < deltas.length; i += 2) {
    const g = deltas[i]!.clone();
    g.joinInPlace(deltas[i + 1]!);
    groups.push(g);
  }
  const pool = [AWSet.bottom(), ...replicas.map((r) => r.clone()), ...snapshots, ...deltas, ...groups];
  return universe(script, ids, replicas, pool);
}

export const awScript: fc.Arbitrary<AWScript> = fc.record({
  n: fc.integer({ min: 2, max: 4 }),
  ops: fc.array(awOp, { maxLength: 30, size: "max" }),
});

export const awUniverse: fc.Arbitrary<Universe<AWSet>> = awScript.map(replayAWSet);

// ---------------------------------------------------------------- PN-counter

export type CounterOp =
  | { t: "inc"; r: number; amount: number }
  | { t: "sync"; from: number; to: number }
  | { t: "deliver"; delta: number; to: number };

export const counterOp: fc.Arbitrary<CounterOp> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant("inc" as const), r: idx, amount: fc.integer({ min: -5, max: 5 }) }), weight: 5 },
  { arbitrary: fc.record({ t: fc.constant("sync" as const), from: idx, to: idx }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant("deliver" as const), delta: idx, to: idx }), weight: 4 },
);

export interface CounterScript {
  n: number;
  ops: CounterOp[];
}

export function replayCounter(script: CounterScript): Universe<PNCounter> {
  const ids = REPLICA_IDS.slice(0, script.n);
  const replicas = ids.map(() => PNCounter.bottom());
  const snapshots: PNCounter[] = [];
  const deltas: PNCounter[] = [];
  // States are immutable in this replay (the pure join is used), so sharing them is safe.
  const join = (a: PNCounter, b: PNCounter) => CounterLattice.join(a, b);
  for (const op of script.ops) {
    switch (op.t) {
      case "inc": {
        const r = op.r % ids.length;
        const d = replicas[r]!.incrementDelta(ids[r]!, BigInt(op.amount));
        replicas[r] = join(replicas[r]!, d);
        deltas.push(d);
        snapshots.push(replicas[r]!);
        break;
      }
      case "sync": {
        const to = op.to % ids.length;
        replicas[to] = join(replicas[to]!, replicas[op.from % ids.length]!);
        break;
      }
      case "deliver": {
        if (deltas.length === 0) break;
        const to = op.to % ids.length;
        replicas[to] = join(replicas[to]!, deltas[op.delta % deltas.length]!);
        break;
      }
    }
  }
  const groups: PNCounter[] = [];
  for (let i = 0; i + 1 < deltas.length; i += 2) groups.push(join(deltas[i]!, deltas[i + 1]!));
  const pool = [PNCounter.bottom(), ...replicas, ...snapshots, ...deltas, ...groups];
  return universe(script, ids, replicas, pool);
}

export const counterScript: fc.Arbitrary<CounterScript> = fc.record({
  n: fc.integer({ min: 2, max: 4 }),
  ops: fc.array(counterOp, { maxLength: 30, size: "max" }),
});

export const counterUniverse: fc.Arbitrary<Universe<PNCounter>> = counterScript.map(replayCounter);

/** A universe plus indices to pick states from its pool. */
export function withPicks<S>(u: fc.Arbitrary<Universe<S>>, k: number) {
  return fc.tuple(u, fc.array(fc.nat(), { minLength: k, maxLength: k }));
}

export function pickFrom<S>(u: Universe<S>, i: number): S {
  return u.pool[i % u.pool.length]!;
}
