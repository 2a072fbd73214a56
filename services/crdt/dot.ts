// A dot names one event: (replica id, counter >= 1). Counters are JS numbers internally; the
// codecs refuse anything above Number.MAX_SAFE_INTEGER.
import { DotSpaceExhaustedError } from "./errors.js";

export interface Dot {
  readonly replica: string;
  readonly counter: number;
  /**
   * When this replica's copy of an add with a time to live expires (ms on the local clock). It is
   * metadata of the copy, not part of the dot's identity: sameDot and the joins ignore it, and a
   * copy keeps the expiry it arrived with. Absent: the add does not expire.
   */
  readonly expiresAt?: number;
}

export function makeDot(replica: string, counter: number): Dot {
  return { replica, counter };
}

/**
 * The first of n counters a replica mints after its highest, max: DotSpaceExhaustedError when the
 * last would pass Number.MAX_SAFE_INTEGER (past it, counters lose precision: two adds would share a dot).
 */
export function mintCounters(replica: string, max: number, n = 1): number {
  if (max + n > Number.MAX_SAFE_INTEGER) throw new DotSpaceExhaustedError(replica);
  return max + 1;
}

/** A string that identifies the dot, for maps and sets. */
export function dotKey(d: Dot): string {
  return `${d.counter}@${d.replica}`;
}

export function sameDot(a: Dot, b: Dot): boolean {
  return a.counter === b.counter && a.replica === b.replica;
}

/** Total order: by replica id, then counter. */
export function compareDots(a: Dot, b: Dot): number {
  if (a.replica !== b.replica) return a.replica < b.replica ? -1 : 1;
  return a.counter - b.counter;
}
