// The log throttle: the first warning about a subject at once, then at most one per interval with
// the count suppressed in between; subjects are independent and memory is bounded.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { logThrottle } from "../../services/common/log-throttle.ts";

describe("logThrottle", () => {
  it("admits the first occurrence, then one per interval with the suppressed count", () => {
    let t = 0;
    const th = logThrottle(1000, 10, () => t);
    assert.deepEqual(th.admit("k"), { suppressed: 0 });
    assert.equal(th.admit("k"), undefined);
    assert.deepEqual(th.admit("other"), { suppressed: 0 }, "subjects are independent");
    t = 999;
    assert.equal(th.admit("k"), undefined);
    t = 1000;
    assert.deepEqual(th.admit("k"), { suppressed: 2 });
  });

  it("forgets the oldest subject beyond its capacity", () => {
    const t = 0;
    const th = logThrottle(1000, 2, () => t);
    th.admit("a");
    th.admit("b");
    th.admit("c"); // evicts a
    assert.deepEqual(th.admit("a"), { suppressed: 0 }, "a was forgotten, so it is admitted again");
    assert.equal(th.admit("c"), undefined);
  });
});
