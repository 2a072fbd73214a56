// Probe round trips against the probe timeout (membership/probe-timing.ts): a warning when the
// 95th percentile of the recent round trips passes half the timeout, never before enough samples,
// at most once per interval, and statistics over the most recent window only.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ProbeTiming } from "../../services/membership/probe-timing.ts";

describe("probe round trips against the probe timeout", () => {
  it("warns once the 95th percentile passes half the timeout, not before minSamples, then once per interval", () => {
    const t = new ProbeTiming({ timeoutMs: 400, minSamples: 20, warnEveryMs: 60_000 });
    let now = 0;
    // Fast links: round trips well under half the timeout never warn.
    for (let i = 0; i < 100; i++) assert.equal(t.record(5 + (i % 10), (now += 500)), undefined);
    // Links slow down to 250-500 ms round trips (a 200 ± 50 ms link each way).
    const warnings = [];
    for (let i = 0; i < 200; i++) {
      const w = t.record(250 + (i % 26) * 10, (now += 500));
      if (w !== undefined) warnings.push({ at: i, ...w });
    }
    // The window (64) holds mostly slow round trips after a few of them; the first warning comes
    // once more than 5% of the window is past 200 ms, then one per minute (120 samples at 500 ms).
    assert.ok(warnings.length === 2, JSON.stringify(warnings));
    assert.ok(warnings[0]!.at < 10, `first warning after ${warnings[0]!.at} slow probes`);
    assert.equal(warnings[1]!.at - warnings[0]!.at, 120);
    assert.ok(warnings[0]!.p95Ms > 200 && warnings[0]!.timeoutMs === 400);
    const s = t.stats();
    assert.equal(s.samples, 64);
    assert.ok(s.p50Ms! >= 250 && s.maxMs! <= 500, JSON.stringify(s));
  });

  it("does not warn with fewer than minSamples round trips, however slow", () => {
    const t = new ProbeTiming({ timeoutMs: 100, minSamples: 20 });
    for (let i = 0; i < 19; i++) assert.equal(t.record(99, i), undefined);
    assert.notEqual(t.record(99, 19), undefined);
  });

  it("statistics are those of the last `window` round trips (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 300 }), fc.integer({ min: 1, max: 80 }), (rtts, window) => {
        const t = new ProbeTiming({ timeoutMs: 1_000_000, window });
        rtts.forEach((r, i) => t.record(r, i));
        const last = rtts.slice(-window).sort((a, b) => a - b);
        const s = t.stats();
        assert.equal(s.samples, last.length);
        assert.equal(s.maxMs, last.at(-1));
        assert.equal(s.p50Ms, last[Math.ceil(0.5 * last.length) - 1]);
        assert.equal(s.p95Ms, last[Math.ceil(0.95 * last.length) - 1]);
      }),
    );
  });

  it("ignores impossible round trips", () => {
    const t = new ProbeTiming({ timeoutMs: 100 });
    t.record(Number.NaN, 0);
    t.record(-1, 0);
    assert.equal(t.stats().samples, 0);
    assert.equal(t.stats().p95Ms, null);
  });
});
