// Full-state streams end at a byte budget (ExchangeOptions.stateStreamBytes), partition by
// partition, and the rest of a catch-up follows in the next stream; and the stall watchdog that
// replaces a deadline over a whole stream (common/stall-timer.ts).
import { strict as assert } from "node:assert";
import { describe, it, mock } from "node:test";
import fc from "fast-check";
import { ALG2_BP_RR, RING3 } from "./gossip-helpers.js";
import { GossipSimulation, NO_FAULTS } from "../../services/gossip/index.js";
import type { StateChunk } from "../../services/gen/deltaset/v1/gossip.js";
import { StallTimer } from "../../services/common/stall-timer.js";

const b = (s: string) => Buffer.from(s);
const ring3 = RING3;
const alg2 = ALG2_BP_RR;

/** Every chunk of a stream, and what it returned (the partitions it covered). */
async function drain(stream: AsyncGenerator<StateChunk, number>): Promise<{ chunks: StateChunk[]; covered: number }> {
  const chunks: StateChunk[] = [];
  let next = await stream.next();
  for (; !next.done; next = await stream.next()) chunks.push(next.value);
  return { chunks, covered: next.value };
}

describe("full-state streams end at their byte budget", () => {
  it("a stream ends after the partition that reaches the budget, with every partition it carries whole", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 0, max: 2 ** 31 }), async (budget, seed) => {
        const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 8, seed, faults: NO_FAULTS, stateChunkEntries: 8, stateStreamBytes: budget });
        for (let k = 0; k < 24; k++) await sim.add("a", `k${k}`, Array.from({ length: 1 + (k % 5) * 7 }, (_, i) => b(`e${k}-${i}`)));
        const x = sim.exchange("a");
        const parts = Array.from({ length: 8 }, (_, p) => ({ partition: p, seq: x.engine.seq(p) })).filter((p) => p.seq > 0);
        let rest = parts;
        const seen: number[] = [];
        while (rest.length > 0) {
          const { chunks, covered } = await drain(x.stateStream(rest));
          assert.ok(covered >= 1 && covered <= rest.length, `covered ${covered} of ${rest.length}`);
          // Exactly the first `covered` partitions, each closed by its end marker, in order.
          const ends = chunks.filter((c) => c.partitionDone).map((c) => c.partition);
          assert.deepEqual(ends, rest.slice(0, covered).map((p) => p.partition));
          const bytes = (upTo: number) => chunks.slice(0, upTo).reduce((n, c) => n + (c.slice?.payload.length ?? 0), 0);
          // Under the budget before the last partition's end marker; a partition is never cut for it.
          const endsAt = chunks.flatMap((c, i) => (c.partitionDone ? [i] : []));
          const beforeLast = endsAt.length >= 2 ? endsAt[endsAt.length - 2]! : -1;
          if (beforeLast >= 0) assert.ok(bytes(beforeLast) < budget, "the stream went on past its budget");
          if (covered < rest.length) assert.ok(bytes(chunks.length) >= budget, "the stream ended under its budget");
          for (const c of chunks) if (!c.partitionDone) assert.ok(rest.slice(0, covered).some((p) => p.partition === c.partition));
          seen.push(...ends);
          rest = rest.slice(covered);
        }
        assert.deepEqual(seen, parts.map((p) => p.partition));
        await sim.close();
      }),
      { numRuns: 20 },
    );
  });

  it("the state bytes sent count every chunk handed out, also of a stream that ends early", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 1, seed: 5, faults: NO_FAULTS, stateChunkEntries: 4 });
    await sim.add("a", "k", Array.from({ length: 40 }, (_, i) => b(`e${i}`)));
    const x = sim.exchange("a");
    const before = x.engine.counters.bytesSent.state;
    const stream = x.stateStream([{ partition: 0, seq: x.engine.seq(0) }]);
    const first = await stream.next();
    const second = await stream.next();
    assert.ok(!first.done && !second.done, "a 40-element set in chunks of 4 takes several chunks");
    // The receiver went away: the stream is closed after two chunks, inside its only partition.
    await stream.return(0);
    const handedOut = (first.value.slice?.payload.length ?? 0) + (second.value.slice?.payload.length ?? 0);
    assert.ok(handedOut > 0);
    assert.equal(x.engine.counters.bytesSent.state - before, handedOut);
    await sim.close();
  });

  it("a wiped node gets everything back over many small streams, and every partition's ack comes back", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 16, seed: 3, faults: NO_FAULTS, stateChunkEntries: 8, stateStreamBytes: 64 });
    const keys = Array.from({ length: 40 }, (_, k) => `k${k}`);
    for (const [k, key] of keys.entries()) await sim.add(["a", "b"][k % 2]!, key, Array.from({ length: 12 }, (_, i) => b(`e${k}-${i}`)));
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    for (let i = 0; i < 5; i++) await sim.step();
    const streamsBefore = sim.traffic.stateStreams;
    await sim.restart("c", { wipe: true });
    assert.notEqual(await sim.runUntilConverged(100), -1, "the wiped node did not get everything back");
    for (const [k, key] of keys.entries()) assert.equal((await sim.elementsOf("c", key)).length, 12, `c lacks elements of ${key} (${k})`);
    const withData = new Set(keys.map((k) => sim.partitionOf(k))).size;
    assert.ok(sim.traffic.stateStreams - streamsBefore >= withData, `streams: ${sim.traffic.stateStreams - streamsBefore} for ${withData} partitions holding data`);
    // Every stream was answered: the senders hold c caught up everywhere, so no full state is planned again.
    for (let i = 0; i < 5; i++) await sim.step();
    for (const id of ["a", "b"]) {
      const x = sim.exchange(id);
      for (let p = 0; p < 16; p++) assert.equal(x.engine.ackOf(p, "c"), x.engine.seq(p), `${id}'s ack of c in partition ${p}`);
    }
    const settled = sim.traffic.stateStreams;
    await sim.add("a", "k0", [b("late")]);
    assert.notEqual(await sim.runUntilConverged(50), -1);
    assert.equal(sim.traffic.stateStreams, settled, "a write after the catch-up went by full state");
    await sim.close();
  });
});

describe("StallTimer", () => {
  it("fires once when nothing moved for its period, however long the transfer ran before", () => {
    mock.timers.enable({ apis: ["setTimeout"] });
    let now = 0;
    let fired = 0;
    try {
      const t = new StallTimer(1000, () => fired++, () => now);
      // Moving every 600 ms for 10 s: never still for 1000 ms.
      for (let i = 0; i < 16; i++) {
        now += 600;
        mock.timers.tick(600);
        t.moved();
      }
      assert.equal(fired, 0);
      now += 999;
      mock.timers.tick(999);
      assert.equal(fired, 0, "fired before the period was over");
      now += 1;
      mock.timers.tick(1);
      assert.equal(fired, 1);
      now += 5000;
      mock.timers.tick(5000);
      assert.equal(fired, 1, "fired twice");
    } finally {
      mock.timers.reset();
    }
  });

  it("never fires once stopped", () => {
    mock.timers.enable({ apis: ["setTimeout"] });
    let now = 0;
    let fired = 0;
    try {
      const t = new StallTimer(100, () => fired++, () => now);
      now += 50;
      mock.timers.tick(50);
      t.stop();
      now += 1000;
      mock.timers.tick(1000);
      assert.equal(fired, 0);
    } finally {
      mock.timers.reset();
    }
  });
});
