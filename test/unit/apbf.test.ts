// Unit tests of the Age-Partitioned Bloom Filter: parameters and byte sizes against seed 000,
// insert/query/shift behaviour, the measured false-positive rate against the estimate, the codec
// and the refusal of mismatched unions.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Apbf, ApbfMismatchError, UnionStrategy } from "../../services/crdt/apbf.js";
import { apbfByteSize, generationSize, paramsFor, sliceBits, tableKL } from "../../services/crdt/apbf-params.js";
import { designFp, runProbability } from "../../services/crdt/apbf-fp.js";
import { APBF_DENSE_VERSION, APBF_SPARSE_VERSION, HEADER_BYTES, apbfEncodedSize, apbfStateEncodedSize, decodeApbf, encodeApbf } from "../../services/crdt/apbf-codec.js";
import { union, unionInPlace } from "../../services/crdt/apbf-union.js";
import { HASH_FAMILY } from "../../services/crdt/element-hash.js";
import { DecodeError, StateLimitError } from "../../services/crdt/errors.js";
import { SplitMix64 } from "../helpers/splitmix64.js";

const { WholeFilter, ActiveSlices, CurrentGeneration } = UnionStrategy;
const STRATEGIES = [WholeFilter, ActiveSlices, CurrentGeneration] as const;

describe("APBF parameters and sizes", () => {
  it("builds (k, l, m) from (error, capacity, level) by the seed's table and m rule", () => {
    // Seed 000 digest 4.4, memory table: (12, 88, 806 → 832), (15, 74, 1198 → 1216), (22, 95, 1369 → 1408).
    assert.deepEqual(paramsFor(2, 4096, 5, CurrentGeneration), { k: 12, l: 88, m: 832, strategy: CurrentGeneration });
    assert.deepEqual(paramsFor(3, 4096, 5, ActiveSlices), { k: 15, l: 74, m: 1216, strategy: ActiveSlices });
    assert.deepEqual(paramsFor(5, 4096, 5, WholeFilter), { k: 22, l: 95, m: 1408, strategy: WholeFilter });
    assert.equal(sliceBits(12, 88, 2048), 448);
    assert.deepEqual(tableKL(1, 0), { k: 4, l: 3 });
    assert.throws(() => tableKL(1, 5), RangeError, "level 5 does not exist for error 1");
    assert.throws(() => tableKL(6, 0), RangeError);
    assert.throws(() => paramsFor(2, 0, 5, ActiveSlices), RangeError);
    assert.throws(() => Apbf.create({ k: 3, l: 4, m: 100, strategy: ActiveSlices }), RangeError, "m not a multiple of 64");
    assert.throws(() => Apbf.create({ k: 200, l: 100, m: 64, strategy: ActiveSlices }), RangeError, "k + l > 256");
  });

  it("counts bytes exactly as the seed reports: 11,648 B with shadows, 13,528 B and 20,592 B without", () => {
    // Seed 000 §5.3.2 (digest 6.3): error 2 / capacity 4096 / level 5 with Current Generation's
    // duplicate active slices = 11,648 B; error 3 and error 5 without them = 13,528 B and 20,592 B.
    const cg2 = Apbf.fromConfig(2, 4096, 5, CurrentGeneration);
    assert.equal(cg2.byteSize(), 11_648);
    for (const s of [WholeFilter, ActiveSlices] as const) {
      assert.equal(Apbf.fromConfig(3, 4096, 5, s).byteSize(), 13_528);
      assert.equal(Apbf.fromConfig(5, 4096, 5, s).byteSize(), 20_592);
    }
    // Digest 6.2 [derived]: capacity 2048 with shadows is 6,272 B (the Fig 5.1 line).
    assert.equal(apbfByteSize(paramsFor(2, 2048, 5, CurrentGeneration)), 6_272);
    // The byte count is the arrays the filter really allocates.
    assert.equal(cg2.bits.length + cg2.shadows.length, 11_648);
  });

  it("encodes a filled filter densely: the byte size plus a 16-byte header and one hash-index byte per slice", () => {
    const cases: [number, UnionStrategy, number][] = [
      [2, CurrentGeneration, 11_648],
      [3, ActiveSlices, 13_528],
      [5, WholeFilter, 20_592],
    ];
    for (const [error, s, bytes] of cases) {
      const f = Apbf.fromConfig(error, 4096, 5, s);
      const rng = new SplitMix64(error);
      for (let i = 0; i < 4096 * 3; i++) f.insert(rng.nextBytes());
      const encoded = encodeApbf(f);
      assert.equal(encoded[0], APBF_DENSE_VERSION);
      assert.equal(encoded.length, bytes + HEADER_BYTES + f.k + f.l);
      assert.equal(encoded.length, apbfEncodedSize(f.params));
      assert.equal(encoded.length, apbfStateEncodedSize(f));
    }
  });

  it("encodes a sparse filter (a delta of a few removes) as its set bits' gaps, far below the dense size", () => {
    const empty = Apbf.fromConfig(2, 4096, 5, CurrentGeneration);
    // Header, hash indices, and two zero counts (slices, shadows).
    assert.equal(encodeApbf(empty).length, HEADER_BYTES + empty.n + 8);
    const f = Apbf.fromConfig(2, 4096, 5, CurrentGeneration);
    const rng = new SplitMix64(7);
    for (let i = 0; i < 3; i++) f.insert(rng.nextBytes());
    const encoded = encodeApbf(f);
    assert.equal(encoded[0], APBF_SPARSE_VERSION);
    assert.equal(encoded.length, apbfStateEncodedSize(f));
    // 3 inserts set at most 3·k bits in the slices and 3·k in the shadows: at most 3 varint bytes each.
    assert.ok(encoded.length <= HEADER_BYTES + f.n + 8 + 2 * 3 * f.k * 3, `${encoded.length} bytes`);
    assert.ok(encoded.length < 400, `${encoded.length} bytes against 11,764 dense`);
    assert.ok(decodeApbf(encoded).equals(f));
  });

  it("chooses the shorter form at every fill, and both forms decode to the same filter", () => {
    for (const s of STRATEGIES) {
      const f = Apbf.create({ k: 4, l: 6, m: 128, strategy: s });
      const rng = new SplitMix64(11);
      for (let i = 0; i < 120; i++) {
        const encoded = encodeApbf(f);
        assert.ok(encoded.length <= apbfEncodedSize(f.params), `strategy ${s}, ${i} inserts`);
        assert.ok(decodeApbf(encoded).equals(f), `strategy ${s}, ${i} inserts`);
        f.insert(rng.nextBytes());
      }
    }
  });

  it("reproduces the digest's design FP for (12, 88) and keeps every table row near its target", () => {
    // Digest 4.4 [derived]: k=12, l=88 gives 9.98e-3 under the Eq. 4 fill ratios.
    assert.ok(Math.abs(designFp(12, 88) - 9.98e-3) < 5e-6, `designFp(12, 88) = ${designFp(12, 88)}`);
    for (let error = 1; error <= 5; error++) {
      for (let level = 0; level <= 5; level++) {
        if (error === 1 && level === 5) continue;
        const { k, l } = tableKL(error, level);
        const ratio = designFp(k, l) / 10 ** -error;
        // Computed: 0.92 (error 3 level 1) to 1.21 (error 3 level 0).
        assert.ok(ratio > 0.9 && ratio < 1.25, `error ${error} level ${level}: ${ratio}`);
      }
    }
  });

  it("computes the run probability exactly (checked against enumeration)", () => {
    const rng = new SplitMix64(7);
    for (let trial = 0; trial < 20; trial++) {
      const n = 2 + rng.int(9);
      const k = 1 + rng.int(n);
      const r = Array.from({ length: n }, () => rng.float());
      let brute = 0;
      for (let mask = 0; mask < 1 << n; mask++) {
        let p = 1;
        let run = 0;
        let hit = false;
        for (let i = 0; i < n; i++) {
          const one = (mask >> i) & 1;
          p *= one ? r[i]! : 1 - r[i]!;
          run = one ? run + 1 : 0;
          if (run >= k) hit = true;
        }
        if (hit) brute += p;
      }
      assert.ok(Math.abs(runProbability(r, k) - brute) < 1e-12, `n=${n} k=${k}`);
    }
  });
});

describe("APBF insert, query and shift", () => {
  it("shifts every g insertions, keeps a generation through l shifts and forgets it after", () => {
    for (const s of STRATEGIES) {
      const f = Apbf.create({ k: 3, l: 4, m: 512, strategy: s });
      assert.equal(f.g, generationSize(f.params));
      assert.equal(f.g, 118); // ⌊512·ln2/3⌋
      const rng = new SplitMix64(11 + s);
      // One generation of items, inserted right after a shift (count 0).
      const gen = Array.from({ length: f.g }, () => rng.nextBytes());
      for (const x of gen) f.insert(x);
      assert.equal(f.count, 0, "the generation filled and shifted");
      // l - 1 more generations and all but one insertion: still l shifts, the generation sits at
      // logical l..l+k-1, the last window a query looks at.
      for (let i = 0; i < f.l * f.g - 1; i++) f.insert(rng.nextBytes());
      for (const x of gen) assert.ok(f.query(x), `strategy ${s}: no false negative inside the window`);
      // The (l+1)-th shift drops its oldest slice: an item survives only if an unrelated bit in the
      // neighbouring slice fills the gap (the slack), so some must go.
      f.insert(rng.nextBytes());
      assert.ok(gen.filter((x) => f.query(x)).length < gen.length, `strategy ${s}: nothing forgotten`);
      // k - 1 shifts later every slice the generation used is gone: it is reported only as often
      // as a never-inserted item would be.
      for (let i = 0; i < (f.k - 1) * f.g; i++) f.insert(rng.nextBytes());
      const still = gen.filter((x) => f.query(x)).length / gen.length;
      const fp = f.estimatedFp();
      const bound = fp + 4 * Math.sqrt((fp * (1 - fp)) / gen.length);
      assert.ok(still <= bound, `strategy ${s}: ${still} of the forgotten generation reported, FP bound ${bound}`);
    }
  });

  it("keeps the last `capacity` insertions findable at every point (window l·g >= capacity)", () => {
    const f = Apbf.fromConfig(2, 4096, 5, CurrentGeneration);
    assert.ok(f.l * f.g >= 4096);
    const rng = new SplitMix64(3);
    const recent: Uint8Array[] = [];
    for (let i = 0; i < 3 * 4224 + 17; i++) {
      const x = rng.nextBytes();
      f.insert(x);
      recent.push(x);
      if (recent.length > 4096) recent.shift();
      if (i % 2113 === 0 || i === 3 * 4224 + 16) {
        for (const y of recent) assert.ok(f.query(y));
      }
    }
  });

  it("retires slices at about half full, the fill the FP design assumes", () => {
    const f = Apbf.fromConfig(2, 4096, 5, ActiveSlices);
    const rng = new SplitMix64(5);
    for (let i = 0; i < (f.k + f.l + 1) * f.g; i++) f.insert(rng.nextBytes());
    const older = f.fillRatios().slice(f.k);
    const mean = older.reduce((a, b) => a + b, 0) / older.length;
    // Expected 1 - (1-1/m)^(k·g) = 0.4995 for m=832, g=48.
    assert.ok(Math.abs(mean - 0.4995) < 0.01, `mean retired fill ${mean}`);
    assert.ok(Math.max(...older) < 0.56, `fullest retired slice ${Math.max(...older)}`);
  });

  it("clears the shadows and the count on a shift, and keeps shadow 0 equal to slice 0", () => {
    const f = Apbf.create({ k: 4, l: 4, m: 128, strategy: CurrentGeneration });
    const rng = new SplitMix64(9);
    for (let i = 0; i < 5; i++) f.insert(rng.nextBytes());
    assert.equal(f.count, 5);
    assert.ok(f.shadows.some((b) => b !== 0));
    assert.deepEqual(f.shadows.subarray(0, f.sliceBytes), f.bits.subarray(f.slot(0) * f.sliceBytes, (f.slot(0) + 1) * f.sliceBytes));
    f.shift(2);
    assert.equal(f.count, 0);
    assert.ok(f.shadows.every((b) => b === 0));
    assert.equal(f.setBits(0), 0);
    assert.equal(f.setBits(1), 0);
    assert.ok(f.setBits(2) > 0, "the filled slice moved two positions");
  });
});

/** A filter whose hash index 1 wrongly reuses hash index 0's function (a missing hash per slice). */
class OneHashShort extends Apbf {
  static make(error: number, capacity: number, level: number, s: UnionStrategy): OneHashShort {
    return new OneHashShort(paramsFor(error, capacity, level, s), HASH_FAMILY);
  }
  override position(item: Uint8Array, h: number): number {
    return super.position(item, h === 1 ? 0 : h);
  }
}

/** Fill to steady state, then count positives among `probes` never-inserted items. */
function measureFp(f: Apbf, seed: number, probes: number): { measured: number; estimate: number } {
  const rng = new SplitMix64(seed);
  const inserted = new Set<bigint>();
  // (k + l) generations reach the steady state; half a generation more puts the measurement mid-generation.
  const total = (f.k + f.l) * f.g + Math.floor(f.g / 2);
  for (let i = 0; i < total; i++) {
    const x = rng.next();
    inserted.add(x);
    f.insert(bytesOf(x));
  }
  let positives = 0;
  let asked = 0;
  while (asked < probes) {
    const x = rng.next();
    if (inserted.has(x)) continue;
    asked++;
    if (f.query(bytesOf(x))) positives++;
  }
  return { measured: positives / probes, estimate: f.estimatedFp() };
}

function bytesOf(x: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, x, true);
  return out;
}

describe("APBF false-positive rate (error 2, capacity 4096, level 5; 100 000 probes)", () => {
  const PROBES = 100_000;
  const target = 1e-2;

  for (const s of STRATEGIES) {
    it(`strategy ${s}: measured FP agrees with the estimate and the seed's 1% target`, () => {
      const { measured, estimate } = measureFp(Apbf.fromConfig(2, 4096, 5, s), 1000 + s, PROBES);
      // Binomial tolerance: 4 standard deviations of a rate `estimate` over PROBES draws (±13%).
      const sigma = Math.sqrt((estimate * (1 - estimate)) / PROBES);
      assert.ok(Math.abs(measured - estimate) <= 4 * sigma, `measured ${measured}, estimate ${estimate}, 4σ ${4 * sigma}`);
      assert.ok(measured <= target + 4 * Math.sqrt((target * (1 - target)) / PROBES), `measured ${measured} above the target`);
      console.log(`# strategy ${s}: FP measured ${measured.toFixed(5)}, estimated ${estimate.toFixed(5)}, target ${target}`);
    });
  }

  it("the tolerance rejects a filter with one hash per slice missing", () => {
    const { measured, estimate } = measureFp(OneHashShort.make(2, 4096, 5, ActiveSlices), 1001, PROBES);
    const sigma = Math.sqrt((estimate * (1 - estimate)) / PROBES);
    assert.ok(measured - estimate > 4 * sigma, `broken filter measured ${measured}, estimate ${estimate}`);
    console.log(`# one hash short: FP measured ${measured.toFixed(5)}, estimated ${estimate.toFixed(5)}`);
  });
});

describe("APBF codec", () => {
  function filled(s: UnionStrategy, inserts: number, seed: number): Apbf {
    const f = Apbf.create({ k: 4, l: 6, m: 128, strategy: s });
    const rng = new SplitMix64(seed);
    for (let i = 0; i < inserts; i++) f.insert(rng.nextBytes());
    return f;
  }

  it("round-trips every strategy at any phase (bits, shadows, base, hash indices, count)", () => {
    for (const s of STRATEGIES) {
      for (const inserts of [0, 1, 21, 22, 23, 250]) {
        const f = filled(s, inserts, inserts);
        const back = decodeApbf(encodeApbf(f));
        assert.ok(back.equals(f), `strategy ${s}, ${inserts} inserts`);
        assert.equal(back.strategy, s);
        assert.equal(back.base, f.base);
      }
    }
  });

  it("rejects malformed or inconsistent encodings with DecodeError", () => {
    const good = encodeApbf(filled(CurrentGeneration, 30, 1));
    const n = 10;
    const sb = 16;
    const mutate = (edit: (b: Uint8Array, v: DataView) => void): Uint8Array => {
      const b = good.slice();
      edit(b, new DataView(b.buffer));
      return b;
    };
    const bad: [string, Uint8Array][] = [
      ["truncated header", good.subarray(0, 10)],
      ["truncated body", good.subarray(0, good.length - 1)],
      ["trailing byte", new Uint8Array([...good, 0])],
      ["version", mutate((b) => (b[0] = 3))],
      ["hash family", mutate((b) => (b[1] = HASH_FAMILY + 1))],
      ["strategy", mutate((b) => (b[2] = 3))],
      ["k = 0", mutate((b) => (b[3] = 0))],
      ["m not a multiple of 64", mutate((_, v) => v.setUint32(6, 100, true))],
      ["base out of range", mutate((_, v) => v.setUint16(10, n, true))],
      ["count at g", mutate((_, v) => v.setUint32(12, 22, true))],
      ["count below slice 0's bits", mutate((_, v) => v.setUint32(12, 0, true))],
      ["hash index", mutate((b) => (b[HEADER_BYTES + 3] = (b[HEADER_BYTES + 3]! + 1) % 4))],
      ["shadow bit without its slice bit", shadowNotInSlice()],
    ];
    function shadowNotInSlice(): Uint8Array {
      const f = filled(CurrentGeneration, 30, 1);
      const slice = f.slot(2) * sb;
      let j = 0;
      while (f.bits[slice + j] === 0xff) j++;
      f.shadows[2 * sb + j]! |= ~f.bits[slice + j]! & 0xff;
      return encodeApbf(f);
    }
    assert.ok(decodeApbf(good), "the unmodified encoding decodes");
    for (const [what, bytes] of bad) {
      assert.throws(() => decodeApbf(bytes), DecodeError, what);
    }
  });
});

describe("APBF sparse codec", () => {
  it("rejects sparse bit lists that are truncated, too long or out of range", () => {
    const f = Apbf.create({ k: 4, l: 6, m: 128, strategy: WholeFilter });
    f.insert(new Uint8Array([1, 2, 3]));
    const good = encodeApbf(f);
    assert.equal(good[0], APBF_SPARSE_VERSION);
    const at = HEADER_BYTES + f.n;
    const withCount = (count: number) => {
      const b = good.slice();
      new DataView(b.buffer).setUint32(at, count, true);
      return b;
    };
    const bad: [string, Uint8Array][] = [
      ["truncated count", good.subarray(0, at + 2)],
      ["truncated list", good.subarray(0, good.length - 1)],
      ["count above the bits", withCount(f.bits.length * 8 + 1)],
      ["index past the end", new Uint8Array([...good.subarray(0, at), ...[1, 0, 0, 0], 0xff, 0x0f])],
      ["trailing byte", new Uint8Array([...good, 0])],
    ];
    for (const [what, bytes] of bad) assert.throws(() => decodeApbf(bytes), DecodeError, what);
  });

  it("refuses a sparse filter declaring more bytes than the node's limit, before allocating it", () => {
    const big = encodeApbf(Apbf.create({ k: 8, l: 8, m: 1 << 20, strategy: WholeFilter }));
    assert.ok(big.length < 100, "a 2 MB filter with no bit set is a few dozen bytes");
    assert.throws(() => decodeApbf(big, 1024 * 1024), (e: Error) => e instanceof StateLimitError && /2097152 bytes is larger than this node accepts \(1048576 bytes/.test(e.message));
    assert.ok(decodeApbf(big, 4 * 1024 * 1024).isEmpty());
    assert.ok(decodeApbf(big).isEmpty(), "the node's own records are read whatever the limit");
  });
});

describe("APBF union refuses mismatched filters", () => {
  it("throws ApbfMismatchError naming the differing parameter", () => {
    const a = Apbf.create({ k: 4, l: 6, m: 128, strategy: ActiveSlices });
    const others: [string, Apbf][] = [
      ["k", Apbf.create({ k: 5, l: 6, m: 128, strategy: ActiveSlices })],
      ["l", Apbf.create({ k: 4, l: 7, m: 128, strategy: ActiveSlices })],
      ["m", Apbf.create({ k: 4, l: 6, m: 192, strategy: ActiveSlices })],
      ["union strategy", Apbf.create({ k: 4, l: 6, m: 128, strategy: CurrentGeneration })],
      ["hash family", Apbf.blank(a.params, HASH_FAMILY + 1)],
    ];
    for (const [field, b] of others) {
      assert.throws(
        () => union(a, b),
        (e: unknown) => e instanceof ApbfMismatchError && e.field === field,
        field,
      );
      assert.throws(() => unionInPlace(b, a), ApbfMismatchError);
    }
  });
});

describe("APBF size by level", () => {
  // The advice an Add past --max-filter-bytes gives for an AWSET_PROB key (replica/whole-type-calls.ts).
  it("with current-generation shadows (the default strategy), from a capacity of 4096 up, a higher level takes no more bytes at any rate", () => {
    for (const strategy of [UnionStrategy.CurrentGeneration]) {
      for (const error of [1, 2, 3, 4, 5]) {
        for (const capacity of [4096, 16_384, 100_000, 1_000_000]) {
          const sizes = Array.from({ length: error === 1 ? 5 : 6 }, (_, level) => Apbf.create(paramsFor(error, capacity, level, strategy)).byteSize());
          for (let l = 1; l < sizes.length; l++) assert.ok(sizes[l]! <= sizes[l - 1]!, `error ${error}, capacity ${capacity}, strategy ${strategy}: ${sizes.join(", ")}`);
        }
      }
    }
  });
});
