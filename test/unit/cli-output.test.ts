// How the CLI prints numbers for people: estimated false-positive rates as percentages.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { percent } from "../../services/cli/output.ts";

describe("deltaset output: rates", () => {
  it("prints a rate as a percentage of three significant digits, tiny ones as below 0.0001%", () => {
    const cases: [number, string][] = [[0, "0%"], [0.01, "1%"], [0.012345, "1.23%"], [0.5, "50%"], [0.00001, "0.001%"], [0.000001, "0.0001%"], [2.71e-49, "below 0.0001%"], [1, "100%"]];
    for (const [rate, shown] of cases) assert.equal(percent(rate), shown, String(rate));
  });
});
