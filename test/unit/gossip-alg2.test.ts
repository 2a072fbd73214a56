// Algorithm 2 bookkeeping: delta-intervals, acks, GC, full-state fallback, membership changes,
// BP, RR and the buffer budget.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { AWSet, ObjectType } from "../../services/crdt/index.js";
import {
  AntiEntropyEngine,
  type KeyedStates,
  PayloadKind,
  keyedStatesOps,
  receivedPart,
  seededRandom,
} from "../../services/gossip/index.js";
import { S, alg2, delta, frameTo, items, summary } from "./gossip-helpers.js";

describe("Algorithm 2: delta-intervals and acks", () => {
  it("ships the join of the deltas each neighbour has not acked, with seq c", () => {
    const e = alg2();
    assert.equal(e.local(0, S("x")), 1);
    assert.equal(e.local(0, S("y")), 2);
    assert.deepEqual(summary(e.tick(0)), {
      b: [[0, "delta", 2, ["x", "y"]]],
      c: [[0, "delta", 2, ["x", "y"]]],
    });
    e.onAcks("b", [{ partition: 0, seq: 2 }]);
    e.local(0, S("z"));
    assert.deepEqual(summary(e.tick(1)), {
      b: [[0, "delta", 3, ["z"]]],
      c: [[0, "delta", 3, ["x", "y", "z"]]],
    });
  });

  it("sends nothing to a neighbour that has acked c", () => {
    const e = alg2();
    e.local(0, S("x"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    assert.deepEqual(e.tick(0), []);
  });

  it("keeps the highest ack and ignores acks beyond c or from non-neighbours", () => {
    const e = alg2();
    e.local(0, S("x"));
    e.local(0, S("y"));
    e.onAcks("b", [{ partition: 0, seq: 2 }]);
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    assert.equal(e.ackOf(0, "b"), 2);
    e.onAcks("c", [{ partition: 0, seq: 3 }]); // c = 2: nothing with seq 3 was ever sent
    e.onAcks("z", [{ partition: 0, seq: 1 }]); // not a neighbour
    e.onAcks("b", [{ partition: 9, seq: 1 }]); // no such partition
    assert.equal(e.ackOf(0, "c"), 0);
    assert.equal(e.ackOf(0, "z"), 0);
    assert.equal(e.counters.acksIgnored, 3);
    assert.equal(e.counters.acksReceived, 5);
  });

  it("buffers what a received payload brought, bumps c, and always acks the sender's seq", () => {
    const e = alg2();
    assert.deepEqual(e.onFrame("b", [delta(0, 5, S("q"))]), [{ partition: 0, seq: 5 }]);
    assert.equal(e.seq(0), 1);
    assert.deepEqual(
      e.buffered(0).map((b) => [b.seq, b.origin, items(b.delta)]),
      [[0, "b", ["q"]]],
    );
    // Redundant: nothing new, still acked, not buffered.
    assert.deepEqual(e.onFrame("b", [delta(0, 6, undefined)]), [{ partition: 0, seq: 6 }]);
    assert.deepEqual(e.onFrame("c", [delta(0, 2, S())]), [{ partition: 0, seq: 2 }]);
    assert.equal(e.seq(0), 1);
    assert.equal(e.counters.redundantReceived, 2);
    assert.equal(e.counters.acksSent, 3);
  });

  it("batches every partition into one frame per neighbour", () => {
    const e = alg2({}, { partitions: 3 });
    e.local(0, S("x"));
    e.local(2, S("y"));
    const frames = e.tick(0);
    assert.equal(frames.length, 2);
    assert.deepEqual(summary(frames).b, [
      [0, "delta", 1, ["x"]],
      [2, "delta", 1, ["y"]],
    ]);
  });

  it("with fanout random, ships to one random neighbour per period", () => {
    const e = alg2({ fanout: "random" }, { neighbours: ["b", "c", "d"] });
    const seen = new Set<string>();
    for (let t = 0; t < 30; t++) {
      e.local(0, S(`x${t}`));
      const frames = e.tick(t);
      assert.equal(frames.length, 1);
      seen.add(frames[0]!.to);
    }
    assert.deepEqual([...seen].sort(), ["b", "c", "d"]);
  });

  it("reports c changes for the caller to persist", () => {
    const e = alg2({}, { partitions: 3 });
    e.local(1, S("x"));
    e.local(1, S("y"));
    e.onFrame("b", [delta(2, 4, S("q"))]);
    assert.deepEqual([...e.takeSeqChanges()].sort(), [
      [1, 2],
      [2, 1],
    ]);
    assert.equal(e.takeSeqChanges().size, 0);
  });
});

describe("Algorithm 2: neighbours left out of a tick (an exchange with them still runs)", () => {
  it("builds nothing for them, counts nothing as sent, and sends them everything later", () => {
    const e = alg2();
    e.local(0, S("x"));
    const frames = e.tick(0, { skip: (id) => id === "b" });
    assert.deepEqual(summary(frames), { c: [[0, "delta", 1, ["x"]]] });
    assert.equal(e.counters.framesSent, 1);
    assert.equal(e.counters.itemsSent.delta, 1);
    e.local(0, S("y"));
    assert.deepEqual(summary(e.tick(1)).b, [[0, "delta", 2, ["x", "y"]]], "b gets what it missed once it is no longer left out");
  });

  it("the random pick is among the others, every period", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const e = alg2({ fanout: "random" }, { neighbours: ["b", "c", "d"], seed });
      e.local(0, S("x"));
      const to = e.tick(0, { skip: (id) => id !== "d" }).map((f) => f.to);
      assert.deepEqual(to, ["d"], `seed ${seed}`);
    }
    const e = alg2({ fanout: "random" });
    e.local(0, S("x"));
    assert.deepEqual(e.tick(0, { skip: () => true }), [], "nobody to send to: nothing built");
    assert.equal(e.counters.framesSent, 0);
  });
});

describe("Algorithm 2: garbage collection and full-state fallback", () => {
  it("drops a delta only once every current neighbour has acked it", () => {
    const e = alg2();
    e.local(0, S("x"));
    e.tick(0);
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.tick(1);
    assert.equal(e.buffered(0).length, 1);
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    e.tick(2);
    assert.equal(e.buffered(0).length, 0);
    assert.equal(e.counters.deltasCollected, 1);
  });

  it("ships full state when the neighbour's ack is older than the oldest buffered delta", () => {
    const e = alg2();
    e.local(0, S("x"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    e.tick(0); // GC drops seq 0
    e.setNeighbours(["b", "c", "d"]); // d is new: ack 0 < min buffered seq once y is buffered
    e.local(0, S("y"));
    assert.deepEqual(summary(e.tick(1)), {
      b: [[0, "delta", 2, ["y"]]],
      c: [[0, "delta", 2, ["y"]]],
      d: [[0, "state", 2, []]],
    });
    assert.equal(e.counters.stateFallbacks, 1);
  });

  it("a new neighbour gets the whole buffer while the buffer still starts at seq 0", () => {
    const e = alg2({}, { neighbours: ["b"] });
    e.local(0, S("x"));
    e.tick(0);
    e.setNeighbours(["b", "d"]);
    assert.deepEqual(summary(e.tick(1)).d, [[0, "delta", 1, ["x"]]]);
  });

  it("after a restart (persisted c, empty buffer) ships full state to every neighbour", () => {
    const e = alg2({ initialSeqs: [7, 0] });
    assert.deepEqual(summary(e.tick(0)), {
      b: [[0, "state", 7, []]],
      c: [[0, "state", 7, []]],
    });
    e.onAcks("b", [{ partition: 0, seq: 7 }]);
    assert.deepEqual(Object.keys(summary(e.tick(1))), ["c"]);
  });

  it("a removed neighbour leaves the ack map, so GC proceeds without it", () => {
    const e = alg2();
    e.local(0, S("x"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.tick(0);
    assert.equal(e.buffered(0).length, 1, "c has not acked: kept");
    e.setNeighbours(["b"]);
    e.tick(1);
    assert.equal(e.buffered(0).length, 0, "only b is left and it acked");
    e.onAcks("c", [{ partition: 0, seq: 1 }]);
    assert.equal(e.ackOf(0, "c"), 0, "acks of a departed neighbour are ignored");
    // Coming back, c starts from ack 0 again: the buffer no longer has seq 0, so full state.
    e.setNeighbours(["b", "c"]);
    assert.deepEqual(summary(e.tick(2)), { c: [[0, "state", 1, []]] });
  });

  it("with no neighbours at all, keeps nothing", () => {
    const e = alg2({}, { neighbours: [] });
    e.local(0, S("x"));
    assert.deepEqual(e.tick(0), []);
    assert.equal(e.buffered(0).length, 0);
  });

  it("with no neighbours, does not buffer a delta even until the tick; one that appears later gets state, then deltas", () => {
    const e = alg2({}, { neighbours: [] });
    assert.equal(e.local(0, S("x")), 1);
    assert.equal(e.local(0, S("y")), 2);
    assert.equal(e.buffered(0).length, 0, "nothing held between ticks either");
    assert.equal(e.counters.deltasCollected, 2);
    assert.deepEqual([...e.takeSeqChanges()], [[0, 2]], "c still moves and is persisted");
    e.setNeighbours(["b"]);
    e.local(0, S("z"));
    // b's ack is 0 and the buffer starts at 2: only full state carries x and y.
    assert.deepEqual(summary(e.tick(0)), { b: [[0, "state", 3, []]] });
    e.onAcks("b", [{ partition: 0, seq: 3 }]);
    e.local(0, S("w"));
    assert.deepEqual(summary(e.tick(1)), { b: [[0, "delta", 4, ["w"]]] });
  });

  it("a neighbour leaving with deltas still buffered: the next delta empties the buffer, so it stays contiguous", () => {
    const e = alg2({}, { neighbours: ["b"] });
    e.local(0, S("x"));
    e.setNeighbours([]);
    e.local(0, S("y"));
    assert.equal(e.buffered(0).length, 0);
    e.setNeighbours(["b"]);
    assert.deepEqual(summary(e.tick(0)), { b: [[0, "state", 2, []]] });
  });

  it("over the byte budget, drops the oldest deltas and the neighbours that needed them get state", () => {
    const e = alg2({ maxBufferBytes: 3 });
    e.local(0, S("aa"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.local(0, S("bb")); // 4 bytes > 3: "aa" (seq 0) goes
    assert.deepEqual(
      e.buffered(0).map((b) => b.seq),
      [1],
    );
    assert.equal(e.counters.bufferOverflowDrops, 1);
    assert.deepEqual(summary(e.tick(0)), {
      b: [[0, "delta", 2, ["bb"]]],
      c: [[0, "state", 2, []]],
    });
    // A single delta over the budget empties the buffer: everyone behind gets state.
    e.local(0, S("cccc"));
    assert.equal(e.buffered(0).length, 0);
    assert.deepEqual(summary(e.tick(1)), {
      b: [[0, "state", 3, []]],
      c: [[0, "state", 3, []]],
    });
  });

  it("a push with the intervals of writes waiting for copies sends a neighbour that needs full state each interval alone beside it", () => {
    const e = alg2({ maxBufferBytes: 4 });
    e.local(0, S("aa"));
    e.local(0, S("bb"));
    e.onAcks("b", [{ partition: 0, seq: 2 }]);
    e.local(0, S("cc")); // over the budget: "aa" goes, c (ack 0) needs state
    const frames = e.tick(0, { tail: true, ranges: [{ partition: 0, from: 2, to: 3 }, { partition: 1, from: 0, to: 1 }] });
    const sent = summary(frames);
    // b needs no state: its tail carries the write. c gets its full state and the write's delta alone, under a label.
    assert.deepEqual(sent.b!.map((i) => [i[1], i[3]]), [["delta", ["cc"]]]);
    assert.deepEqual(sent.c!.map((i) => [i[1], i[3]]), [["state", []], ["delta", ["cc"]]]);
    const label = sent.c![1]![2] as number;
    assert.ok(label >= 2 ** 50, "the interval's push carries a label, not c");
    e.onAcks("c", [{ partition: 0, seq: label }]);
    assert.equal(e.holdsRange(0, "c", 2, 3), true);
    assert.equal(e.holdsRange(0, "c", 1, 3), false);
    assert.equal(e.ackOf(0, "c"), 0, "c still needs its full state");
    // A push without intervals sends c its state only.
    e.local(0, S("dd"));
    assert.deepEqual(summary(e.tick(1, { tail: true })).c!.map((i) => i[1]), ["state"]);
  });
});

describe("Algorithm 2: BP and RR", () => {
  it("BP: never sends a delta back to the neighbour it came from; the seq sent is still c", () => {
    const e = alg2({ bp: true });
    e.onFrame("b", [delta(0, 1, S("q"))]);
    e.local(0, S("x"));
    assert.deepEqual(summary(e.tick(0)), {
      b: [[0, "delta", 2, ["x"]]],
      c: [[0, "delta", 2, ["q", "x"]]],
    });
    assert.equal(e.counters.bpHeldBack, 1);
    // b acks 2, which covers q: b sent it.
    e.onAcks("b", [{ partition: 0, seq: 2 }]);
    e.onAcks("c", [{ partition: 0, seq: 2 }]);
    e.tick(1);
    assert.equal(e.buffered(0).length, 0);
  });

  it("BP: when every unacked delta came from the neighbour, nothing is sent and its ack moves to c", () => {
    const e = alg2({ bp: true });
    e.onFrame("b", [delta(0, 1, S("q"))]);
    e.onFrame("b", [delta(0, 2, S("r"))]);
    assert.deepEqual(summary(e.tick(0)), { c: [[0, "delta", 2, ["q", "r"]]] });
    assert.equal(e.ackOf(0, "b"), 2);
  });

  it("without BP the same delta goes back to its origin", () => {
    const e = alg2({ bp: false });
    e.onFrame("b", [delta(0, 1, S("q"))]);
    assert.deepEqual(summary(e.tick(0)).b, [[0, "delta", 1, ["q"]]]);
  });

  it("RR: only the part of a received delta that was new is buffered and forwarded", () => {
    const enc = (s: string) => Buffer.from(s);
    // Replica b adds e1 and e2; a already has e1 (from an earlier sync); b then adds e3.
    let atB = AWSet.bottom();
    atB = atB.add("b", [enc("e1"), enc("e2")]);
    const atA = atB.remove([enc("e2")]).clone(); // a saw both adds, then removed e2 locally
    const received: KeyedStates = new Map([["k", { type: ObjectType.AWSET, state: atB.add("b", [enc("e3")]) }]]);
    const localX: KeyedStates = new Map([["k", { type: ObjectType.AWSET, state: atA }]]);

    const withRR = receivedPart(received, localX, true)!;
    const rrState = withRR.get("k")!.state as AWSet;
    assert.deepEqual(rrState.sortedKeys(), ["e3"], "only e3 is new to a (e2's add was seen and removed)");
    const withoutRR = receivedPart(received, localX, false)!;
    assert.deepEqual((withoutRR.get("k")!.state as AWSet).sortedKeys(), ["e1", "e2", "e3"]);

    for (const [rr, fresh, expected] of [
      [true, withRR, ["e3"]],
      [false, withoutRR, ["e1", "e2", "e3"]],
    ] as const) {
      const e = new AntiEntropyEngine<KeyedStates>({
        self: "a",
        ops: keyedStatesOps,
        random: seededRandom(1),
        sync: { algorithm: 2, bp: false, rr, fanout: "all" },
        partitions: 1,
        neighbours: ["b", "c"],
      });
      e.onFrame("b", [{ partition: 0, kind: PayloadKind.DELTA, seq: 1, fresh }]);
      const toC = frameTo(e.tick(0), "c")!;
      assert.deepEqual((toC.items[0]!.payload!.get("k")!.state as AWSet).sortedKeys(), expected);
      assert.ok(e.partitionStats(0).bufferBytes > 0);
    }
    assert.ok(keyedStatesOps.sizeBytes(withRR) < keyedStatesOps.sizeBytes(withoutRR));
  });

  it("a received payload that brings nothing new is not buffered under RR", () => {
    const enc = (s: string) => Buffer.from(s);
    const s = AWSet.bottom().add("b", [enc("e1")]);
    const x: KeyedStates = new Map([["k", { type: ObjectType.AWSET, state: s }]]);
    assert.equal(receivedPart(x, x, true), undefined);
    assert.equal(receivedPart(x, x, false), undefined);
  });
});

describe("Algorithm 2: metrics", () => {
  it("counts frames, items, bytes, and reports per-partition seq, buffer and lag", () => {
    const e = alg2({}, { partitions: 2 });
    e.local(0, S("xx"));
    e.local(0, S("yyy"));
    e.onAcks("b", [{ partition: 0, seq: 1 }]);
    e.onAcks("c", [{ partition: 0, seq: 2 }]);
    assert.deepEqual(e.partitionStats(0), { partition: 0, seq: 2, bufferEntries: 2, bufferBytes: 5, lag: 1 });
    e.tick(0);
    const snap = e.snapshot();
    assert.equal(snap.counters.framesSent, 1);
    assert.equal(snap.counters.itemsSent.delta, 1);
    assert.equal(snap.counters.bytesSent.delta, 3, "b gets yyy");
    assert.equal(snap.partitions[0]!.bufferEntries, 1, "seq 0 acked by both: collected");
    assert.equal(snap.partitions[1]!.lag, 0);
    assert.deepEqual(snap.neighbours, ["b", "c"]);
    assert.equal(snap.lastTickAt, 0);
    const acks = e.onFrame("b", [{ ...delta(1, 3, S("q")), bytes: 10 }]);
    assert.equal(e.counters.bytesReceived.delta, 10);
    assert.ok(e.counters.bytesSent.ack > 0 && acks.length === 1);
    e.recordStateBytesSent(123);
    assert.equal(e.counters.bytesSent.state, 123);
  });

  it("rejects items for unknown partitions without touching state", () => {
    const e = alg2({}, { partitions: 2 });
    assert.deepEqual(e.onFrame("b", [delta(5, 1, S("q")), { partition: 0, kind: 7 as PayloadKind.DELTA, seq: 1 }]), []);
    assert.equal(e.counters.itemsRejected, 2);
    assert.equal(e.seq(0), 0);
  });
});
