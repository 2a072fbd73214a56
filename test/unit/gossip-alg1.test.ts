// Algorithm 1 bookkeeping: delta-group, transitive mode, choose, and why a non-transitive
// Algorithm 1 on a partial mesh needs periodic full state.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { GossipSimulation } from "../../services/gossip/index.js";
import { S, alg1, delta, items, summary } from "./gossip-helpers.js";

describe("Algorithm 1", () => {
  it("joins local deltas into D, ships D to every neighbour, then resets D", () => {
    const e = alg1();
    assert.equal(e.local(0, S("x")), 0);
    e.local(0, S("y"));
    assert.deepEqual(items(e.deltaGroup(0)), ["x", "y"]);
    assert.deepEqual(summary(e.tick(0)), {
      b: [[0, "delta", 0, ["x", "y"]]],
      c: [[0, "delta", 0, ["x", "y"]]],
    });
    assert.deepEqual(items(e.deltaGroup(0)), []);
    assert.deepEqual(e.tick(1), [], "D = ⊥ after shipping: nothing to send");
  });

  it("a neighbour left out of a tick gets no frame; a full state it missed is owed next period", () => {
    const e = alg1({ choose: "delta+periodic-state", statePeriod: 5 }, { partitions: 1 });
    assert.deepEqual(summary(e.tick(0, { skip: (id) => id === "b" })), { c: [[0, "state", 0, []]] }, "period 0 ships state");
    assert.deepEqual(summary(e.tick(1)).b, [[0, "state", 0, []]], "b missed it: owed at once, not 5 periods later");
    assert.deepEqual(e.tick(2), []);
    const d = alg1({ choose: "delta" }, { partitions: 1 });
    d.local(0, S("x"));
    assert.deepEqual(summary(d.tick(0, { skip: (id) => id === "b" })), { c: [[0, "delta", 0, ["x"]]] });
    assert.equal(d.counters.framesSent, 1);
  });

  it("transitive mode forwards what was received (the new part); non-transitive does not", () => {
    const t = alg1({ transitive: true });
    assert.deepEqual(t.onFrame("b", [delta(0, 0, S("q"))]), [], "no acks under Algorithm 1");
    t.onFrame("b", [delta(0, 0, undefined)]);
    assert.deepEqual(summary(t.tick(0)), {
      b: [[0, "delta", 0, ["q"]]],
      c: [[0, "delta", 0, ["q"]]],
    });
    const n = alg1({ transitive: false });
    n.onFrame("b", [delta(0, 0, S("q"))]);
    assert.deepEqual(n.tick(0), []);
  });

  it("choose = state ships a full-state instruction for every partition every period", () => {
    const e = alg1({ choose: "state" }, { partitions: 3 });
    e.local(1, S("x"));
    for (let t = 0; t < 3; t++) {
      assert.deepEqual(summary(e.tick(t)).b, [
        [0, "state", 0, []],
        [1, "state", 0, []],
        [2, "state", 0, []],
      ]);
    }
  });

  it("choose = delta+periodic-state: each partition ships state every k periods, in turn", () => {
    const e = alg1({ choose: "delta+periodic-state", statePeriod: 3 }, { partitions: 2 });
    const kinds: string[][] = [];
    for (let t = 0; t < 6; t++) {
      e.local(0, S(`x${t}`));
      e.local(1, S(`y${t}`));
      kinds.push(summary(e.tick(t)).b!.map(([p, kind]) => `${p}${kind[0]}`));
    }
    // Partition p ships state when (t + p) mod 3 = 0, and its delta-group every period (on a state
    // turn too: a state the transport must defer then delays nothing new).
    assert.deepEqual(kinds, [
      ["0s", "0d", "1d"],
      ["0d", "1d"],
      ["0d", "1s", "1d"],
      ["0s", "0d", "1d"],
      ["0d", "1d"],
      ["0d", "1s", "1d"],
    ]);
  });

  it("a state the caller could not send is owed: the next period ships it", () => {
    const e = alg1({ choose: "delta+periodic-state", statePeriod: 10 }, { partitions: 2 });
    for (let t = 0; t < 9; t++) e.tick(t);
    e.local(1, S("y"));
    // The tenth period (9): partition 1's turn ((9 + 1) mod 10 = 0); the caller defers that state.
    assert.deepEqual(summary(e.tick(9)).b!.map(([p, kind]) => `${p}${kind[0]}`), ["1s", "1d"]);
    e.statesNotSent([1]);
    assert.deepEqual(summary(e.tick(10)).b!.map(([p, kind]) => `${p}${kind[0]}`), ["0s", "1s"]);
    assert.deepEqual(summary(e.tick(11)).b ?? [], []);
  });

  it("rejects bad options", () => {
    assert.throws(() => alg1({ choose: "delta+periodic-state", statePeriod: 0 }), RangeError);
    assert.throws(() => alg1({}, { partitions: 0 }), RangeError);
  });
});

describe("Algorithm 1 on a partial mesh", () => {
  // Line a - b - c: a and c are not neighbours. Non-transitive Algorithm 1 ships only local
  // deltas, and only to neighbours, so c can learn a's update only from a full state of b.
  // Without periodic state it never does, even on a perfect network; with it, it does.
  const line = new Map([
    ["a", ["b"]],
    ["b", ["a", "c"]],
    ["c", ["b"]],
  ]);
  const run = async (choose: "delta" | "delta+periodic-state", transitive: boolean) => {
    const sim = await GossipSimulation.create({
      topology: line,
      sync: { algorithm: 1, transitive, choose, statePeriod: 4 },
      partitions: 1,
      seed: 3,
    });
    await sim.add("a", "k", [Buffer.from("x")]);
    for (let i = 0; i < 12; i++) await sim.step();
    return sim;
  };

  it("non-transitive with deltas only never reaches a non-neighbour", async () => {
    const sim = await run("delta", false);
    assert.deepEqual(await sim.elementsOf("b", "k"), ["x"]);
    assert.deepEqual(await sim.elementsOf("c", "k"), []);
    assert.equal(await sim.converged(), false);
  });

  it("non-transitive with periodic state converges", async () => {
    const sim = await run("delta+periodic-state", false);
    assert.deepEqual(await sim.elementsOf("c", "k"), ["x"]);
    assert.ok(await sim.converged());
  });

  it("transitive with deltas only converges on a perfect network", async () => {
    const sim = await run("delta", true);
    assert.deepEqual(await sim.elementsOf("c", "k"), ["x"]);
    assert.ok(await sim.converged());
  });
});
