// The COUNTER lattice under the delta paths gossip takes: redundancy removal (difference against
// the receiver's state) and decomposition give deltas whose contexts hold only the dots they name,
// and a node joins such deltas of different senders into one delta-interval for its next
// neighbour, leaving out those that came from that neighbour (back-propagation avoidance), so an
// interval may skip the delta that linked two others. A replica's newer entry supersedes its older
// ones in every join, so an interval never
// holds two entries of one replica (the encoding refuses that), it encodes and decodes, and every
// replica converges to the sum of the increments, whatever the order, duplication and loss.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CounterLattice as L, PNCounter } from "../../services/crdt/pncounter.js";

const REPLICAS = 3;
const names = ["a", "b", "c"];

type Op = { t: "inc"; r: number; n: number } | { t: "send"; from: number; to: number; rr: boolean } | { t: "forward"; from: number; to: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant("inc" as const), r: fc.nat(REPLICAS - 1), n: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ t: fc.constant("send" as const), from: fc.nat(REPLICAS - 1), to: fc.nat(REPLICAS - 1), rr: fc.boolean() }),
  fc.record({ t: fc.constant("forward" as const), from: fc.nat(REPLICAS - 1), to: fc.nat(REPLICAS - 1) }),
);

const roundTrip = (s: PNCounter) => L.decode(L.encode(s));

describe("COUNTER deltas through redundancy removal and delta-intervals", () => {
  it("a newer entry of a replica supersedes an older one in any join of narrow deltas", () => {
    const a = PNCounter.bottom();
    const steps: PNCounter[] = [];
    for (let i = 0; i < 9; i++) {
      const d = a.incrementDelta("a", 1n);
      L.joinInPlace(a, d);
      steps.push(L.clone(a));
    }
    // Two receivers that held a's 1st and 7th states; what a's 5th and 9th states add to them.
    const older = L.difference(steps[4]!, steps[0]!);
    const newer = L.difference(steps[8]!, steps[6]!);
    const interval = L.join(older, newer);
    assert.equal(interval.entries.size, 1, "one entry per replica");
    assert.equal(roundTrip(interval).value(), 9n);
    const parts = [...L.decompose(steps[8]!), ...L.decompose(steps[4]!)];
    const joined = parts.reduce((x, y) => L.join(x, y), L.bottom());
    assert.equal(joined.entries.size, 1);
    assert.equal(roundTrip(joined).value(), 9n);
  });

  it("replicas exchanging redundancy-removed deltas and forwarding joined intervals converge to the sum", () =>
    fc.assert(
      fc.property(fc.array(op, { minLength: 10, maxLength: 60, size: "max" }), (ops) => {
        const x = Array.from({ length: REPLICAS }, () => PNCounter.bottom());
        // Each replica's buffer of deltas with their origin (Algorithm 2's, never collected here).
        const buffer = Array.from({ length: REPLICAS }, () => [] as Array<{ d: PNCounter; from: number }>);
        const interval = (r: number, to: number) => buffer[r]!.filter((b) => b.from !== to).reduce((acc, b) => L.join(acc, b.d), PNCounter.bottom());
        let total = 0n;
        for (const o of ops) {
          if (o.t === "inc") {
            const d = x[o.r]!.incrementDelta(names[o.r]!, BigInt(o.n));
            L.joinInPlace(x[o.r]!, d);
            buffer[o.r]!.push({ d, from: o.r });
            total += BigInt(o.n);
          } else if (o.from !== o.to) {
            const sent = o.t === "send" ? x[o.from]! : interval(o.from, o.to);
            const wire = roundTrip(sent);
            // What the receiver buffers: the part new to it (RR on) or all of it.
            const fresh = o.t === "send" && !o.rr ? wire : L.difference(wire, x[o.to]!);
            L.joinInPlace(x[o.to]!, wire);
            buffer[o.to]!.push({ d: fresh, from: o.from });
            for (let n = 0; n < REPLICAS; n++) assert.doesNotThrow(() => roundTrip(interval(o.to, n)), "a delta-interval always encodes and decodes");
          }
        }
        // Full exchange at the end: every replica holds every increment exactly once.
        for (let round = 0; round < 2; round++) for (let i = 0; i < REPLICAS; i++) for (let j = 0; j < REPLICAS; j++) L.joinInPlace(x[j]!, roundTrip(x[i]!));
        for (const s of x) assert.equal(s.value(), total);
      }),
      { numRuns: 400 },
    ));
});
