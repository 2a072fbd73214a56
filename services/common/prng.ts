// One seeded pseudo-random source (mulberry32) for everything that must be reproducible: the
// gossip engine's and the membership core's choices, their simulators, chaos plans and tests.
// The pure parts never draw randomness themselves; they are handed a Random made here (or
// Math.random in production). Statistical quality is plenty for picking peers; not for secrets.

/** Uniform floats in [0, 1). */
export type Random = () => number;

/** A deterministic generator seeded by a 32-bit integer. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A uniform integer in [0, n). */
export function randomInt(random: Random, n: number): number {
  return Math.min(n - 1, Math.floor(random() * n));
}

/** A uniformly chosen element of a non-empty array. */
export function pick<T>(random: Random, items: readonly T[]): T {
  if (items.length === 0) throw new RangeError("pick from an empty list");
  return items[randomInt(random, items.length)]!;
}

/** Fisher-Yates shuffle in place; returns the array. */
export function shuffleInPlace<T>(items: T[], random: Random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = randomInt(random, i + 1);
    const tmp = items[i]!;
    items[i] = items[j]!;
    items[j] = tmp;
  }
  return items;
}

/** A shuffled copy. */
export function shuffled<T>(random: Random, items: readonly T[]): T[] {
  return shuffleInPlace(items.slice(), random);
}

/** Up to k distinct items chosen uniformly from the list (the list is not modified). */
export function sample<T>(items: readonly T[], k: number, random: Random): T[] {
  const copy = items.slice();
  const n = Math.min(k, copy.length);
  for (let i = 0; i < n; i++) {
    const j = i + randomInt(random, copy.length - i);
    const tmp = copy[i]!;
    copy[i] = copy[j]!;
    copy[j] = tmp;
  }
  return copy.slice(0, n);
}
