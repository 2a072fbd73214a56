// gRPC errors with messages a person can act on, and the mapping from internal errors.
import { type ServiceError, status } from "@grpc/grpc-js";
import { Metadata } from "@grpc/grpc-js";
import { CounterRangeError, DecodeError, FilterFullError, FilterParamError, JoinConflictError, SeriesFullError, StateLimitError, TombstonesSaturatedError, UnknownTypeError } from "../crdt/index.js";
import { PendingRemovesFullError, UnmadeAddsError } from "../store/pending-removes.js";
import { StoreClosedError, StoreWriteError, TypeMismatchError } from "../store/store.js";

export class RpcError extends Error {
  constructor(
    readonly code: status,
    message: string,
  ) {
    super(message);
  }
}

export const invalid = (msg: string) => new RpcError(status.INVALID_ARGUMENT, msg);
export const tooLarge = (msg: string) => new RpcError(status.RESOURCE_EXHAUSTED, msg);
export const outOfRange = (msg: string) => new RpcError(status.OUT_OF_RANGE, msg);

/** Map any thrown error to a gRPC ServiceError; unexpected ones become INTERNAL (and are logged). */
export function toServiceError(err: unknown, onUnexpected: (e: unknown) => void): Partial<ServiceError> {
  const make = (code: status, details: string) => ({ code, details, metadata: new Metadata() });
  if (err instanceof RpcError) return make(err.code, err.message);
  if (err instanceof TypeMismatchError) return make(status.FAILED_PRECONDITION, err.message);
  if (err instanceof PendingRemovesFullError) return make(status.RESOURCE_EXHAUSTED, err.message);
  if (err instanceof UnmadeAddsError) return make(status.INVALID_ARGUMENT, err.message);
  if (err instanceof CounterRangeError) return make(status.OUT_OF_RANGE, err.message);
  // A cuckoo filter with no room: nothing was inserted (the message says what to do).
  if (err instanceof FilterFullError) return make(status.RESOURCE_EXHAUSTED, err.message);
  // A scalable series at its last sub-filter, full: nothing was added.
  if (err instanceof SeriesFullError) return make(status.RESOURCE_EXHAUSTED, err.message);
  if (err instanceof TombstonesSaturatedError) return make(status.RESOURCE_EXHAUSTED, err.message);
  if (err instanceof FilterParamError) return make(status.INVALID_ARGUMENT, `invalid filter parameters: ${err.message}`);
  // A merged filter built with other parameters than the key's: it cannot be joined.
  if (err instanceof JoinConflictError) return make(status.FAILED_PRECONDITION, `${err.message}; nothing was changed`);
  if (err instanceof DecodeError) return make(status.INVALID_ARGUMENT, `invalid state: ${err.message}`);
  // A received state whose filter is above --max-filter-bytes: refused before it was allocated.
  if (err instanceof StateLimitError) return make(status.RESOURCE_EXHAUSTED, `${err.message}; nothing was changed`);
  if (err instanceof UnknownTypeError) return make(status.INVALID_ARGUMENT, err.message);
  if (err instanceof StoreClosedError) return make(status.UNAVAILABLE, "node is shutting down; retry on another node");
  // The node stops and restarts from disk; the write may or may not have been applied (a retry is safe).
  if (err instanceof StoreWriteError) return make(status.UNAVAILABLE, `${err.message}: the node is restarting; retry on another node (this write may or may not have been applied)`);
  // LevelDB read a block whose checksum or contents are wrong (a damaged disk or file).
  if ((err as { code?: unknown } | null)?.code === "LEVEL_CORRUPTION") {
    onUnexpected(err);
    return make(status.DATA_LOSS, "the node's store is corrupt where this key is kept: check it with `deltaset verify` once the node is stopped, or replace its data directory (a node back with an empty one receives everything again)");
  }
  onUnexpected(err);
  return make(status.INTERNAL, "internal error; see the node's log");
}
