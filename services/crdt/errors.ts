// Typed errors of the CRDT kernel. Callers map DecodeError to INVALID_ARGUMENT.

/** An encoded state or delta that is malformed or inconsistent. Nothing was changed. */
export class DecodeError extends Error {
  override readonly name = "DecodeError";
  constructor(message: string) {
    super(message);
  }
}

/** An object type with no registered implementation. */
export class UnknownTypeError extends Error {
  override readonly name = "UnknownTypeError";
  constructor(readonly type: number) {
    super(`object type ${type} has no implementation on this node`);
  }
}

/**
 * Two valid states of one key that cannot be joined: built with different parameters (filter
 * sizes, hash families). Nothing was changed. Gossip skips such a key (and counts it) instead of
 * refusing the whole frame; Merge answers FAILED_PRECONDITION.
 */
export class JoinConflictError extends Error {
  override readonly name: string = "JoinConflictError";
}
