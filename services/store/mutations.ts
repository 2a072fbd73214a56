// The local operations of the stored types, each the type's delta mutator (crdt/) run on the part
// of the object it names, then joined by the type's own join: for the add-wins set through
// joinOwnDelta (the part the mutator read holds everything the join touches), for the others
// through their layout. They run inside Store.mutate, under the key's lock.
import { type AWSet, AWSetLattice, type CausalContext, CounterLattice, CounterRangeError, type Dot, ObjectType, type PNCounter, type RetryRequest } from "../crdt/index.js";
import type { ObjectSlot, StoreEnv } from "./layout.js";
import { layoutFor } from "./layouts.js";
import { joinOwnDelta } from "./element-layout.js";
import { windowOf } from "./element-window.js";
import { UnmadeAddsError } from "./pending-removes.js";

export async function addElements(o: ObjectSlot, env: StoreEnv, replicaId: string, elements: Uint8Array[], expiresAt?: number): Promise<{ dots: Dot[]; added: number; delta: AWSet }> {
  const eks = await o.view.loadBytes(elements);
  const window = windowOf(o);
  const delta = window.addDeltaOfKeys(replicaId, eks, expiresAt);
  const dots = eks.map((ek) => delta.entries.get(ek)![0]!);
  if (window.entries.size === 0 && !env.pending.has(o.key)) {
    // Every element is new here (the usual batch): the join of the delta is its fresh dots, one
    // element each, and its context (the window shares the header's), with nothing to drop.
    o.h.ctx.joinInPlace(delta.ctx);
    for (const [ek, ds] of delta.entries) o.view.setDots(ek, ds, o.h);
    return { dots, added: delta.entries.size, delta };
  }
  let added = 0;
  for (const ek of delta.entries.keys()) if (!window.entries.has(ek)) added++;
  const { settled } = await joinOwnDelta(o, env, window, delta, delta.entries.keys());
  return { dots, added, delta: withSettled(delta, settled) };
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
  replicaId: string,
): Promise<{ removed: number; delta: AWSet; pending: number; unseenDots: number }> {
  const unseen = observed?.subtract(o.h.ctx);
  // Adds of this node are minted from the key's context: any of its own not there were never made.
  if (unseen !== undefined && unseen.max(replicaId) > 0) throw new UnmadeAddsError(o.key, replicaId, unseen.rangesOf(replicaId), o.h.ctx.max(replicaId));
  const targets = [...new Set(await o.view.loadBytes(elements))];
  const window = windowOf(o);
  const delta = window.removeDelta(elements, observed);
  const removed = targets.filter((ek) => {
    const dots = window.entries.get(ek) ?? [];
    return dots.length > 0 && dots.every((d) => delta.ctx.containsDot(d));
  }).length;
  const defer = unseen !== undefined && !unseen.isEmpty();
  if (defer) env.pending.checkRoom(o.key, targets, unseen);
  const { settled } = await joinOwnDelta(o, env, window, delta, targets);
  const out = withSettled(delta, settled);
  if (!defer) return { removed, delta: out, pending: 0, unseenDots: 0 };
  for (const ek of targets) env.pending.defer(o.key, ek, unseen, o.view.otherRecords);
  return { removed, delta: out, pending: targets.length, unseenDots: unseen.dotCount() };
}

/** The delta to spread: the operation's, and the deferred removes it made applicable here. */
function withSettled(delta: AWSet, settled: AWSet | undefined): AWSet {
  return settled === undefined ? delta : AWSetLattice.join(delta, settled);
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
  retry: RetryRequest,
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
  layout.write!(o, env, next);
  return { duplicate: false, value: next.value(), dot: [...r.delta.entries.values()][0]!.dot, delta: r.delta };
}
