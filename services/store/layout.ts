// How a replicated type lies in the store, behind one interface: the store's generic code (locks,
// write views, group commit, headers, transfers) calls these and nothing type-specific. Two
// layouts exist: one record for the whole state (whole-state-layout.ts: counters, and any small
// lattice), and bigset element records with a dot index (element-layout.ts: add-wins sets).
// Every layout joins with its lattice's own join (crdt/), applied to the part of the object the
// join touches, so the in-memory value, the store and chunked transfer share one join per type.
import type { AWSet, CausalContext, Lattice, ObjectType, SkewReport } from "../crdt/index.js";
import type { DecodedStates } from "./decoded-states.js";
import type { GroupCommit } from "./group-commit.js";
import type { PendingRemoves } from "./pending-removes.js";
import type { Header } from "./records.js";
import type { LiveDigest } from "./live-digest.js";
import type { StoreDb } from "./db.js";
import type { WriteView } from "./write-view.js";

/** One object being changed, under its key's lock: a working copy of its header and a write view. */
export interface ObjectSlot {
  readonly key: string;
  readonly prefix: Buffer;
  readonly h: Header;
  readonly view: WriteView;
}

/** What a layout may use of the store around it. */
export interface StoreEnv {
  readonly db: StoreDb;
  readonly commit: GroupCommit;
  readonly pending: PendingRemoves;
  /** Decoded states of the keys stored whole, by key (decoded-states.ts). */
  readonly decoded: DecodedStates;
  /** A whole state whose encoding reaches this many bytes is kept as a base and a log (whole-state-layout.ts). */
  readonly stateLogFromBytes: number;
  /** Deltas appended to state logs, and logs folded into a new base (whole-state-layout.ts). */
  readonly stateLogCounts: { appends: number; compactions: number };
  /** Above this many removed dots in one join, owners are found by scanning the object. */
  readonly removeLookupLimit: number;
  /** A join refused because its result would break the type's bounds (counters out of int64). */
  joinRefused(key: string, reason: string): void;
  /** The node's clock (ms since the epoch): what a received retry filter is compared with. */
  now(): number;
  /** B: how far apart the nodes' clocks are assumed to be at most (ms). */
  readonly clockSkewBoundMs: number;
  /** A received retry filter puts its sender's clock further than B from ours. */
  clockSkew(key: string, report: SkewReport): void;
}

export interface JoinResult<S> {
  changed: boolean;
  /** The part of the joined state that was new here (Δ(incoming, local)), for redundancy removal. */
  newPart: S;
  /** Set when the join was refused and nothing changed: why, in words (counters out of int64). */
  refused?: string;
  /**
   * A delta this node made during the join, already joined here: a remove of an add-wins set by
   * deferred removes whose covered adds just arrived (pending-removes.ts), or a probabilistic
   * set's refusal of dots its filter reports (AWSetProb.refusalOf). Spread it as a local delta of
   * that type: this node is its origin.
   */
  settled?: { type: ObjectType; delta: unknown };
  /** Whether what reads return of the key changed (left out: not known, taken as changed). */
  readChanged?: boolean;
}

/** One chunk of a key's full state, as read from the store for a transfer. */
export interface StateChunk {
  type: ObjectType;
  /** The key's context: on the first chunk of the key only. */
  ctx?: CausalContext;
  rangeStart: Buffer;
  rangeEnd: Buffer;
  rangeOpen: boolean;
  /** The state's part in the range (element layouts); undefined when encoded carries it. */
  slice: unknown;
  /**
   * The slice already encoded by its lattice, to be sent as is: one-record layouts hand out the
   * stored body, so a full-state transfer of a large filter neither decodes nor encodes it.
   */
  encoded?: Uint8Array;
  keyDone: boolean;
}

/** A received chunk, to be joined: its slice is already decoded against the sender's context. */
export interface ReceivedChunk<S> {
  senderCtx: CausalContext;
  rangeStart: Buffer;
  rangeEnd: Buffer;
  rangeOpen: boolean;
  slice: S;
}

export interface ObjectLayout<S> {
  readonly lattice: Lattice<S>;
  /** The header body of a new object. */
  emptyBody(): Uint8Array;
  /** Layouts of element records: the live digest of a new object (live-digest.ts), kept by WriteView.setDots. */
  emptyLive?(): LiveDigest;
  /** The part of the state a mutator naming these elements needs (the whole state for one-record types). */
  load(o: ObjectSlot, env: StoreEnv, elements: readonly Uint8Array[]): Promise<S>;
  /**
   * One-record layouts: store a state a client operation changed in place (crdt/operations.ts).
   * Element layouts have none: their operations are the store's own (mutations.ts).
   */
  write?(o: ObjectSlot, env: StoreEnv, state: S, change?: unknown): void;
  /** Join a state or delta into the object with the lattice's join; newPart only when asked. */
  join(o: ObjectSlot, env: StoreEnv, incoming: S, wantNewPart: boolean): Promise<JoinResult<S>>;
  /** Join one chunk of a sender's full state (gossip/chunk-order.ts explains the rule). */
  applyChunk(o: ObjectSlot, env: StoreEnv, chunk: ReceivedChunk<S>): Promise<JoinResult<S>>;
  /** After a key's last chunk: whatever the chunks could not join safely (the sender's context). */
  finishKey(o: ObjectSlot, env: StoreEnv, senderCtx: CausalContext): Promise<JoinResult<S>>;
  /** The key's full state in chunks within the limits (entries, and bytes of entries), from one snapshot. */
  stateChunks(env: StoreEnv, prefix: Buffer, h: Header, it: RecordIterator, limits: ChunkLimits): AsyncGenerator<StateChunk>;
  /** The whole state in memory, the caller's own. */
  readState(env: StoreEnv, prefix: Buffer, h: Header): Promise<S>;
  /**
   * One-record layouts: the state of header h when the cache of decoded states holds it
   * (decoded-states.ts), shared: the caller must not change it, nor keep it past its next await
   * (a writer may then change it in place). Undefined on a miss.
   */
  cachedState?(env: StoreEnv, key: string, h: Header): S | undefined;
  /**
   * One-record layouts: the state of header h, shared as cachedState's, read and cached on a miss.
   * A logged state (records.ts StateLog) must be read under the key's lock: a writer may fold
   * its log into a new base meanwhile.
   */
  sharedState?(env: StoreEnv, key: string, prefix: Buffer, h: Header): Promise<S>;
  /** Problems of the object's records, in words (empty when consistent). */
  verify(h: Header, records: AsyncIterable<[suffix: number, rest: Buffer, value: Buffer]>): Promise<string[]>;
}

/** The records after an object's header, from the snapshot its header was read in. */
/** Most entries of a state chunk, and most bytes of its entries (as awsetEntrySize counts them); a chunk holds at least one entry. */
export interface ChunkLimits {
  maxEntries: number;
  maxBytes: number;
}

export interface RecordIterator {
  next(): Promise<[Buffer, Buffer] | undefined>;
  nextv(n: number): Promise<Array<[Buffer, Buffer]>>;
}
