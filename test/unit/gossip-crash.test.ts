// Crash and restart in simulation, with the node's own persistence policy (durable-seq.ts: seqs
// persisted lazily before each tick's frames leave, restart one past the persisted value) and its
// boot-id rule (peer-boots.ts). An add taken just before a crash, with no tick in between, must
// still reach every node; a node that comes back with a wiped data directory before anyone
// noticed must receive everything again; a large catch-up is forwarded by full state.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { GossipSimulation, NO_FAULTS, seqsAfterRestart } from "../../services/gossip/index.js";
import { AntiEntropyEngine, PayloadKind } from "../../services/gossip/engine.js";
import type { PayloadOps } from "../../services/gossip/payload.js";

const b = (s: string) => Buffer.from(s);
const ring3 = new Map([
  ["a", ["b", "c"]],
  ["b", ["a", "c"]],
  ["c", ["a", "b"]],
]);
const alg2 = { algorithm: 2 as const, bp: true, rr: true };

describe("crash invariant (simulation, the node's persistence policy)", () => {
  it("restarts every partition one past its persisted seq", () => {
    assert.deepEqual(seqsAfterRestart(new Map([[1, 7]]), 3), [1, 8, 1]);
  });

  it("an add acknowledged just before a crash (no tick in between) reaches every node", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 0, max: 20 }), fc.constantFrom("a", "b", "c"), (seed, warm, victim) => {
        const sim = new GossipSimulation({ topology: ring3, sync: alg2, partitions: 8, seed, faults: NO_FAULTS });
        for (let i = 0; i < warm; i++) sim.step();
        // A key of a partition that never held anything: its persisted seq is still 0.
        sim.add(victim, `fresh-${seed}`, [b("x")]);
        sim.restart(victim);
        assert.notEqual(sim.runUntilConverged(50), -1, "did not converge");
        for (const id of sim.nodeIds) assert.deepEqual(sim.elementsOf(id, `fresh-${seed}`), ["x"], `${id} lacks the add`);
      }),
      { numRuns: 60 },
    );
  });

  it("a node back with a wiped data directory before anyone noticed receives everything again", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.constantFrom("a", "b", "c"), (seed, victim) => {
        const sim = new GossipSimulation({ topology: ring3, sync: alg2, partitions: 8, seed, faults: NO_FAULTS });
        for (let k = 0; k < 6; k++) sim.add(["a", "b", "c"][k % 3]!, `k${k}`, [b(`v${k}`)]);
        assert.notEqual(sim.runUntilConverged(50), -1);
        for (let i = 0; i < 5; i++) sim.step(); // every ack has come back: the peers look caught up
        sim.restart(victim, { wipe: true });
        assert.notEqual(sim.runUntilConverged(50), -1, "did not converge");
        for (let k = 0; k < 6; k++) assert.deepEqual(sim.elementsOf(victim, `k${k}`), [`v${k}`]);
      }),
      { numRuns: 40 },
    );
  });
});

// A payload of plain numbers joined by max is enough to drive the engine alone.
const maxOps: PayloadOps<number> = { bottom: () => 0, join: Math.max, isBottom: (p) => p === 0, sizeBytes: () => 8 };

describe("large catch-ups and restarted peers (engine)", () => {
  const engine = (bp: boolean) =>
    new AntiEntropyEngine<number>({
      self: "me",
      ops: maxOps,
      random: () => 0,
      sync: { algorithm: 2, bp, rr: true, fanout: "all" },
      partitions: 1,
      neighbours: ["src", "other"],
    });

  /** Bring both neighbours' acks up to c, so they look caught up. */
  function catchUp(e: AntiEntropyEngine<number>): void {
    e.local(0, 1);
    for (const to of ["src", "other"]) e.onAcks(to, [{ partition: 0, seq: e.seq(0) }]);
    assert.equal(e.ackOf(0, "other"), e.seq(0));
  }

  it("a received state too big to buffer reaches the other neighbours by full state", () => {
    for (const bp of [true, false]) {
      const e = engine(bp);
      catchUp(e);
      assert.deepEqual(e.tick(0), [], "caught up: nothing to send");
      e.onFrame("src", [{ partition: 0, kind: PayloadKind.STATE, seq: 9, tooLarge: true }]);
      assert.equal(e.counters.largeCatchUps, 1);
      const frames = new Map(e.tick(1).map((f) => [f.to, f.items.map((i) => i.kind)]));
      assert.deepEqual(frames.get("other"), [PayloadKind.STATE], `bp=${bp}: the other neighbour gets full state`);
      // With BP the hole came from src: src is not sent its own catch-up back.
      assert.deepEqual(frames.get("src"), bp ? undefined : [PayloadKind.STATE], `bp=${bp}: the source`);
    }
  });

  it("a restarted neighbour's acks go back to 0: it gets full state", () => {
    const e = engine(true);
    assert.equal(e.noticeBoot("other", 11n), false, "the first boot id seen is no restart");
    catchUp(e);
    assert.equal(e.noticeBoot("other", 11n), false);
    assert.equal(e.noticeBoot("other", 0n), false, "0: boot id unknown");
    assert.equal(e.ackOf(0, "other"), e.seq(0));
    assert.equal(e.noticeBoot("other", 12n), true);
    assert.equal(e.ackOf(0, "other"), 0);
    assert.equal(e.counters.peerRestarts, 1);
  });

  it("transitive Algorithm 1 ships full state the period after a large catch-up", () => {
    for (const transitive of [true, false]) {
      const e = new AntiEntropyEngine<number>({ self: "me", ops: maxOps, random: () => 0, sync: { algorithm: 1, transitive, choose: "delta" }, partitions: 1, neighbours: ["src", "other"] });
      e.onFrame("src", [{ partition: 0, kind: PayloadKind.STATE, seq: 0, tooLarge: true }]);
      const kinds = e.tick(0).map((f) => f.items.map((i) => i.kind));
      assert.deepEqual(kinds, transitive ? [[PayloadKind.STATE], [PayloadKind.STATE]] : [], `transitive=${transitive}`);
      assert.deepEqual(e.tick(1), [], "only once");
    }
  });
});
