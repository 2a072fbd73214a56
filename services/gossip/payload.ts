// What the anti-entropy engine needs to know about a partition payload (a delta-group or a
// state of many keys). The engine is generic over the payload type; it never looks inside.

export interface PayloadOps<P> {
  /** The empty payload ⊥. */
  bottom(): P;
  /** Pure join: returns a new payload and never mutates a or b (callers may still hold them). */
  join(a: P, b: P): P;
  /**
   * Optional fast path for joining many payloads at once (same contract as folding join:
   * inputs untouched). The engine uses it to build delta-intervals from its buffer.
   */
  joinAll?(ps: readonly P[]): P;
  isBottom(p: P): boolean;
  /** Encoded size in bytes, for buffer limits and metrics. */
  sizeBytes(p: P): number;
}

/** Join a list of payloads with the ops' fast path when there is one. */
export function joinPayloads<P>(ops: PayloadOps<P>, ps: readonly P[]): P {
  if (ps.length === 0) return ops.bottom();
  if (ps.length === 1) return ps[0]!;
  if (ops.joinAll !== undefined) return ops.joinAll(ps);
  let acc: P = ps[0]!;
  for (let i = 1; i < ps.length; i++) acc = ops.join(acc, ps[i]!);
  return acc;
}
