// The CLI's duration flag (deltaset add --ttl).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { durationMs } from "../../services/cli/client-commands.ts";

describe("deltaset add --ttl durations", () => {
  it("reads plain milliseconds and ms, s, m, h, d units", () => {
    const cases: [string, number][] = [["500", 500], ["250ms", 250], ["30s", 30_000], ["1.5m", 90_000], ["2h", 7_200_000], ["1d", 86_400_000]];
    for (const [raw, ms] of cases) assert.equal(durationMs(raw, "--ttl"), ms, raw);
  });

  it("refuses what is not a positive duration, naming the flag", () => {
    for (const raw of ["", "0", "-5s", "5 weeks", "1e3", "0.2ms", "s"]) assert.throws(() => durationMs(raw, "--ttl"), /--ttl .*a duration such as/, raw);
  });
});
