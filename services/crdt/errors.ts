// Typed errors of the CRDT kernel. Callers map DecodeError to INVALID_ARGUMENT.

/** An encoded state or delta that is malformed or inconsistent. Nothing was changed. */
export class DecodeError extends Error {
  override readonly name = "DecodeError";
  constructor(message: string) {
    super(message);
  }
}

/**
 * A replica has minted every counter it may on a key (Number.MAX_SAFE_INTEGER, the codecs' bound):
 * only a context from elsewhere (a Merge, a peer) can carry its counter that far. Nothing was
 * changed; the store mints under a fresh replica id instead (store-core.ts).
 */
export class DotSpaceExhaustedError extends Error {
  override readonly name = "DotSpaceExhaustedError";
  constructor(readonly replica: string) {
    super(`replica ${replica} has no counters left on this key (the largest is ${Number.MAX_SAFE_INTEGER})`);
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
/**
 * An AWSET_PROB Add found no fresh dot: its tombstone filter reports almost every id (a
 * whole-filter key's unions overfill its older slices as removes come). Nothing was added.
 */
export class TombstonesSaturatedError extends Error {
  override readonly name = "TombstonesSaturatedError";
  constructor(draws: number, estimatedFp: number) {
    super(
      `no fresh dot after ${draws} draws: this AWSET_PROB key's tombstone filter reports almost every id (estimated false-positive rate ${estimatedFp.toFixed(3)}); nothing was added. ` +
        "Its filter fills as removes come (a whole-filter key's unions overfill its older slices): use a key with a larger capacity or another union strategy",
    );
  }
}

export class JoinConflictError extends Error {
  override readonly name: string = "JoinConflictError";
}

/**
 * A received state (a Merge, a peer's gossip) whose parameters ask for more memory than this node
 * accepts: a filter larger than --max-filter-bytes. Refused before anything of that size is
 * allocated; nothing was changed. Merge answers RESOURCE_EXHAUSTED; gossip skips the key (counted).
 */
export class StateLimitError extends Error {
  override readonly name = "StateLimitError";
  constructor(
    readonly what: string,
    readonly bytes: number,
    readonly limit: number,
    setting = "--max-filter-bytes",
  ) {
    super(`${what} of ${bytes} bytes is larger than this node accepts (${limit} bytes; see ${setting})`);
  }
}

/** Refuse (StateLimitError) a decoded filter of `bytes` above `limit`; no limit: the node's own records. */
export function checkFilterBytes(what: string, bytes: number, limit: number | undefined, setting?: string): void {
  if (limit !== undefined && bytes > limit) throw new StateLimitError(what, bytes, limit, setting);
}
