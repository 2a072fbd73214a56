// The engine with placement (setPartitionPeers): each partition is exchanged only with the peers
// its list names, garbage collection waits only for them, and a peer that leaves a partition's
// list and comes back starts over from ack 0.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { S, alg1, alg2, summary } from "./gossip-helpers.js";
import { Ownership } from "../../services/gossip/ownership.ts";

describe("engine placement: partitions exchanged with their peers only", () => {
  it("sends each partition only to the neighbours in its list (Algorithm 2)", () => {
    const e = alg2({}, { partitions: 2, neighbours: ["b", "c", "d"] });
    e.setPartitionPeers((p) => (p === 0 ? ["a", "b"] : ["c", "d"]));
    e.local(0, S("x"));
    e.local(1, S("y"));
    assert.deepEqual(summary(e.tick(0)), {
      b: [[0, "delta", 1, ["x"]]],
      c: [[1, "delta", 1, ["y"]]],
      d: [[1, "delta", 1, ["y"]]],
    });
    assert.deepEqual(e.peersOf(0), ["b"]);
  });

  it("a partition no peer exchanges holds no delta; the others buffer as before", () => {
    const e = alg2({}, { partitions: 2, neighbours: ["b"] });
    e.setPartitionPeers((p) => (p === 0 ? ["a"] : ["a", "b"]));
    e.local(0, S("x"));
    e.local(1, S("y"));
    assert.equal(e.buffered(0).length, 0);
    assert.equal(e.buffered(1).length, 1);
    assert.deepEqual(summary(e.tick(0)), { b: [[1, "delta", 1, ["y"]]] });
  });

  it("collects a partition's deltas once its own peers acked them, whoever else never did", () => {
    const e = alg2({}, { partitions: 1, neighbours: ["b", "c"] });
    e.setPartitionPeers(() => ["b"]);
    e.local(0, S("x"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.gc();
    assert.equal(e.buffered(0).length, 0);
    // c is not a peer of partition 0: its acks there are ignored.
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    assert.equal(e.ackOf(0, "c"), 0);
  });

  it("a peer that leaves a partition's list and comes back gets the partition's full state", () => {
    const e = alg2({}, { partitions: 1, neighbours: ["b", "c"] });
    e.local(0, S("x"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    e.setPartitionPeers(() => ["b"]);
    assert.equal(e.ackOf(0, "c"), 0, "forgotten on leaving");
    e.local(0, S("y"));
    e.onAcks("b", [{ partition: 0, seq: 2 }]);
    e.gc();
    e.setPartitionPeers(() => ["b", "c"]);
    assert.deepEqual(summary(e.tick(0)), { c: [[0, "state", 2, []]] });
  });

  it("picks the random neighbour of a period among those that share a partition", () => {
    const e = alg2({ fanout: "random" }, { partitions: 2, neighbours: ["b", "c", "d", "f"] });
    e.setPartitionPeers((p) => (p === 0 ? ["b"] : ["c"]));
    const seen = new Set<string>();
    for (let t = 0; t < 40; t++) {
      e.local(t % 2, S(`v${t}`));
      for (const f of e.tick(t)) seen.add(f.to);
    }
    assert.deepEqual([...seen].sort(), ["b", "c"]);
  });

  it("filters Algorithm 1's frames the same way, and undefined restores every neighbour", () => {
    const e = alg1({}, { partitions: 2, neighbours: ["b", "c"] });
    e.setPartitionPeers((p) => (p === 0 ? ["b"] : []));
    e.local(0, S("x"));
    e.local(1, S("y"));
    assert.deepEqual(summary(e.tick(0)), { b: [[0, "delta", 0, ["x"]]] });
    e.setPartitionPeers(undefined);
    e.local(1, S("z"));
    assert.deepEqual(summary(e.tick(1)), { b: [[1, "delta", 0, ["z"]]], c: [[1, "delta", 0, ["z"]]] });
  });
});

describe("Ownership of a leaving node", () => {
  const view = (self: string, factor: 1 | 2) => {
    const own = new Ownership(self, `${self}:1`, 64, factor);
    own.setLive(new Map(["a", "b", "c", "d"].filter((id) => id !== self).map((id) => [id, `${id}:1`])));
    return own;
  };

  it("owns nothing, and a partition's peers are its owners once it is gone", () => {
    for (const factor of [1, 2] as const) {
      const a = view("a", factor);
      const after = new Ownership("b", "b:1", 64, factor);
      after.setLive(new Map([["c", "c:1"], ["d", "d:1"]]));
      const held = a.owned();
      assert.ok(held.length > 0);
      a.startLeaving();
      assert.deepEqual(a.owned(), []);
      for (let p = 0; p < 64; p++) assert.deepEqual(a.peersOf(p), [...after.ownersOf(p)], `partition ${p}, R = ${factor}`);
    }
  });

  it("its next owners take its partitions from it, and only from it", () => {
    const a = view("a", 1);
    const b = view("b", 1);
    const fromA = a.owned();
    a.startLeaving();
    // b takes every partition whose owners without a include b, from a only.
    for (const p of fromA) {
      const next = a.peersOf(p);
      assert.equal(b.ownsOnceGone(p, "a"), next.includes("b"));
      // Without c instead, b would own p only if p had been c's or b's: a is still there to own it.
      if (!b.owns(p)) assert.equal(b.ownsOnceGone(p, "c"), false, "b takes a's partition from a sender that is not its owner");
    }
  });
});

describe("Ownership: where a read finds a partition that moved", () => {
  /** A partition that {x, n1, n2, c} rank n2, n1, x (with R = 1, each join takes it from the last). */
  function rankedPartition(): number {
    const probe = new Ownership("c", "c:1", 64, 1);
    probe.setLive(new Map(["x", "n1", "n2"].map((id) => [id, `${id}:1`])));
    const drop = (id: string) => {
      const o = new Ownership("c", "c:1", 64, 1);
      o.setLive(new Map(["x", "n1", "n2"].filter((m) => m !== id).map((m) => [m, `${m}:1`])));
      return o;
    };
    for (let p = 0; p < 64; p++) {
      if (probe.ownersOf(p)[0] === "n2" && drop("n2").ownersOf(p)[0] === "n1") {
        const without = new Ownership("c", "c:1", 64, 1);
        without.setLive(new Map([["x", "x:1"]]));
        if (without.ownersOf(p)[0] === "x") return p;
      }
    }
    throw new Error("no such partition");
  }

  it("names every owner it had within the window, not only the last change's, latest first", () => {
    const p = rankedPartition();
    const o = new Ownership("c", "c:1", 64, 1);
    o.setLive(new Map([["x", "x:1"]]), "c:1", 1_000);
    assert.deepEqual(o.ownersOf(p), ["x"]);
    o.setLive(new Map([["x", "x:1"], ["n1", "n1:1"]]), "c:1", 60_000); // n1 joins: p moves x → n1
    o.setLive(new Map([["x", "x:1"], ["n1", "n1:1"], ["n2", "n2:1"]]), "c:1", 61_000); // n2 joins: n1 → n2
    // x still holds p: each change delays its hand-off.
    assert.deepEqual(o.readAddresses(p, 61_000 - 30_000).map((t) => t.nodeId), ["n2", "n1", "x"]);
    // Outside the window only what moved since.
    assert.deepEqual(o.readAddresses(p, 60_500).map((t) => t.nodeId), ["n2", "n1"]);
    // A former owner that left the members is not named.
    o.setLive(new Map([["n1", "n1:1"], ["n2", "n2:1"]]), "c:1", 62_000);
    assert.deepEqual(o.readAddresses(p, 0).map((t) => t.nodeId), ["n2", "n1"]);
  });
});

describe("Ownership: whom a read fetches from after this node came to own a partition", () => {
  const live = (...ids: string[]) => new Map(ids.map((id) => [id, `${id}:1`]));
  /** A partition c does not own (R = 2) among c, n1, n2, n3 and owns once n3 is gone. */
  function gainedWhenN3Goes(): number {
    for (let p = 0; p < 64; p++) {
      const before = new Ownership("c", "c:1", 64, 2);
      before.setLive(live("n1", "n2", "n3"));
      const after = new Ownership("c", "c:1", 64, 2);
      after.setLive(live("n1", "n2"));
      if (!before.owns(p) && after.owns(p) && before.ownersOf(p).includes("n3")) return p;
    }
    throw new Error("no such partition");
  }

  it("names the owners before the change that gave it the partition that are still members, until each sent it whole, within the window", () => {
    const p = gainedWhenN3Goes();
    const o = new Ownership("c", "c:1", 64, 2);
    o.setLive(live("n1", "n2", "n3"), "c:1", 1_000);
    assert.equal(o.owns(p), false);
    assert.deepEqual(o.pullFrom(p, 0), [], "not owned: nothing to fetch");
    const stays = o.ownersOf(p).filter((id) => id !== "n3");
    assert.equal(stays.length, 1);
    o.setLive(live("n1", "n2"), "c:1", 50_000); // n3 goes: c takes its place
    assert.equal(o.owns(p), true);
    assert.equal(o.gainedAt(p), 50_000);
    // The owner that stays; not n3, which is gone.
    assert.deepEqual(o.pullFrom(p, 20_000).map((t) => t.nodeId), stays);
    assert.deepEqual(o.pullFrom(p, 50_001), [], "outside the window: nothing");
    // A later change that leaves it the owner (a member it outranks joins) keeps whom it fetches from.
    const joiner = ["n4", "n5", "n6", "n7", "n8"].find((id) => {
      const t = new Ownership("c", "c:1", 64, 2);
      t.setLive(live("n1", "n2", id));
      return t.owns(p);
    })!;
    o.setLive(live("n1", "n2", joiner), "c:1", 51_000);
    assert.equal(o.owns(p), true);
    assert.equal(o.gainedAt(p), 50_000);
    assert.deepEqual(o.pullFrom(p, 20_000).map((t) => t.nodeId), stays);
    // Partitions owned from the start are never fetched.
    for (const q of o.owned()) if (o.gainedAt(q) === Number.NEGATIVE_INFINITY) assert.deepEqual(o.pullFrom(q, 0), []);
  });

  it("fetches nothing further from a holder once it sent the partition whole in a stream begun since the gain", () => {
    const p = gainedWhenN3Goes();
    const o = new Ownership("c", "c:1", 64, 2);
    o.setLive(live("n1", "n2", "n3"), "c:1", 1_000);
    o.setLive(live("n1", "n2"), "c:1", 50_000);
    const [holder] = o.pullFrom(p, 0);
    o.receivedWhole(p, "n9", 50_100); // not a holder: nothing changes
    assert.equal(o.pullFrom(p, 0).length, 1);
    // A stream whose first chunk came before the gain does not say this node holds it all.
    o.receivedWhole(p, holder!.nodeId, 49_999);
    assert.equal(o.pullFrom(p, 0).length, 1);
    o.receivedWhole(p, holder!.nodeId, 50_000);
    assert.deepEqual(o.pullFrom(p, 0), []);
    // A later view change does not name it again.
    o.setLive(live("n1", "n2", "n9"), "c:1", 51_000);
    if (o.owns(p)) assert.ok(!o.pullFrom(p, 0).some((t) => t.nodeId === holder!.nodeId));
  });

  it("a first view that listed only some members: a later view names the members that held the partition", () => {
    // c joins n1, n2, n3 at R = 1; its first view lists n1 only.
    let p = -1;
    for (let q = 0; q < 64 && p < 0; q++) {
      const full = new Ownership("c", "c:1", 64, 1);
      full.setLive(live("n1", "n2", "n3"));
      const first = new Ownership("c", "c:1", 64, 1);
      first.setLive(live("n1"));
      const without = new Ownership("n1", "n1:1", 64, 1);
      without.setLive(live("n2", "n3"));
      if (full.owns(q) && first.owns(q) && without.ownersOf(q)[0] !== "n1") p = q;
    }
    assert.ok(p >= 0);
    const truth = new Ownership("n1", "n1:1", 64, 1);
    truth.setLive(live("n2", "n3"));
    const c = new Ownership("c", "c:1", 64, 1);
    c.setLive(live("n1"), "c:1", 50_000);
    assert.deepEqual(c.pullFrom(p, 0).map((t) => t.nodeId), ["n1"]);
    c.setLive(live("n1", "n2", "n3"), "c:1", 50_100);
    assert.ok(c.pullFrom(p, 0).some((t) => t.nodeId === truth.ownersOf(p)[0]), `asks ${truth.ownersOf(p)[0]}, which held p`);
  });

  it("after its first view with peers (a join, a wiped restart), fetches what it owns from the owners the others give it", () => {
    const o = new Ownership("c", "c:1", 64, 1);
    assert.deepEqual(o.pullFrom(0, 0), [], "alone: nothing to fetch from");
    o.setLive(live("n1", "n2"), "c:1", 5_000);
    const others = new Ownership("n1", "n1:1", 64, 1);
    others.setLive(live("n2"));
    const owned = o.owned();
    assert.ok(owned.length > 0);
    for (const p of owned) assert.deepEqual(o.pullFrom(p, 0).map((t) => t.nodeId), others.ownersOf(p).filter((id) => id !== "c"));
    // Losing a partition forgets its holders; a member that left is not named.
    o.setLive(live("n1"), "c:1", 6_000);
    for (let p = 0; p < 64; p++) for (const t of o.pullFrom(p, 0)) assert.equal(t.nodeId, "n1");
  });
});

describe("Ownership: telling its listeners of placement changes", () => {
  it("tells them after a view that moves a partition and when this node starts leaving, not after a view that moves none", () => {
    const o = new Ownership("a", "addr-a", 8, 2);
    let told = 0;
    const stop = o.onChange(() => told++);
    o.setLive(new Map([["b", "addr-b"]])); // every partition gains b as an owner
    assert.equal(told, 1);
    assert.equal(o.owned().length, 8);
    o.setLive(new Map([["b", "addr-b"], ["c", "addr-c"]]));
    assert.equal(told, 2);
    assert.ok(o.owned().length < 8, "a third node took partitions");
    o.setLive(new Map([["c", "addr-c"], ["b", "addr-b"]])); // the same members
    assert.equal(told, 2);
    o.startLeaving();
    assert.equal(told, 3);
    stop();
    o.setLive(new Map([["b", "addr-b"]]));
    assert.equal(told, 3, "a removed listener is not told");
  });
});
