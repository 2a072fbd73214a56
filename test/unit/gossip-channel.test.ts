// The seeded lossy channel of the simulator: loss, duplication, reordering, determinism.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { LossyChannel, seededRandom, shuffled, randomConnectedTopology, isConnected, enesPartialMesh, enesTree } from "../../services/gossip/index.js";

function drain(ch: LossyChannel<number>): number[] {
  const out: number[] = [];
  for (let e = ch.popBefore(Infinity); e !== undefined; e = ch.popBefore(Infinity)) out.push(e.msg);
  return out;
}

describe("LossyChannel", () => {
  it("without faults delivers everything once, in send order", () => {
    const ch = new LossyChannel<number>(seededRandom(1));
    for (let i = 0; i < 100; i++) ch.send(0, "a", "b", i);
    assert.deepEqual(drain(ch), [...Array(100).keys()]);
  });

  it("drops and duplicates at about the configured rates", () => {
    const ch = new LossyChannel<number>(seededRandom(2), { drop: 0.3, duplicate: 0.2, minDelay: 0, maxDelay: 0 });
    const n = 20000;
    for (let i = 0; i < n; i++) ch.send(0, "a", "b", i);
    assert.ok(Math.abs(ch.stats.dropped / n - 0.3) < 0.02, `dropped ${ch.stats.dropped}`);
    assert.ok(Math.abs(ch.stats.duplicated / (n - ch.stats.dropped) - 0.2) < 0.02, `duplicated ${ch.stats.duplicated}`);
    assert.equal(drain(ch).length, n - ch.stats.dropped + ch.stats.duplicated);
  });

  it("random delays reorder messages; deliveries respect the time bound", () => {
    const ch = new LossyChannel<number>(seededRandom(3), { drop: 0, duplicate: 0, minDelay: 0, maxDelay: 50 });
    for (let i = 0; i < 100; i++) ch.send(i, "a", "b", i);
    const early: number[] = [];
    for (let e = ch.popBefore(60); e !== undefined; e = ch.popBefore(60)) {
      assert.ok(e.deliverAt < 60 && e.deliverAt >= e.sentAt);
      early.push(e.msg);
    }
    const rest = drain(ch);
    const all = [...early, ...rest];
    assert.equal(all.length, 100);
    assert.notDeepEqual(all, [...Array(100).keys()], "some messages overtook others");
    assert.ok(early.every((m) => m < 60));
  });

  it("is deterministic for a seed", () => {
    const run = (seed: number) => {
      const ch = new LossyChannel<number>(seededRandom(seed), { drop: 0.2, duplicate: 0.2, minDelay: 1, maxDelay: 9 });
      for (let i = 0; i < 200; i++) ch.send(i, "a", "b", i);
      return drain(ch);
    };
    assert.deepEqual(run(7), run(7));
    assert.notDeepEqual(run(7), run(8));
  });

  it("dropTo loses what is in flight to a node", () => {
    const ch = new LossyChannel<number>(seededRandom(4));
    ch.send(0, "a", "b", 1);
    ch.send(0, "a", "c", 2);
    assert.equal(ch.dropTo("b"), 1);
    assert.deepEqual(drain(ch), [2]);
  });

  it("rejects nonsense fault settings", () => {
    assert.throws(() => new LossyChannel(seededRandom(1), { drop: 1.5, duplicate: 0, minDelay: 0, maxDelay: 0 }), RangeError);
    assert.throws(() => new LossyChannel(seededRandom(1), { drop: 0, duplicate: 0, minDelay: 5, maxDelay: 1 }), RangeError);
  });
});

describe("topologies", () => {
  it("random topologies are connected, symmetric, with about the asked degree", () => {
    const ids = shuffled(seededRandom(5), Array.from({ length: 50 }, (_, i) => `n${i}`));
    const t = randomConnectedTopology(seededRandom(6), ids, 4);
    assert.ok(isConnected(t));
    let degree = 0;
    for (const [a, ns] of t) {
      degree += ns.length;
      for (const b of ns) assert.ok(t.get(b)!.includes(a));
    }
    assert.equal(degree / 50, 4);
  });

  it("the Enes et al. overlays: a 4-regular partial mesh and a 15-node tree", () => {
    const ids = Array.from({ length: 15 }, (_, i) => String(i).padStart(2, "0"));
    const mesh = enesPartialMesh(ids);
    assert.ok([...mesh.values()].every((ns) => ns.length === 4));
    assert.deepEqual(mesh.get("00"), ["01", "04", "11", "14"]);
    const tree = enesTree(ids);
    const edges = [...tree.values()].reduce((n, ns) => n + ns.length, 0) / 2;
    assert.equal(edges, 14);
    assert.ok(isConnected(tree) && isConnected(mesh));
    assert.ok([...tree.values()].every((ns) => ns.length <= 3));
  });
});
