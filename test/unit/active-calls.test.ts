// The list of running calls: entered calls are counted until their end, an end called twice counts
// once, and cutAll ends (and cuts) the calls that can be cut, in any order of entries and ends.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { activeCalls } from "../../services/node/active-calls.ts";

describe("activeCalls", () => {
  it("counts what entered and has not ended, whatever the order of ends (each end any number of times)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 30 }), fc.array(fc.nat(), { maxLength: 60 }), (n, picks) => {
        const calls = activeCalls();
        const ends = Array.from({ length: n }, () => calls.enter());
        const ended = new Set<number>();
        for (const p of picks) {
          if (n === 0) break;
          const i = p % n;
          ends[i]!();
          ended.add(i);
          assert.equal(calls.count(), n - ended.size);
        }
        ends.forEach((end) => end());
        assert.equal(calls.count(), 0);
      }),
    );
  });

  it("cutAll cuts each running call that can be cut, once, with the reason; the others keep running", () => {
    const calls = activeCalls();
    const cut: string[] = [];
    const endA = calls.enter((why) => cut.push(`a: ${why}`));
    calls.enter();
    const endC = calls.enter((why) => {
      cut.push(`c: ${why}`);
      endC(); // a cut call answers, which ends it again
    });
    const endD = calls.enter((why) => cut.push(`d: ${why}`));
    endD();
    calls.cutAll("stopping");
    assert.deepEqual(cut.sort(), ["a: stopping", "c: stopping"]);
    assert.equal(calls.count(), 1);
    endA();
    assert.equal(calls.count(), 1);
    calls.cutAll("again");
    assert.equal(cut.length, 2);
  });
});
