// A dot names one event: (replica id, counter >= 1). Counters are JS numbers internally; the
// codecs refuse anything above Number.MAX_SAFE_INTEGER.

export interface Dot {
  readonly replica: string;
  readonly counter: number;
}

export function makeDot(replica: string, counter: number): Dot {
  return { replica, counter };
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
