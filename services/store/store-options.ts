// The settings of a store (the node's --data-dir, --fsync and storage limits end up here).
import type { StoreDb } from "./db.js";
import type { SkewReport } from "../crdt/index.js";
import type { StoreWriteError } from "./errors.js";
import type { KeyTypeRules } from "./key-type-rules.js";

export type SyncPolicy = "fsync" | "buffered";

export interface StoreOptions {
  /** The data directory, or "memory" for an in-memory database (the gossip simulator). */
  dir: string;
  /** With dir "memory": a database a previous Store used (a simulated node restarting with its disk). */
  db?: StoreDb;
  /**
   * The id this store mints dots under; default: a new one (the node id and a random suffix)
   * drawn at every open, recorded before the first dot, so that a directory started from a copy (a
   * restored backup, a rolled-back volume, a copy beside its original) never mints dots its earlier
   * life already did. A caller that fixes it (a simulation, for determinism) must give a new one
   * at every open: an id the directory minted under before (including one it rotated away from)
   * mints its dots again.
   */
  replicaId?: string;
  /** Mint under the directory's recorded replica id (an offline reader such as verify). */
  keepReplicaId?: boolean;
  /** Required node id, or undefined to use the stored one (generated on first open). */
  nodeId?: string;
  /** Partitions of a new directory; "stored" opens an existing directory with its own. */
  partitions: number | "stored";
  partitionOf: (key: string, partitions: number) => number;
  /** fsync each group commit (default) or leave it to the OS (survives process crashes only). */
  sync?: SyncPolicy;
  /** Most operations folded into one group commit. */
  maxBatch?: number;
  /**
   * Records queued that start a group commit at once (default 256); fewer wait for the end of the
   * event loop's turn, so that the operations of a burst share one batch and one fsync.
   */
  batchStartRecords?: number;
  /**
   * Operations queued that start a group commit at once (default 16): a long burst's first batch
   * is written while the rest of it is processed.
   */
  batchStartOperations?: number;
  /** Types fixed by key prefix (--key-types): a key created as another type is refused, from a client or a peer. */
  keyTypes?: KeyTypeRules;
  /** Headers kept in memory. */
  headerCacheSize?: number;
  /**
   * Memory for the decoded states of keys stored whole kept between operations (decoded-states.ts),
   * as their layouts estimate it; default 256 MiB (a state larger than this is read back on every
   * operation).
   */
  stateCacheBytes?: number;
  /**
   * Memory for the presence filters of add-wins sets (element-presence.ts), which let an add of a
   * new element skip reading its record; default 64 MiB (about 1.25-2.5 bytes per element; 0: none).
   */
  presenceFilterBytes?: number;
  /**
   * A set with records and no presence filter gets one by a scan of its records once this many
   * element reads found no record (and at least a quarter of its size); default 1024.
   */
  presenceScanAfterReads?: number;
  /**
   * A whole state (of the types whose layout allows it: the filters) whose encoding reaches this
   * many bytes is kept as a base record and a log of deltas (whole-state-layout.ts); default 64 KiB.
   */
  stateLogFromBytes?: number;
  /** LevelDB write buffer (memtable) bytes; LevelDB's default 4 MiB when unset. */
  writeBufferBytes?: number;
  /** LevelDB block cache bytes; LevelDB's default 8 MiB when unset. */
  cacheBytes?: number;
  /** Told when Store.open upgraded an older on-disk format (objects converted, time taken). */
  onUpgrade?: (e: { objects: number; ms: number }) => void;
  /** Told before an upgrade starts (from which version), so a long one can be announced. */
  onUpgradeStart?: (e: { fromVersion: number; toVersion: number }) => void;
  /** false: refuse a directory of an older format instead of upgrading it (read-only tools). */
  upgrade?: boolean;
  /** Above this many removed dots in one delta, find them by scanning the object instead. */
  removeLookupLimit?: number;
  /** Most elements whose remove waits for adds not yet received here (pending-removes.ts). */
  maxPendingRemoves?: number;
  /** Most dots not yet received here that one Remove's context may name (pending-removes.ts). */
  maxRemoveUnseenDots?: number;
  /** Most replica ids of adds not received here one element's deferred remove may wait for (pending-removes.ts). */
  maxRemoveUnseenReplicas?: number;
  /** Most bytes of all deferred-remove records together (pending-removes.ts). */
  maxPendingRemoveBytes?: number;
  /** Told when a join was refused because its result would break the type's bounds (counters out of int64). */
  onCounterJoinRefused?: (e: { key: string; reason: string }) => void;
  /** The clock (default Date.now; simulations pass theirs): what received retry filters are compared with, and what adds with a time to live expire on. */
  clock?: () => number;
  /** B, the most the nodes' clocks are assumed to differ (ms); default 2000. */
  clockSkewBoundMs?: number;
  /**
   * Told once when a write to the database fails (StoreWriteError); every later write is refused.
   * What is in memory may then be ahead of the disk: the owner should stop and restart from disk.
   */
  onWriteFailure?: (err: StoreWriteError) => void;
  /** Told when a received retry filter puts its sender's clock further than B from ours. */
  onClockSkew?: (e: { key: string; report: SkewReport }) => void;
}
