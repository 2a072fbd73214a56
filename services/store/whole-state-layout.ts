// The one-record layout: the whole state of a key, encoded by its lattice, in the body of the
// key's header. Fits any lattice whose state stays small (a counter has an entry per replica, a
// filter a fixed number of bits), and needs nothing but the lattice: join, difference, codec.
// A state travels in one chunk. The decoded state of a key stays in memory between operations
// (decoded-states.ts): a write decodes nothing, and still encodes the whole state once.
import type { Lattice } from "../crdt/index.js";
import type { ObjectLayout, ObjectSlot, StoreEnv } from "./layout.js";

export interface WholeStateOptions<S> {
  /**
   * Bounds the lattice does not have but every reader needs (a counter must fit int64): problems of
   * a state, in words. A join that would take a state without problems to one with problems is
   * refused, nothing changes, and the refusal is reported; the state stays readable everywhere.
   */
  problems?: (s: S) => string[];
}

export function wholeStateLayout<S>(lattice: Lattice<S>, opts: WholeStateOptions<S> = {}): ObjectLayout<S> {
  /** The key's state for a writer to change in place: out of the cache, or decoded. */
  const take = (o: ObjectSlot, env: StoreEnv): S => (env.decoded.take(o.key, o.h.body) as S | undefined) ?? lattice.decode(o.h.body);
  const store = (o: ObjectSlot, env: StoreEnv, state: S): void => {
    o.h.body = lattice.encode(state);
    o.h.ctx = lattice.context(state).clone();
    env.decoded.put(o.key, o.h.body, state);
  };
  const join: ObjectLayout<S>["join"] = async (o, env, incoming, wantNewPart) => {
    const state = take(o, env);
    if (opts.problems !== undefined) {
      const problems = opts.problems(lattice.join(state, incoming));
      if (problems.length > 0 && opts.problems(state).length === 0) {
        const reason = `joining this state into ${lattice.name.toLowerCase()} "${o.key}" would make it unreadable: ${problems.join("; ")}`;
        env.joinRefused(o.key, reason);
        env.decoded.put(o.key, o.h.body, state);
        return { changed: false, newPart: lattice.bottom(), refused: reason };
      }
    }
    const newPart = wantNewPart ? lattice.difference(incoming, state) : lattice.bottom();
    const changed = lattice.joinInPlace(state, incoming);
    if (changed) store(o, env, state);
    else env.decoded.put(o.key, o.h.body, state);
    return { changed, newPart };
  };
  return {
    lattice,
    emptyBody: () => lattice.encode(lattice.bottom()),
    load: async (o, env) => take(o, env),
    write: store,
    join,
    applyChunk: (o, env, chunk) => join(o, env, chunk.slice, true),
    finishKey: async () => ({ changed: false, newPart: lattice.bottom() }),
    async *stateChunks(_env, _prefix, h) {
      const empty = Buffer.alloc(0);
      yield { type: lattice.type, ctx: h.ctx, rangeStart: empty, rangeEnd: empty, rangeOpen: true, slice: undefined, encoded: h.body, keyDone: true };
    },
    readState: async (_env, _prefix, h) => lattice.decode(h.body),
    peekState(env, key, h) {
      const cached = env.decoded.peek(key, h.body) as S | undefined;
      if (cached !== undefined) return cached;
      const state = lattice.decode(h.body);
      env.decoded.put(key, h.body, state);
      return state;
    },
    verify: async (h) => opts.problems?.(lattice.decode(h.body)) ?? [],
  };
}
