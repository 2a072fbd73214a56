// The store's typed errors: callers (the replica service, gossip, the CLI) tell them apart by
// class, never by message text.
import { ObjectType } from "../crdt/index.js";

export class StoreOpenError extends Error {
  override readonly name = "StoreOpenError";
}

/** An operation came after close() (the node is shutting down). */
export class StoreClosedError extends Error {
  override readonly name = "StoreClosedError";
  constructor() {
    super("store is closed");
  }
}

/**
 * A write to the database failed (disk full, an I/O error, a failed fsync). Once one fails the
 * store takes no further writes: after a failed fsync what the OS holds of the log is not known,
 * and the only safe state is what a restart recovers from disk (the owner is told once, by
 * StoreOptions.onWriteFailure, and a node stops). Whether the writes of the failed batch were
 * applied is not known either: they may show up after the restart.
 */
export class StoreWriteError extends Error {
  override readonly name = "StoreWriteError";
  constructor(cause: Error) {
    super(`the node's storage failed to write (${cause.message.replace(/\s+/g, " ").slice(0, 200)})`, { cause });
  }
}

/** The key holds another type than the operation needs. */
export class TypeMismatchError extends Error {
  override readonly name = "TypeMismatchError";
  constructor(
    readonly key: string,
    readonly existing: ObjectType,
    readonly requested: ObjectType,
    /** When the key does not exist yet: the --key-types rule that gives it `existing`. */
    readonly rule?: string,
  ) {
    super(
      rule === undefined
        ? `key "${key}" is of type ${ObjectType[existing] ?? existing}, not ${ObjectType[requested] ?? requested}; use another key or the matching operation`
        : `key "${key}" is of type ${ObjectType[existing] ?? existing} by the node's key type rule "${rule}" (--key-types), not ${ObjectType[requested] ?? requested}; use another key or the matching operation`,
    );
  }
}

/** The key's type has no stored form (not registered in layouts.ts). */
export class UnstorableTypeError extends Error {
  override readonly name = "UnstorableTypeError";
  constructor(readonly type: ObjectType) {
    super(`type ${ObjectType[type] ?? type} cannot be stored by this node`);
  }
}
