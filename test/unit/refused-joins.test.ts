// A counter join refused because the sum would leave int64 is not lost to the replicas: the
// refusing node acknowledges it (so its sender sends it no more) and holds it, and joins it once a
// change of the key brings it back in range, then spreads it. Run in the simulator (the node's own
// exchange and store), and on the holding structure alone for its bound.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { CounterLattice, INT64_MAX, ObjectType, PNCounter } from "../../services/crdt/index.ts";
import { GossipSimulation, NO_FAULTS } from "../../services/gossip/index.ts";
import { RefusedJoins } from "../../services/gossip/refused-joins.ts";
import { ALG2_BP_RR, RING3 } from "./gossip-helpers.ts";

const KEY = "total";
/** With 1000 more it overflows; 5000 less, and the 1000 fit again. */
const BIG = INT64_MAX - 807n;

async function increment(sim: GossipSimulation, id: string, amount: bigint): Promise<void> {
  const replica = sim.store(id).replicaId;
  await sim.mutate<PNCounter>(id, KEY, ObjectType.COUNTER, (c) => c.incrementDelta(replica, amount));
}

async function values(sim: GossipSimulation): Promise<bigint[]> {
  return Promise.all(sim.nodeIds.map(async (id) => (await sim.stateOf<PNCounter>(id, KEY, ObjectType.COUNTER)).value()));
}

async function refusedEverywhere(sim: GossipSimulation): Promise<{ held: number; refusedJoins: number }> {
  let held = 0;
  let refusedJoins = 0;
  for (const id of sim.nodeIds) {
    held += sim.transport(id).refusedJoinsHeld;
    refusedJoins += sim.store(id).stats().counterJoinsRefused;
  }
  return { held, refusedJoins };
}

/** A +BIG and B +1000 at once: every node refuses one of the two and keeps its own value. */
async function overflowTogether(seed: number): Promise<GossipSimulation> {
  const sim = await GossipSimulation.create({ topology: RING3, sync: ALG2_BP_RR, partitions: 4, seed, faults: NO_FAULTS });
  await increment(sim, "a", BIG);
  await increment(sim, "b", 1000n);
  for (let i = 0; i < 10; i++) await sim.step();
  const r = await refusedEverywhere(sim);
  assert.ok(r.held >= 3, `every node held a refusal (${r.held})`);
  const [a, b, c] = await values(sim);
  assert.deepEqual([a, b], [BIG, 1000n], "a refused b's increment, b refused a's");
  assert.ok(c === BIG || c === 1000n, "c joined the first to arrive and refused the other");
  return sim;
}

describe("refused counter joins (simulation)", () => {
  for (const [who, seed] of [["a", 3], ["b", 5], ["c", 8]] as const) {
    it(`a decrement at ${who} that brings the sum back in range makes every replica converge, with no other write`, async () => {
      const sim = await overflowTogether(seed);
      await increment(sim, who, -5000n);
      const rounds = await sim.runUntilConverged(10);
      assert.notEqual(rounds, -1, `did not converge: ${(await values(sim)).join(", ")}`);
      assert.deepEqual(await values(sim), [BIG - 4000n, BIG - 4000n, BIG - 4000n]);
      let joined = 0;
      for (const id of sim.nodeIds) joined += sim.transport(id).refusedJoinsJoined;
      assert.ok(joined >= 1);
      await sim.close();
    });
  }

  it("a key whose sum stays out of range costs no traffic and no join attempt while nothing changes", async () => {
    const sim = await overflowTogether(13);
    const before = { ...(await refusedEverywhere(sim)), bytes: sim.traffic.deltaPayloadBytes + sim.traffic.statePayloadBytes };
    for (let i = 0; i < 30; i++) await sim.step();
    const after = await refusedEverywhere(sim);
    assert.equal(sim.traffic.deltaPayloadBytes + sim.traffic.statePayloadBytes, before.bytes, "no payload sent");
    assert.equal(after.refusedJoins, before.refusedJoins, "no join tried again");
    // A change that leaves it out of range: one more try at each node holding it, and still apart.
    const c = (await values(sim))[2];
    await increment(sim, "a", 1n);
    for (let i = 0; i < 10; i++) await sim.step();
    assert.deepEqual(await values(sim), [BIG + 1n, 1000n, c === BIG ? BIG + 1n : 1000n]);
    const tried = (await refusedEverywhere(sim)).refusedJoins - after.refusedJoins;
    assert.ok(tried >= 1 && tried <= 6, `tries after one change: ${tried}`);
    await sim.close();
  });

  it("a node restarted while holding a refusal (losing it) still converges with the others after a decrement", async () => {
    const sim = await overflowTogether(21);
    await sim.restart("c");
    for (let i = 0; i < 10; i++) await sim.step();
    await increment(sim, "a", -5000n);
    assert.notEqual(await sim.runUntilConverged(10), -1, `did not converge: ${(await values(sim)).join(", ")}`);
    assert.deepEqual(await values(sim), [BIG - 4000n, BIG - 4000n, BIG - 4000n]);
    await sim.close();
  });
});

describe("refused counter joins of a full-state stream (simulation, two nodes)", () => {
  it("a node restarted while holding a refusal holds it again from its neighbour's full state, and joins it on its own decrement", async () => {
    const pair = new Map([["a", ["b"]], ["b", ["a"]]]);
    const sim = await GossipSimulation.create({ topology: pair, sync: ALG2_BP_RR, partitions: 4, seed: 2, faults: NO_FAULTS });
    await increment(sim, "a", BIG);
    await increment(sim, "b", 1000n);
    for (let i = 0; i < 10; i++) await sim.step();
    assert.deepEqual(await values(sim), [BIG, 1000n]);
    // What a held is lost with the restart; b's full state, the only other copy of b's increment,
    // brings it back, and a refuses and holds it again.
    await sim.restart("a");
    for (let i = 0; i < 10; i++) await sim.step();
    assert.ok(sim.transport("a").stateStreamsReceived > 0, "a received b's full state");
    assert.equal(sim.transport("a").refusedJoinsHeld, 1);
    // b joins a's decrement, which carries a's totals, directly: only a can bring b's 1000 to a.
    await increment(sim, "a", -5000n);
    assert.notEqual(await sim.runUntilConverged(10), -1, `did not converge: ${(await values(sim)).join(", ")}`);
    assert.deepEqual(await values(sim), [BIG - 4000n, BIG - 4000n]);
    await sim.close();
  });
});

describe("RefusedJoins", () => {
  const counter = (replica: string, amount: bigint) => PNCounter.bottom().incrementDelta(replica, amount);

  it("holds the join of a key's refusals within its byte bound, and tries a key again only once it changed", () => {
    const one = CounterLattice.encodedSize(counter("z", 1n));
    const both = CounterLattice.encodedSize(CounterLattice.join(counter("x", 5n), counter("y", 7n)));
    const r = new RefusedJoins(both + one - 1);
    assert.equal(r.hold("k1", ObjectType.COUNTER, counter("x", 5n), "b", false), true);
    assert.deepEqual(r.takeDue(), [], "not due before its key changes");
    r.changed("other");
    assert.deepEqual(r.takeDue(), []);
    r.changed("k1");
    const [h] = r.takeDue();
    assert.equal(h?.key, "k1");
    assert.deepEqual(r.takeDue(), [], "taken once");
    // A second refusal of k1 joins into what is held: both replicas' entries.
    assert.equal(r.hold("k1", ObjectType.COUNTER, counter("y", 7n), "c", true), true);
    assert.equal(r.size, 1);
    // Released after a try that began before that refusal: the newer one stays, due.
    r.release(h!);
    const [h2] = r.takeDue();
    assert.equal((h2!.state as PNCounter).value(), 12n);
    // Past the bound: not held, and what was held stays.
    assert.equal(r.hold("k2", ObjectType.COUNTER, counter("z", 1n), "b", false), false);
    assert.equal(r.size, 1);
    r.release(h2!);
    assert.equal(r.size, 0);
    assert.equal(r.bytes, 0);
    assert.equal(new RefusedJoins(0).hold("k", ObjectType.COUNTER, counter("x", 1n), "b", true), false);
  });
});
