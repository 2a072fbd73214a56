// The local operations of the stored types, each the type's delta mutator (crdt/) run on the part
// of the object it names, then joined through the layout like any delta from elsewhere. They run
// inside Store.mutate, under the key's lock.
import { type AWSet, type CausalContext, CounterLattice, CounterRangeError, type Dot, ObjectType, type PNCounter, type ReplicatedFbfParams, elementKey } from "../crdt/index.js";
import type { ObjectSlot, StoreEnv } from "./layout.js";
import { layoutFor } from "./layouts.js";

export async function addElements(o: ObjectSlot, env: StoreEnv, replicaId: string, elements: Uint8Array[]): Promise<{ dots: Dot[]; added: number; delta: AWSet }> {
  const layout = layoutFor(ObjectType.AWSET);
  const s = (await layout.load(o, env, elements)) as AWSet;
  const eks = elements.map(elementKey);
  const added = new Set(eks.filter((ek) => !s.entries.has(ek))).size;
  const delta = s.addDeltaOfKeys(replicaId, eks);
  await layout.join(o, env, delta, false);
  return { dots: eks.map((ek) => delta.entries.get(ek)![0]!), added, delta };
}

/**
 * remove^δ: the dots of each element, only those observed when a context is given. The dots of
 * the observed context this node has not received yet (unseen) are kept as a deferred remove of
 * each element, applied when they arrive (pending-removes.ts); PendingRemovesFullError, with
 * nothing changed, past the limit.
 */
export async function removeElements(
  o: ObjectSlot,
  env: StoreEnv,
  elements: Uint8Array[],
  observed: CausalContext | undefined,
): Promise<{ removed: number; delta: AWSet; pending: number; unseenDots: number }> {
  const layout = layoutFor(ObjectType.AWSET);
  const s = (await layout.load(o, env, elements)) as AWSet;
  const delta = s.removeDelta(elements, observed);
  const targets = [...new Set(elements.map(elementKey))];
  const removed = targets.filter((ek) => {
    const dots = s.entries.get(ek) ?? [];
    return dots.length > 0 && dots.every((d) => delta.ctx.containsDot(d));
  }).length;
  const unseen = observed?.subtract(o.h.ctx);
  const defer = unseen !== undefined && !unseen.isEmpty();
  if (defer) env.pending.checkRoom(o.key, targets);
  await layout.join(o, env, delta, false);
  if (!defer) return { removed, delta, pending: 0, unseenDots: 0 };
  for (const ek of targets) env.pending.defer(o.key, ek, unseen, o.view.otherRecords);
  return { removed, delta, pending: targets.length, unseenDots: unseen.dotCount() };
}

export async function incrementCounter(o: ObjectSlot, env: StoreEnv, replicaId: string, amount: bigint): Promise<{ value: bigint; dot: Dot; delta: PNCounter }> {
  const layout = layoutFor(ObjectType.COUNTER);
  const s = (await layout.load(o, env, [])) as PNCounter;
  let delta: PNCounter;
  try {
    delta = s.incrementDelta(replicaId, amount);
  } catch (err) {
    if (err instanceof CounterRangeError) throw new CounterRangeError(`counter "${o.key}": ${err.message}; nothing was changed`);
    throw err;
  }
  await layout.join(o, env, delta, false);
  return { value: s.value() + amount, dot: [...delta.entries.values()][0]!.dot, delta };
}

/**
 * Increment with a request id (PNCounter.retryIncrementDelta): the check of the id, its insert and
 * the increment are one new state of the key's one record, written under the key's lock. A
 * duplicate changes nothing. The stored filter forgets its epochs older than the window at now.
 */
export async function incrementCounterOnce(
  o: ObjectSlot,
  env: StoreEnv,
  replicaId: string,
  amount: bigint,
  retry: { id: string; now: number; params: ReplicatedFbfParams; explicit: boolean },
): Promise<{ duplicate: boolean; value: bigint; dot?: Dot; delta?: PNCounter }> {
  const layout = layoutFor(ObjectType.COUNTER);
  const s = (await layout.load(o, env, [])) as PNCounter;
  let r: ReturnType<PNCounter["retryIncrementDelta"]>;
  try {
    r = s.retryIncrementDelta(replicaId, amount, retry.id, retry.now, retry.params, retry.explicit);
  } catch (err) {
    if (err instanceof CounterRangeError) throw new CounterRangeError(`counter "${o.key}": ${err.message}; nothing was changed`);
    throw err;
  }
  if (r.delta === null) return { duplicate: true, value: s.value() };
  const next = s.pruned(retry.now);
  CounterLattice.joinInPlace(next, r.delta);
  layout.write!(o, next);
  return { duplicate: false, value: next.value(), dot: [...r.delta.entries.values()][0]!.dot, delta: r.delta };
}
