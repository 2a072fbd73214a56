// The age of the oldest change a neighbour has not acknowledged: SeqMarks dates seqs, never too
// young, and the engine reports it per partition (the shrink gate that works under steady writes).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AntiEntropyEngine, seededRandom } from "../../services/gossip/index.js";
import { SeqMarks } from "../../services/gossip/seq-marks.js";
import { LocalGate } from "../../services/gossip/local-gate.js";
import { S, gsetOps, type GSet } from "./gossip-helpers.js";

describe("SeqMarks", () => {
  it("never dates a seq later than it was handed out, and within the resolution while under the cap", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 200 }), count: fc.integer({ min: 1, max: 5 }) }), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 2, max: 40 }),
        fc.nat(),
        (steps, resolution, maxMarks, pruneSeed) => {
          const start = 1000;
          const marks = new SeqMarks(resolution, maxMarks);
          const handedAt: number[] = [];
          let now = start;
          let seq = 0;
          let merged = false;
          for (const s of steps) {
            now += s.gap;
            for (let i = 0; i < s.count; i++) {
              const before = marks.size;
              marks.note(seq++, now);
              if (before === maxMarks && marks.size === maxMarks) merged = true;
              handedAt.push(now);
            }
          }
          const minAck = pruneSeed % (seq + 1);
          marks.prune(minAck);
          const later = now + 7;
          for (let s = minAck; s < seq; s++) {
            const age = marks.ageOf(s, later);
            const trueAge = later - handedAt[s]!;
            assert.ok(age >= trueAge, `seq ${s}: age ${age} < true ${trueAge}`);
            if (!merged) assert.ok(age <= trueAge + resolution, `seq ${s}: age ${age} > true ${trueAge} + ${resolution}`);
          }
          assert.ok(marks.size <= maxMarks);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("has no age for a seq older than every mark (handed out before this process, or pruned)", () => {
    const marks = new SeqMarks(10);
    marks.note(5, 400);
    assert.equal(marks.ageOf(3, 500), Infinity);
    assert.equal(marks.ageOf(5, 500), 100);
    assert.equal(marks.ageOf(9, 500), 100);
  });

  it("keeps one mark per resolution step and drops the marks every neighbour has passed", () => {
    const marks = new SeqMarks(50);
    for (let s = 0; s < 100; s++) marks.note(s, 10 * s);
    assert.equal(marks.size, 20); // one every 5 seqs (50 ms)
    marks.prune(52);
    assert.equal(marks.size, 10); // the mark at 50 still dates seqs 50-54
    assert.equal(marks.ageOf(52, 1000), 1000 - 500);
  });
});

describe("Algorithm 2: age of the oldest unacknowledged change", () => {
  function engine(clock: () => number): AntiEntropyEngine<GSet> {
    return new AntiEntropyEngine<GSet>({
      self: "a",
      ops: gsetOps,
      random: seededRandom(1),
      sync: { algorithm: 2, bp: true, rr: false, fanout: "all" },
      partitions: 2,
      neighbours: ["b", "c"],
      clock,
    });
  }

  it("reads the age of the first change the slowest neighbour lacks, 0 once all acked, and stays low under steady writes", () => {
    let now = 10_000;
    const e = engine(() => now);
    e.local(0, S("x")); // seq 0 at 10 000
    now = 11_000;
    e.local(0, S("y")); // seq 1 at 11 000
    now = 12_000;
    assert.equal(e.partitionStats(0).unackedAgeMs, 2000);
    assert.equal(e.partitionStats(1).unackedAgeMs, 0, "nothing written to partition 1");
    e.onAcks("b", [{ partition: 0, seq: 2 }]);
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    assert.equal(e.partitionStats(0).unackedAgeMs, 1000, "c still lacks y, taken 1 s ago");
    e.onAcks("c", [{ partition: 0, seq: 2 }]);
    assert.equal(e.partitionStats(0).unackedAgeMs, 0);
    // Steady writes, one every 100 ms, each acked 300 ms after it was taken: a partition is
    // always lagging, while the age stays at about the round trip.
    const cAt: number[] = [];
    for (let i = 0; i < 100; i++) {
      now += 100;
      cAt.push(e.local(0, S(`w${i}`)));
      if (i >= 3) {
        e.onAcks("b", [{ partition: 0, seq: cAt[i - 3]! }]);
        e.onAcks("c", [{ partition: 0, seq: cAt[i - 3]! }]);
      }
      if (i % 5 === 0) e.tick(now);
      if (i < 3) continue;
      const { lag, unackedAgeMs } = e.partitionStats(0);
      assert.equal(lag, 3);
      assert.ok(unackedAgeMs! >= 200 && unackedAgeMs! <= 250, `age ${unackedAgeMs} ms`);
    }
  });

  it("a neighbour that appears later lacks everything: no known age until it acks", () => {
    let now = 5000;
    const e = engine(() => now);
    for (let i = 0; i < 10; i++) {
      now += 100;
      e.local(1, S(`v${i}`));
    }
    e.onAcks("b", [{ partition: 1, seq: 10 }]);
    e.onAcks("c", [{ partition: 1, seq: 10 }]);
    e.tick(now); // prunes marks both neighbours passed
    e.setNeighbours(["b", "c", "d"]);
    now += 1000;
    assert.equal(e.partitionStats(1).unackedAgeMs, Infinity, "its marks were pruned: older than any");
    e.onAcks("d", [{ partition: 1, seq: 10 }]);
    assert.equal(e.partitionStats(1).unackedAgeMs, 0);
  });

  it("a restarted engine's changes from before it have no known age, with or without neighbours, until every neighbour acked them", () => {
    let now = 1_000;
    const restarted = (neighbours: string[]) =>
      new AntiEntropyEngine<GSet>({ self: "a", ops: gsetOps, random: seededRandom(1), sync: { algorithm: 2, bp: true, rr: false, initialSeqs: [7, 0] }, partitions: 2, neighbours, clock: () => now });
    const alone = restarted([]);
    assert.equal(alone.partitionStats(0).unackedAgeMs, Infinity, "no neighbour yet: seqs 0..6 may be on this disk alone");
    assert.equal(alone.partitionStats(1).unackedAgeMs, 0, "nothing from before the restart");
    const e = restarted(["b"]);
    assert.equal(e.partitionStats(0).unackedAgeMs, Infinity);
    now += 500;
    e.local(0, S("fresh"));
    e.onAcks("b", [{ partition: 0, seq: 7 }]);
    e.gc();
    now += 300;
    assert.equal(e.partitionStats(0).unackedAgeMs, 300, "b holds the restored seqs; the fresh change was taken 300 ms ago");
    e.onAcks("b", [{ partition: 0, seq: 8 }]);
    e.gc();
    e.setNeighbours([]);
    assert.equal(e.partitionStats(0).unackedAgeMs, 0, "acknowledged once: losing the neighbours later does not make it unknown");
  });

  it("keeps no ages without a clock", () => {
    const e = new AntiEntropyEngine<GSet>({ self: "a", ops: gsetOps, random: seededRandom(1), sync: { algorithm: 2, bp: false, rr: false }, partitions: 1, neighbours: ["b"] });
    e.local(0, S("x"));
    assert.equal(e.partitionStats(0).unackedAgeMs, undefined);
  });
});

describe("LocalGate: local changes held back have no seq yet, but an age", () => {
  it("reports when the oldest held change arrived, until it is released", () => {
    let now = 100;
    const released: string[] = [];
    const gate = new LocalGate<string>((x) => released.push(x), () => now);
    assert.equal(gate.oldestHeldAt(), undefined);
    const g = gate.openGate(3);
    gate.offer(3, "a");
    now = 250;
    gate.offer(3, "b");
    gate.offer(4, "other partition: not held");
    assert.equal(gate.oldestHeldAt(), 100);
    gate.closeGate(g);
    assert.deepEqual(released, ["other partition: not held", "a", "b"]);
    assert.equal(gate.oldestHeldAt(), undefined);
  });
});
