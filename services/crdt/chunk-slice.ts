// The join rule of one chunk of an AWSET's full state (the chunked transfer described in
// gossip/chunk-order.ts; the store's element layout applies it): the context a chunk is joined
// with covers only the chunk's range, so a stream cut after any chunk never makes the receiver
// treat elements still in flight as removed.
import { CausalContext } from "./causal-context.js";
import type { DotSet } from "./dot-store.js";
import type { ElementKey } from "./awset.js";

/**
 * The context a chunk is joined with (by the store's element layout): the chunk's own dots, plus
 * the receiver's dots inside the chunk's range that the sender has seen. A receiver dot in it but
 * absent from the chunk is a sender removal; nothing outside the range is covered, so nothing
 * outside the range can be dropped.
 */
export function chunkSliceContext(chunkDots: Iterable<DotSet>, localInRange: Iterable<DotSet>, senderCtx: CausalContext): CausalContext {
  const ctx = new CausalContext();
  for (const dots of chunkDots) for (const d of dots) ctx.addDot(d);
  for (const dots of localInRange) for (const d of dots) if (senderCtx.containsDot(d)) ctx.addDot(d);
  return ctx;
}

/** The element range a chunk covers: (previous end, rangeEnd], or to the last element when open. */
export interface ChunkRange {
  /** Inclusive lower bound; undefined from the first element. */
  readonly rangeStart: ElementKey | undefined;
  /** Inclusive upper bound; undefined when the range is open. */
  readonly rangeEnd: ElementKey | undefined;
  /** The range extends to the last element. Exactly the last chunk of a key is open. */
  readonly rangeOpen: boolean;
}

/** The smallest element key above k: ranges are inclusive, so chunk i+1 starts here. */
export function successorKey(k: ElementKey): ElementKey {
  return k + "\u0000";
}

export function inChunkRange(range: ChunkRange, k: ElementKey): boolean {
  if (range.rangeStart !== undefined && k < range.rangeStart) return false;
  return range.rangeOpen || (range.rangeEnd !== undefined && k <= range.rangeEnd);
}
