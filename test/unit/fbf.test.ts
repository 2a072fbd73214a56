// The Forgetful Bloom Filter (seed 003): retention across refreshes, the optimized membership
// check, the Eq 4.3 estimate against measured false positives, sizing, and Alg 3 resizing.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ForgetfulBloomFilter, bloomFpp, eq43, sizeForTarget } from "../../services/crdt/fbf.js";
import { FbfResizer } from "../../services/crdt/fbf-resize.js";

const T = 1000; // refresh period in the tests (ms)

/** Insert `perPeriod` fresh ids in each of `periods` periods from time 0; returns the time after. */
function load(f: ForgetfulBloomFilter, periods: number, perPeriod: number, prefix = "in"): number {
  let n = 0;
  for (let p = 0; p < periods; p++) {
    for (let i = 0; i < perPeriod; i++) f.insert(`${prefix}-${n++}`, p * f.t + Math.floor((i * f.t) / perPeriod));
  }
  return periods * f.t - 1;
}

function measuredRate(f: ForgetfulBloomFilter, now: number, probes: number, any = false): number {
  let hits = 0;
  for (let j = 0; j < probes; j++) if ((any ? f.containsAny : f.contains).call(f, `probe-${j}`, now)) hits++;
  return hits / probes;
}

describe("FBF retention", () => {
  for (const N of [1, 2, 4]) {
    test(`N=${N}: an id is found for N+1 refreshes and forgotten at the N+2nd`, () => {
      const f = new ForgetfulBloomFilter({ m: 1 << 16, k: 4, N, t: T }, 0);
      assert.equal(f.insert("x", 10), true);
      assert.equal(f.filterCount, N + 2);
      for (let r = 0; r <= N + 1; r++) {
        assert.equal(f.contains("x", 10), true, `after ${r} refreshes`);
        // Other traffic each period does not disturb it.
        f.insert(`other-${r}`, 10);
        f.refresh();
      }
      assert.equal(f.contains("x", 10), false, `after ${N + 2} refreshes`);
    });
  }

  test("by time: found for (N+1)·t after the insert, gone at the end of its period's window", () => {
    const N = 2;
    const f = new ForgetfulBloomFilter({ m: 1 << 16, k: 4, N, t: T }, 0);
    const tau = 3 * T + 400; // period I = 3
    f.advance(tau);
    f.insert("x", tau);
    for (let now = tau; now < tau + (N + 1) * T; now += 97) assert.equal(f.contains("x", now), true, `at ${now}`);
    assert.equal(f.contains("x", (3 + N + 2) * T - 1), true, "last ms of the window");
    assert.equal(f.contains("x", (3 + N + 2) * T), false, "after (I+N+2)·t");
    assert.equal(f.retentionMs(), (N + 1) * T);
  });

  test("Alg 1: a member is a retry and is not inserted again", () => {
    const f = new ForgetfulBloomFilter({ m: 4096, k: 4, N: 1, t: T }, 0);
    assert.equal(f.insert("x", 0), true);
    assert.equal(f.insert("x", 5), false);
    assert.deepEqual(f.insertCounts(), [1, 1, 0]);
    f.refresh();
    assert.equal(f.insert("x", 5), false, "found in the (present, past) pair");
    assert.deepEqual(f.insertCounts(), [0, 1, 1]);
  });

  test("advance refreshes once per elapsed period, a long gap empties it, earlier times are no-ops", () => {
    const f = new ForgetfulBloomFilter({ m: 4096, k: 4, N: 1, t: T }, 0);
    f.insert("x", 0);
    f.advance(2 * T + 5);
    assert.equal(f.refreshes, 2);
    assert.deepEqual(f.insertCounts(), [0, 0, 1]);
    f.advance(T); // time going back: nothing happens
    assert.equal(f.refreshes, 2);
    f.advance(1_000_000 * T);
    assert.equal(f.refreshes, 1_000_000);
    assert.deepEqual(f.insertCounts(), [0, 0, 0]);
    assert.equal(f.nextRefreshAt, 1_000_001 * T);
  });

  test("scale-up raises the capacity: the oldest filter keeps its solo check and nothing is forgotten early", () => {
    const f = new ForgetfulBloomFilter({ m: 1 << 16, k: 4, N: 1, t: T }, 0);
    f.insert("x", 0);
    f.refresh();
    f.refresh(); // x now only in the oldest filter
    assert.equal(f.contains("x", 0), true);
    f.setShape(4, T);
    assert.equal(f.filterCount, 3, "no empty filters appended at the old end");
    for (let r = 0; r < 3; r++) {
      f.refresh();
      assert.equal(f.contains("x", 0), true, `after ${r + 1} more refreshes`);
    }
    assert.equal(f.filterCount, 6);
    f.refresh();
    assert.equal(f.contains("x", 0), false);
  });
});

describe("FBF false positives", () => {
  test("Eq 4.3 matches hand-computed Eq 4.2 for a basic FBF", () => {
    const [pf, pp, p1] = [0.01, 0.05, 0.04];
    assert.ok(Math.abs(eq43([pf, pp, p1]) - (1 - (1 - pf) * (1 - pp * p1) * (1 - p1))) < 1e-15);
    // digest of seed 003, §7: m = 6250, k = 5, l = 300 gives 4.4e-4; l = 1000 gives 0.051.
    assert.ok(Math.abs(bloomFpp(6250, 5, 300) - 4.4e-4) < 0.1e-4);
    assert.ok(Math.abs(bloomFpp(6250, 5, 1000) - 0.051) < 0.001);
  });

  // Steady load over several periods, then 100k probes of ids never inserted. Deterministic (the
  // hash is seeded), so the numbers are fixed; the band is what a correct check must land in.
  // Eq 4.3 assumes independent filters, but adjacent filters share one period's ids, so the
  // measured rate runs above it, the more so the more pairs are checked (N).
  const cases = [
    { m: 2000, k: 4, N: 1, perPeriod: 150, band: [0.85, 1.25] },
    { m: 6250, k: 5, N: 1, perPeriod: 300, band: [0.85, 1.25] },
    { m: 2000, k: 4, N: 3, perPeriod: 150, band: [1.0, 1.45] },
  ] as const;
  for (const c of cases) {
    test(`measured rate vs the estimate: m=${c.m} k=${c.k} N=${c.N}, ${c.perPeriod} ids per period`, () => {
      const f = new ForgetfulBloomFilter({ m: c.m, k: c.k, N: c.N, t: T }, 0);
      const now = load(f, c.N + 4, c.perPeriod);
      const est = f.fppEstimate(now);
      const measured = measuredRate(f, now, 100_000);
      const ratio = measured / est;
      assert.ok(est > 0.005 && est < 0.1, `estimate ${est} in a measurable range`);
      assert.ok(ratio >= c.band[0] && ratio <= c.band[1], `measured ${measured} / estimate ${est} = ${ratio}`);
      // A broken check (the simple any-filter test of §3.1) lands far outside the band.
      const simple = measuredRate(f, now, 100_000, true);
      assert.ok(simple / est > c.band[1] + 0.25, `simple check ${simple} vs estimate ${est}`);
    });
  }

  test("sizeForTarget: a steady load at the expected rate stays under the target", () => {
    for (const [target, n] of [
      [0.01, 200],
      [0.001, 500],
    ] as const) {
      const { m, k } = sizeForTarget(target, n);
      const f = ForgetfulBloomFilter.forTarget({ targetFpp: target, insertsPerPeriod: n, t: T }, 0);
      assert.deepEqual([f.m, f.k, f.N], [m, k, 1]);
      const now = load(f, 6, n);
      assert.ok(f.fppEstimate(now) <= target, `estimate ${f.fppEstimate(now)} <= ${target}`);
      assert.ok(measuredRate(f, now, 50_000) <= target * 1.3, "measured rate near or under the target");
      // Not oversized: with half the bits the same load would miss the target.
      assert.ok(eq43([bloomFpp(m / 2, k, n), bloomFpp(m / 2, k, 2 * n), bloomFpp(m / 2, k, 2 * n)]) > target);
    }
  });

  test("constructor parameters are validated", () => {
    assert.throws(() => new ForgetfulBloomFilter({ m: 0, k: 4, N: 1, t: T }, 0), /m must be/);
    assert.throws(() => new ForgetfulBloomFilter({ m: 64, k: 4, N: 0, t: T }, 0), /N must be/);
    assert.throws(() => sizeForTarget(0, 10), /target FPP/);
  });
});

describe("FBF dynamic resizing (Alg 3)", () => {
  const heavy = () => {
    const f = new ForgetfulBloomFilter({ m: 2000, k: 4, N: 1, t: 10_000 }, 0);
    load(f, 2, 250);
    // Half a period more at the same rate: ticks at 25 s fall mid-period, with no refresh due.
    for (let i = 0; i < 125; i++) f.insert(`late-${i}`, 20_000 + i * 40);
    return { f, now: 25_000 };
  };

  test("estimate at or above 0.9·target: filters double (N+2 -> 2(N+2)) and t drops by one step", () => {
    const { f, now } = heavy();
    const r = new FbfResizer({ targetFpp: 0.01 });
    const a = r.tick(f, now);
    assert.ok(a.fpp >= 0.009);
    assert.equal(a.kind, "up");
    assert.deepEqual([f.N, f.t], [4, 9000]);
    // No second move until a refresh has changed what the estimate is computed from.
    assert.equal(r.tick(f, now + 1).kind, "hold");
    f.refresh();
    const b = r.tick(f, now + 2);
    assert.equal(b.kind, "up");
    assert.deepEqual([f.N, f.t], [10, 8000]);
  });

  test("estimate at or below 0.1·target: one filter fewer and t up by one step", () => {
    const f = new ForgetfulBloomFilter({ m: 2000, k: 4, N: 4, t: 5000 }, 0);
    const now = load(f, 2, 10);
    const r = new FbfResizer({ targetFpp: 0.01 });
    const a = r.tick(f, now);
    assert.ok(a.fpp <= 0.001);
    assert.deepEqual([a.kind, f.N, f.t], ["down", 3, 6000]);
    // Letting up gently: the next scale-down waits until every filter has been replaced.
    for (let i = 0; i < f.filterCount - 1; i++) {
      f.refresh();
      assert.equal(r.tick(f, now).kind, "hold");
    }
    f.refresh();
    assert.deepEqual([r.tick(f, now).kind, f.N, f.t], ["down", 2, 7000]);
  });

  test("between 0.1 and 0.9 of the target: hold", () => {
    const f = new ForgetfulBloomFilter({ m: 2000, k: 4, N: 1, t: T }, 0);
    const now = load(f, 3, 150); // estimate about 0.042
    const a = new FbfResizer({ targetFpp: 0.1 }).tick(f, now);
    assert.equal(a.kind, "hold");
    assert.deepEqual([f.N, f.t], [1, T]);
  });

  test("floors, caps and the window invariant (N+1)·t >= minWindowMs", () => {
    const { f, now } = heavy();
    const up = new FbfResizer({ targetFpp: 0.01, nMax: 3, minWindowMs: 38_000 }).tick(f, now);
    // N capped at 3; t may only fall to ceil(38 000 / 4) = 9500.
    assert.deepEqual([up.kind, f.N, f.t], ["up", 3, 9500]);

    const g = new ForgetfulBloomFilter({ m: 2000, k: 4, N: 2, t: 5000 }, 0);
    const down = new FbfResizer({ targetFpp: 0.01, minWindowMs: 15_000 }).tick(g, 0);
    // N = 1 with t = 6000 would give a 12 s window: N is kept, only t grows.
    assert.deepEqual([down.kind, g.N, g.t], ["down", 2, 6000]);

    const h = new ForgetfulBloomFilter({ m: 2000, k: 4, N: 1, t: 1000 }, 0);
    const atFloor = new FbfResizer({ targetFpp: 0.01, tMaxMs: 1000 }).tick(h, 0);
    assert.deepEqual([atFloor.kind, h.N, h.t], ["hold", 1, 1000]);
  });

  test("under a steady load too heavy for the start shape, resizing brings the estimate under the target", () => {
    const target = 0.01;
    const run = (resize: boolean) => {
      const f = new ForgetfulBloomFilter({ m: 6250, k: 5, N: 1, t: 10_000 }, 0);
      const r = new FbfResizer({ targetFpp: target, minWindowMs: 20_000, nMax: 16 });
      let id = 0;
      let maxLate = 0;
      for (let s = 0; s < 300; s++) {
        for (let i = 0; i < 50; i++) f.insert(`op-${id++}`, s * 1000 + i * 20);
        const now = s * 1000 + 999;
        if (s >= 150) maxLate = Math.max(maxLate, f.fppEstimate(now));
        if (resize) r.tick(f, now);
        assert.ok((f.N + 1) * f.t >= 20_000, "window invariant");
      }
      return { maxLate, N: f.N, t: f.t };
    };
    const fixed = run(false);
    const adaptive = run(true);
    assert.ok(fixed.maxLate > target, `without resizing the estimate stays over (${fixed.maxLate})`);
    assert.ok(adaptive.maxLate < target, `with resizing it settles under (${adaptive.maxLate})`);
    assert.ok(adaptive.N > 1 && adaptive.t < 10_000, `shape ${adaptive.N}, ${adaptive.t}`);
  });
});
