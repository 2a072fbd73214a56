// A small seeded 64-bit generator (SplitMix64, Steele, Lea and Flood 2014, written from its
// published description) for tests that need reproducible random dots and probes. The CRDT code
// never draws randomness itself; tests pass these values in.
const MASK = (1n << 64n) - 1n;

export class SplitMix64 {
  private state: bigint;

  constructor(seed: number | bigint) {
    this.state = BigInt(seed) & MASK;
  }

  /** The next 64-bit value, as an unsigned bigint. */
  next(): bigint {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
    return z ^ (z >> 31n);
  }

  /** The next value as 8 little-endian bytes. */
  nextBytes(): Uint8Array {
    const out = new Uint8Array(8);
    new DataView(out.buffer).setBigUint64(0, this.next(), true);
    return out;
  }

  /** A float in [0, 1). */
  float(): number {
    return Number(this.next() >> 11n) / 2 ** 53;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }
}
