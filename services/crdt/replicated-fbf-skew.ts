// Clock-skew reports for the replicated Forgetful Bloom Filter (replicated-fbf.ts): what a received
// insert delta's epochs say about the sender's clock relative to ours. The retention guarantee
// assumes clocks within B of each other; a node turns a report into a metric and a log line.
import { epochOf } from "./replicated-fbf-params.js";

export interface SkewReport {
  /** ahead: the sender's clock is later than ours; behind: earlier (or the delta was delayed). */
  direction: "ahead" | "behind";
  senderEpoch: number;
  localEpoch: number;
  /** The least skew (ms) consistent with the delta; more than boundMs. */
  minSkewMs: number;
}

/**
 * Compare a received delta's epochs with the local clock. An insert at the sender's time s puts
 * bits in epochs floor(s/P) and floor(s/P)+1, so the sender's present epoch is the highest epoch
 * minus one and s lies in [senderEpoch·P, (senderEpoch+1)·P). "ahead" is conclusive: the delta
 * cannot have been sent before now. "behind" is a lower bound that includes the delivery delay, so
 * it is meaningful only for fresh insert deltas (not for resends or full-state transfers).
 */
export function skewReport(epochs: Iterable<number>, now: number, periodMs: number, boundMs: number): SkewReport | null {
  let max = -Infinity;
  for (const e of epochs) if (e > max) max = e;
  if (max === -Infinity) return null;
  const senderEpoch = max - 1;
  const localEpoch = epochOf(now, periodMs);
  const ahead = senderEpoch * periodMs - now;
  if (ahead > boundMs) return { direction: "ahead", senderEpoch, localEpoch, minSkewMs: ahead };
  const behind = now - (senderEpoch + 1) * periodMs;
  if (behind > boundMs) return { direction: "behind", senderEpoch, localEpoch, minSkewMs: behind };
  return null;
}
