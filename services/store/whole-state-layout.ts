// The one-record layout: the whole state of a key, encoded by its lattice, in the body of the
// key's header. Fits any lattice, and needs nothing but the lattice: join, difference, codec. A
// state travels in one chunk. The decoded state of a key stays in memory between operations
// (decoded-states.ts), so an operation decodes nothing.
//
// A large state is not rewritten on every change (with opts.log, for lattices whose join of an
// operation's delta gives the state the operation left, up to what equality ignores: the filters;
// or whose operations say which deltas they joined in turn, opts.logSteps: AWSET_PROB).
// Once its encoding reaches env.stateLogFromBytes, it moves to a base record and each change
// appends the change's delta as a record of its own (records.ts StateLog): an Add to an ORCF of
// 2^19 entries writes some tens of bytes, not 3.7 MB. The state is the base joined with the deltas
// in order. When the deltas outgrow an eighth of the base, the state is written as the new base
// and the deltas deleted, in the same batch; reading a state back joins at most that much.
import type { CausalContext, Lattice, ObjectType } from "../crdt/index.js";
import type { BatchOp } from "./group-commit.js";
import type { ObjectLayout, ObjectSlot, StateChunk, StoreEnv } from "./layout.js";
import { stateBaseKey, stateDeltaKey } from "./keys.js";
import { type Header, type StateLog, stateBytesOf } from "./records.js";
import { type RetryIdsOf, receiveRetryIds } from "./received-retry-ids.js";

export interface WholeStateOptions<S> {
  /**
   * Bounds the lattice does not have but every reader needs (a counter must fit int64): problems of
   * a state, in words. A join that would take a state without problems to one with problems is
   * refused, nothing changes, and the refusal is reported; the state stays readable everywhere.
   */
  problems?: (s: S) => string[];
  /** Keep a large state as a base and a log of deltas (see above). */
  log?: boolean;
  /**
   * The joins an operation's delta stands for, in the order they were made (default: the delta
   * itself): what the log records of a local operation, for a lattice whose batch joins several.
   */
  logSteps?: (delta: S) => readonly S[];
  /**
   * Deltas whose replay costs about as much as a walk of the whole state (default: none): a log
   * holds at most COSTLY_DELTAS of them, so a read after a restart replays at most that many walks.
   */
  costly?: (delta: S) => boolean;
  /**
   * A delta this replica answers a received state with (joined here after it, spread as this
   * node's own change): AWSET_PROB's refusal of dots its filter reports (AWSetProb.refusalOf).
   */
  reply?: (state: S, incoming: S) => S | undefined;
  /**
   * A reading of a state that moves whenever what reads return of it changes (JoinResult.readChanged;
   * left out: not reported).
   */
  readVersion?: (state: S) => number;
  /**
   * Where the state keeps the retry filter of its request ids (counters, filter keys): a received
   * state's filter is pruned to this node's window and checked for clock skew (received-retry-ids.ts).
   */
  retryIds?: RetryIdsOf<S>;
  /**
   * Bytes a decoded state takes in memory per byte of its encoding, at most (what the cache of
   * decoded states counts); default 10. Measured on 2^18-2^19 elements: a bloom filter 1, a
   * cuckoo filter's buckets of numbers 34, an ORCF's entries with their tag index 35.
   */
  memoryPerEncodedByte?: number;
}

/** The deltas are folded into a new base when they outgrow base / COMPACT_SHARE. */
const COMPACT_SHARE = 8;
/**
 * At most this many costly deltas (WholeStateOptions.costly) in a log. An AWSET_PROB join of an
 * unlisted state with tombstones walks every live dot on replay (about 5 ms at 50k elements), the
 * base decodes in 50 ms.
 */
const COSTLY_DELTAS = 8;

/** The one chunk a state stored whole travels in: its encoding, sent as is. */
export function wholeStateChunk(type: ObjectType, ctx: CausalContext, encoded: Uint8Array): StateChunk {
  const empty = Buffer.alloc(0);
  return { type, ctx, rangeStart: empty, rangeEnd: empty, rangeOpen: true, keyDone: true, slice: undefined, encoded };
}

/** What identifies one version of a key's state: the body, or the log that replaces it. */
const stateVersion = (h: Header): object => h.log ?? h.body;

export function wholeStateLayout<S>(lattice: Lattice<S>, opts: WholeStateOptions<S> = {}): ObjectLayout<S> {
  /**
   * The costly deltas a log holds, by log version (a StateLog is a new object at every change),
   * known for logs written or replayed by this process; unknown after a restart until a replay.
   */
  const costlyIn = new WeakMap<StateLog, number>();
  const costlyCount = (deltas: readonly S[]): number => (opts.costly === undefined ? 0 : deltas.filter(opts.costly).length);
  /** The memory the cache of decoded states counts for the state of h. */
  const stateBytes = (h: Header): number => stateBytesOf(h) * (opts.memoryPerEncodedByte ?? 10);
  /** The state header h describes, read through reads (they must see the snapshot or overlay h belongs to). */
  async function decodeStored(prefix: Buffer, h: Header, read: (keys: Buffer[]) => Promise<Array<Buffer | undefined>>): Promise<S> {
    if (h.log === undefined) return lattice.decode(h.body);
    const keys = [stateBaseKey(prefix)];
    for (let seq = h.log.first; seq < h.log.next; seq++) keys.push(stateDeltaKey(prefix, seq));
    const values = await read(keys);
    const missing = values.findIndex((v) => v === undefined);
    if (missing >= 0) throw new Error(`${lattice.name} state record ${missing === 0 ? "base" : `delta ${h.log.first + missing - 1}`} is missing`);
    const state = lattice.decode(values[0]!);
    let costly = 0;
    for (let i = 1; i < values.length; i++) {
      const delta = lattice.decode(values[i]!);
      if (opts.costly?.(delta)) costly++;
      lattice.joinInPlace(state, delta);
    }
    costlyIn.set(h.log, costly);
    return state;
  }

  /** The key's state for a writer to change in place: out of the cache, or read. */
  const take = async (o: ObjectSlot, env: StoreEnv): Promise<S> =>
    (env.decoded.take(o.key, stateVersion(o.h)) as S | undefined) ?? decodeStored(o.prefix, o.h, (keys) => env.commit.getMany(keys));

  /** A new base: the whole state, replacing the deltas so far (deleted in the same batch). */
  function writeBase(o: ObjectSlot, encoded: Uint8Array, records: BatchOp[]): StateLog {
    const log = o.h.log;
    if (log !== undefined) for (let seq = log.first; seq < log.next; seq++) records.push({ type: "del", key: stateDeltaKey(o.prefix, seq) });
    records.push({ type: "put", key: stateBaseKey(o.prefix), value: Buffer.from(encoded) });
    const next = log?.next ?? 0;
    const base: StateLog = { first: next, next, logBytes: 0, baseBytes: encoded.length };
    costlyIn.set(base, 0);
    return base;
  }

  /**
   * Store the state a change left (an operation's result, or a join's). joined: what was joined
   * into the state before, in order (the operation's delta or its steps, the received state),
   * which the log may record instead of the whole state.
   */
  function store(o: ObjectSlot, env: StoreEnv, state: S, joined?: readonly S[]): void {
    const records = o.view.otherRecords;
    const log = o.h.log;
    if (log !== undefined && joined !== undefined) {
      const deltas = joined.map((d) => lattice.encode(d));
      let bytes = 0;
      for (const d of deltas) bytes += d.length;
      // A log this process has not counted is taken as full: its next costly delta folds it.
      const costlyAfter = (costlyIn.get(log) ?? COSTLY_DELTAS) + costlyCount(joined);
      if ((log.logBytes + bytes) * COMPACT_SHARE <= Math.max(log.baseBytes, env.stateLogFromBytes) && costlyAfter <= COSTLY_DELTAS) {
        let next = log.next;
        for (const d of deltas) records.push({ type: "put", key: stateDeltaKey(o.prefix, next++), value: Buffer.from(d) });
        o.h.log = { ...log, next, logBytes: log.logBytes + bytes };
        costlyIn.set(o.h.log, costlyAfter);
        env.stateLogCounts.appends += deltas.length;
      } else {
        o.h.log = writeBase(o, lattice.encode(state), records);
        env.stateLogCounts.compactions++;
      }
    } else {
      const encoded = lattice.encode(state);
      if (log !== undefined || (opts.log === true && encoded.length >= env.stateLogFromBytes)) {
        if (log !== undefined) env.stateLogCounts.compactions++;
        o.h.log = writeBase(o, encoded, records);
        o.h.body = new Uint8Array(0);
      } else {
        o.h.body = encoded;
      }
    }
    o.h.ctx = lattice.context(state).clone();
    env.decoded.put(o.key, stateVersion(o.h), state, stateBytes(o.h));
  }

  const join: ObjectLayout<S>["join"] = async (o, env, received, wantNewPart) => {
    const state = await take(o, env);
    const retry = opts.retryIds === undefined ? undefined : receiveRetryIds(opts.retryIds, env, o.key, state, received);
    const incoming = retry?.incoming ?? received;
    if (opts.problems !== undefined) {
      const problems = opts.problems(lattice.join(state, incoming));
      if (problems.length > 0 && opts.problems(state).length === 0) {
        const reason = `joining this state into ${lattice.name.toLowerCase()} "${o.key}" would make it unreadable: ${problems.join("; ")}`;
        env.joinRefused(o.key, reason);
        env.decoded.put(o.key, stateVersion(o.h), state, stateBytes(o.h));
        return { changed: false, newPart: lattice.bottom(), refused: reason };
      }
    }
    // Asked of the state before the join: what it refuses of incoming.
    const reply = opts.reply?.(state, incoming);
    const readBefore = opts.readVersion?.(state);
    let changed: boolean;
    let newPart: S;
    if (wantNewPart && lattice.joinInPlaceWithNewPart !== undefined) ({ changed, newPart } = lattice.joinInPlaceWithNewPart(state, incoming));
    else {
      newPart = wantNewPart ? lattice.difference(incoming, state) : lattice.bottom();
      changed = lattice.joinInPlace(state, incoming);
    }
    // A local change made after the join (as an operation's delta would be), logged after it.
    const replied = reply !== undefined && lattice.joinInPlace(state, reply);
    if (changed) retry?.joined();
    if (changed || replied) store(o, env, state, replied ? [incoming, reply] : [incoming]);
    else env.decoded.put(o.key, stateVersion(o.h), state, stateBytes(o.h));
    const read = readBefore === undefined ? {} : { readChanged: opts.readVersion!(state) !== readBefore };
    return reply === undefined ? { changed, newPart, ...read } : { changed, newPart, settled: { type: lattice.type, delta: reply }, ...read };
  };

  /** The state of h, shared with the cache (the caller holds the key's lock on a miss of a logged state). */
  async function sharedState(env: StoreEnv, key: string, prefix: Buffer, h: Header): Promise<S> {
    // Not counted: Store.wholeState counted its lock-free look (cachedState) already.
    const cached = env.decoded.peek(key, stateVersion(h), false) as S | undefined;
    if (cached !== undefined) return cached;
    const state = await decodeStored(prefix, h, (keys) => env.commit.getMany(keys));
    env.decoded.put(key, stateVersion(h), state, stateBytes(h));
    return state;
  }

  return {
    lattice,
    emptyBody: () => lattice.encode(lattice.bottom()),
    load: (o, env) => take(o, env),
    write: (o, env, state, delta) => store(o, env, state, delta === undefined ? undefined : (opts.logSteps?.(delta as S) ?? [delta as S])),
    join,
    applyChunk: (o, env, chunk) => join(o, env, chunk.slice, true),
    finishKey: async () => ({ changed: false, newPart: lattice.bottom() }),
    async *stateChunks(_env, _prefix, h) {
      // A logged state's records lie outside the snapshot handed here: Store.stateChunks reads it
      // under the key's lock instead (sharedState).
      if (h.log !== undefined) throw new Error(`${lattice.name} state in a log: read it with sharedState under the key's lock`);
      yield wholeStateChunk(lattice.type, h.ctx, h.body);
    },
    readState: (env, prefix, h) => decodeStored(prefix, h, (keys) => env.commit.getMany(keys)),
    cachedState: (env, key, h) => env.decoded.peek(key, stateVersion(h)) as S | undefined,
    sharedState,
    async verify(h, records) {
      let state: S;
      try {
        const found = new Map<string, Buffer>();
        // The records after the header: a logged state's base (0x04 0x00) and deltas (0x04 0x01 seq).
        for await (const [suffix, rest, value] of records) found.set(Buffer.concat([Buffer.from([suffix]), rest]).toString("latin1"), value);
        // With an empty prefix the record keys decodeStored asks for are exactly suffix + rest.
        state = await decodeStored(Buffer.alloc(0), h, async (keys) => keys.map((k) => found.get(k.toString("latin1"))));
      } catch (err) {
        return [`${lattice.name} state does not read back: ${(err as Error).message}`];
      }
      return opts.problems?.(state) ?? [];
    },
  };
}
