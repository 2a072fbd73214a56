// A small seeded pseudo-random generator (splitmix32) for simulations and tests. The engine
// never draws randomness itself: it is handed a `() => number` like the ones made here.

/** A function returning uniform floats in [0, 1). */
export type Random = () => number;

/** A deterministic generator seeded by a 32-bit integer. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    return (z >>> 0) / 4294967296;
  };
}

/** A uniform integer in [0, n). */
export function randomInt(random: Random, n: number): number {
  return Math.floor(random() * n);
}

/** A uniformly chosen element of a non-empty array. */
export function pick<T>(random: Random, items: readonly T[]): T {
  if (items.length === 0) throw new RangeError("pick from an empty list");
  return items[randomInt(random, items.length)]!;
}

/** Fisher-Yates shuffle into a new array. */
export function shuffled<T>(random: Random, items: readonly T[]): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(random, i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
