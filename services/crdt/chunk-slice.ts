// The join rule of one chunk of an AWSET's full state (the chunked transfer of gossip/chunking.ts,
// applied by the in-memory model there and by the LevelDB store alike): the context a chunk is
// joined with covers only the chunk's range, so a stream cut after any chunk never makes the
// receiver treat elements still in flight as removed.
import { CausalContext } from "./causal-context.js";
import type { DotSet } from "./dot-store.js";

/**
 * The context a chunk is joined with (by gossip/chunking.ts and by the LevelDB store): the chunk's own dots, plus
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
