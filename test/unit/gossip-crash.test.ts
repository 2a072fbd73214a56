// Crash and restart in simulation, with the node's own persistence policy (durable-seq.ts: seqs
// persisted lazily before each tick's frames leave, restart one past the persisted value) and its
// boot-id rule (peer-boots.ts). An add taken just before a crash, with no tick in between, must
// still reach every node; a node that comes back with a wiped data directory before anyone
// noticed must receive everything again; a large catch-up is forwarded by full state.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ALG2_BP_RR, RING3 } from "./gossip-helpers.js";
import { GossipSimulation, NO_FAULTS, seqsAfterRestart } from "../../services/gossip/index.js";
import { AntiEntropyEngine, PayloadKind } from "../../services/gossip/engine.js";
import type { PayloadOps } from "../../services/gossip/payload.js";

const b = (s: string) => Buffer.from(s);
const ring3 = RING3;
const alg2 = ALG2_BP_RR;

describe("crash invariant (simulation, the node's persistence policy)", () => {
  it("restarts every partition holding data one past its persisted seq, and an empty one at 0", () => {
    assert.deepEqual(seqsAfterRestart(new Map([[1, 7]]), 3, new Set([0, 1, 2])), [1, 8, 1]);
    assert.deepEqual(seqsAfterRestart(new Map([[1, 7]]), 3, new Set([1])), [0, 8, 0]);
    assert.deepEqual(seqsAfterRestart(new Map([[1, 7]]), 3, new Set()), [0, 0, 0]);
  });

  it("a fresh cluster sends its first writes as deltas: no partition needs a full state first", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 8, seed: 7, faults: NO_FAULTS });
    for (let i = 0; i < 3; i++) await sim.step();
    for (let k = 0; k < 16; k++) await sim.add(sim.nodeIds[k % 3]!, `k${k}`, [b(`e${k}`)]);
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    for (const id of sim.nodeIds) {
      const c = sim.engine(id).snapshot().counters;
      assert.equal(c.stateFallbacks, 0, `${id} planned full states`);
      assert.ok(c.itemsSent.delta > 0, `${id} sent no delta`);
    }
    await sim.close();
  });

  it("a node restarted with data ships the partitions holding data by full state, and restarts the others at 0", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 8, seed: 11, faults: NO_FAULTS });
    await sim.add("a", "only-key", [b("x")]);
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    await sim.restart("a");
    const p = sim.partitionOf("only-key");
    const seqs = sim.engine("a").snapshot().partitions.map((s) => s.seq);
    for (let q = 0; q < 8; q++) if (q !== p) assert.equal(seqs[q], 0, `empty partition ${q} restarted at ${seqs[q]}`);
    assert.ok(seqs[p]! >= 1, "the partition holding data restarted past its persisted seq");
    for (let i = 0; i < 6; i++) await sim.step();
    assert.ok(sim.engine("a").snapshot().counters.stateFallbacks > 0, "the partition holding data was shipped by full state");
    assert.ok(await sim.converged(), "replicas differ after the restart");
    await sim.close();
  });

  it("an add acknowledged just before a crash (no tick in between) reaches every node", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 0, max: 20 }), fc.constantFrom("a", "b", "c"), async (seed, warm, victim) => {
        const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 8, seed, faults: NO_FAULTS });
        for (let i = 0; i < warm; i++) await sim.step();
        // A key of a partition that never held anything: its persisted seq is still 0.
        await sim.add(victim, `fresh-${seed}`, [b("x")]);
        await sim.restart(victim);
        assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
        for (const id of sim.nodeIds) assert.deepEqual(await sim.elementsOf(id, `fresh-${seed}`), ["x"], `${id} lacks the add`);
        await sim.close();
      }),
      { numRuns: 60 },
    );
  });

  it("a node back with a wiped data directory before anyone noticed receives everything again", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 2 ** 31 }), fc.constantFrom("a", "b", "c"), async (seed, victim) => {
        const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 8, seed, faults: NO_FAULTS });
        for (let k = 0; k < 6; k++) await sim.add(["a", "b", "c"][k % 3]!, `k${k}`, [b(`v${k}`)]);
        assert.notEqual(await sim.runUntilConverged(50), -1);
        for (let i = 0; i < 5; i++) await sim.step(); // every ack has come back: the peers look caught up
        await sim.restart(victim, { wipe: true });
        assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
        for (let k = 0; k < 6; k++) assert.deepEqual(await sim.elementsOf(victim, `k${k}`), [`v${k}`]);
        await sim.close();
      }),
      // The example: b still buffered the deltas c had sent (a had not acked them), and BP kept
      // them from the wiped c for good.
      { numRuns: 40, examples: [[1718028664, "c"]] },
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

  it("a neighbour back without what it sent (restarted, or its partition dropped) gets its own deltas back: BP holds them only while it holds them", () => {
    for (const lose of ["restart", "drop"] as const) {
      const e = engine(true);
      assert.equal(e.noticeBoot("src", 1n), false);
      // src sends a delta; "other" never acks it, so it stays buffered with src as its origin.
      e.onFrame("src", [{ partition: 0, kind: PayloadKind.DELTA, seq: 1, fresh: 7 }]);
      const first = new Map(e.tick(0).map((f) => [f.to, f.items]));
      assert.equal(first.get("src"), undefined, "BP: src is not sent its own delta");
      assert.deepEqual(first.get("other")?.map((i) => i.payload), [7]);
      assert.equal(e.ackOf(0, "src"), e.seq(0), "BP advanced src's ack over its own delta");
      if (lose === "restart") assert.equal(e.noticeBoot("src", 2n), true);
      else assert.deepEqual([...e.noticeDrops("src", [{ partition: 0, count: 1 }])], [0]);
      const again = new Map(e.tick(1).map((f) => [f.to, f.items]));
      assert.deepEqual(again.get("src")?.map((i) => [i.kind, i.payload]), [[PayloadKind.DELTA, 7]], `${lose}: src gets its delta back`);
    }
  });

  it("a node that dropped its copy of a partition sends none of the deltas it buffered there: a peer would book them as held here", () => {
    const e = engine(true);
    e.local(0, 5);
    e.noteDropped(0);
    const kinds = new Map(e.tick(0).map((f) => [f.to, f.items.map((i) => i.kind)]));
    for (const to of ["src", "other"]) assert.deepEqual(kinds.get(to), [PayloadKind.STATE], `${to}: full state (what is still here), not the delta`);
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

describe("the simulator runs the node's receive path", () => {
  it("a wiped node gets a large key back as a chunked state stream, joined chunk by chunk in its store", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 2, seed: 5, faults: NO_FAULTS, stateChunkEntries: 16 });
    const elements = Array.from({ length: 100 }, (_, i) => b(`e${String(i).padStart(3, "0")}`));
    await sim.add("a", "big", elements);
    await sim.remove("a", "big", elements.slice(0, 10));
    assert.notEqual(await sim.runUntilConverged(50), -1);
    for (let i = 0; i < 5; i++) await sim.step();
    await sim.restart("c", { wipe: true });
    assert.equal(sim.transport("c").chunksApplied, 0, "a restarted node's counters start at 0");
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    assert.equal((await sim.elementsOf("c", "big")).length, 90);
    // 90 live elements in chunks of 16: at least 6 chunks from one sender, applied by the store.
    assert.ok(sim.transport("c").chunksApplied >= 6, `chunks applied: ${sim.transport("c").chunksApplied}`);
    assert.deepEqual(await sim.store("c").verify("big"), [], "the store's records agree after the chunked join");
    await sim.close();
  });

  it("a node that dropped a partition's copy (hand-off) gets all of it again when it takes the partition back", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 2 ** 31 }), fc.constantFrom("a", "b", "c"), async (seed, victim) => {
        const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 4, seed, faults: NO_FAULTS });
        const writer = victim === "a" ? "b" : "a";
        const p = sim.partitionOf("k0");
        const keys = Array.from({ length: 40 }, (_, i) => `k${i}`).filter((k) => sim.partitionOf(k) === p);
        for (const [i, k] of keys.entries()) await sim.add(writer, k, [b(`v${i}`)]);
        assert.notEqual(await sim.runUntilConverged(50), -1);
        for (let i = 0; i < 5; i++) await sim.step(); // every ack is back: the peers hold the victim caught up
        assert.equal(await sim.dropPartition(victim, p), keys.length);
        // A write after the drop: without the reset, peers would send the victim only this.
        await sim.add(writer, keys[0]!, [b("late")]);
        assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
        for (const [i, k] of keys.entries()) {
          const want = i === 0 ? ["late", "v0"] : [`v${i}`];
          assert.deepEqual(await sim.elementsOf(victim, k), want, `${victim} lacks ${k}`);
        }
        await sim.close();
      }),
      { numRuns: 25 },
    );
  });

  it("a reply to a send planned before the peer's acks were reset proves nothing", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 2, seed: 9, faults: NO_FAULTS });
    const x = sim.exchange("a");
    const p = sim.partitionOf("k");
    await sim.add("a", "k", [b("x")]);
    const c = x.engine.seq(p);
    const before = x.engine.resetsOf("b");
    // b says it dropped p (in any message): a resets b's acks there.
    x.onReply("b", sim.bootOf("b"), [], [{ partition: p, count: 1n }], before);
    assert.equal(x.engine.resetsOf("b"), before + 1);
    // The reply to a frame a planned before that reset comes in late, acking c: ignored.
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [{ partition: p, count: 1n }], before);
    assert.equal(x.engine.ackOf(p, "b"), 0);
    // The same ack in a reply to a send planned after the reset counts.
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [{ partition: p, count: 1n }], x.engine.resetsOf("b"));
    assert.equal(x.engine.ackOf(p, "b"), c);
    // A higher count again: the acks of the message that says so are ignored, and b's ack is reset.
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [{ partition: p, count: 2n }], x.engine.resetsOf("b"));
    assert.equal(x.engine.ackOf(p, "b"), 0);
    await sim.close();
  });

  it("while another process contests its id, a node greets every neighbour each period, then only those that never answered", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 2, seed: 9, faults: NO_FAULTS });
    const x = sim.exchange("a");
    const greeted = async (now: number) => (await x.tick(now)).filter((o) => o.frames.length === 1 && o.frames[0]!.payloads.length === 0).map((o) => o.to).sort();
    const neighbours = [...x.engine.neighbours()].sort();
    assert.ok(neighbours.length >= 2);
    // Nothing to send: every neighbour is greeted until it answers, then no more.
    assert.deepEqual(await greeted(1000), neighbours);
    for (const n of neighbours) x.onReply(n, sim.bootOf(n), [], [], x.engine.resetsOf(n));
    assert.deepEqual(await greeted(2000), []);
    // Contested until 5000: greeted every period again (the frame's boot id resets a neighbour
    // that heard last from the other process); afterwards, quiet again.
    x.identityContested(5000);
    assert.deepEqual(await greeted(3000), neighbours);
    assert.deepEqual(await greeted(4999), neighbours);
    assert.deepEqual(await greeted(5000), []);
    await sim.close();
  });

  it("forgets what it kept of peers that left the neighbours, and a late reply from one still proves nothing", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 2, seed: 9, faults: NO_FAULTS });
    const x = sim.exchange("a");
    const p = sim.partitionOf("k");
    await sim.add("a", "k", [b("x")]);
    const c = x.engine.seq(p);
    const all = x.engine.neighbours();
    // b named its boot and a drop, and had its acks reset: the engine keeps all three for b.
    x.onReply("b", sim.bootOf("b"), [], [{ partition: p, count: 1n }], x.engine.resetsOf("b"));
    // Replaced identities that came and went (node churn): each left something behind.
    for (let i = 0; i < 50; i++) {
      const id = `gone-${i}`;
      x.engine.setNeighbours([...all, id]);
      x.engine.noticeBoot(id, BigInt(i + 1));
      x.engine.noticeDrops(id, [{ partition: p, count: 1 }]);
    }
    const planned = x.engine.resetsOf("b");
    x.engine.setNeighbours(all.filter((id) => id !== "b"));
    assert.deepEqual([...x.engine.peerStateIds()].filter((id) => !all.includes(id) || id === "b"), [], "state of departed peers was kept");
    // b returns; the reply to a frame planned before it left arrives late: its acks are ignored.
    x.engine.setNeighbours(all);
    assert.ok(x.engine.resetsOf("b") > planned);
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [], planned);
    assert.equal(x.engine.ackOf(p, "b"), 0, "a late reply credited acks forgotten when b left");
    // A peer never seen reads above every count handed out before, as a forgotten one does.
    assert.ok(x.engine.resetsOf("never-seen") > planned);
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [], x.engine.resetsOf("b"));
    assert.equal(x.engine.ackOf(p, "b"), c);
    await sim.close();
  });

  it("a reply to a send planned before the peer left the neighbours (or a partition's peers) and came back proves nothing", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 2, seed: 9, faults: NO_FAULTS });
    const x = sim.exchange("a");
    const p = sim.partitionOf("k");
    await sim.add("a", "k", [b("x")]);
    const c = x.engine.seq(p);
    const all = x.engine.neighbours();
    assert.ok(all.includes("b"));
    // b leaves the neighbours and comes back while a frame (a tail push, say) to it is under way.
    const planned = x.engine.resetsOf("b");
    x.engine.setNeighbours(all.filter((id) => id !== "b"));
    x.engine.setNeighbours(all);
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [], planned);
    assert.equal(x.engine.ackOf(p, "b"), 0, "a late reply credited acks the neighbour's return had reset");
    // The same through placement: b leaves partition p's peers and comes back.
    const again = x.engine.resetsOf("b");
    x.engine.setPartitionPeers((q) => (q === p ? all.filter((id) => id !== "b") : all));
    x.engine.setPartitionPeers(() => all);
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [], again);
    assert.equal(x.engine.ackOf(p, "b"), 0, "a late reply credited acks the partition's placement had reset");
    // A reply to a send planned now counts.
    x.onReply("b", sim.bootOf("b"), [{ partition: p, seq: BigInt(c) }], [], x.engine.resetsOf("b"));
    assert.equal(x.engine.ackOf(p, "b"), c);
    await sim.close();
  });

  it("a malformed frame is refused by the exchange and changes nothing", async () => {
    const sim = await GossipSimulation.create({ topology: ring3, sync: alg2, partitions: 2, seed: 6, faults: NO_FAULTS });
    await sim.add("a", "k", [b("x")]);
    // A frame naming a key in the wrong partition, as a node's Gossip service would get it.
    sim.channel.send(sim.time, "b", "c", {
      kind: "frame",
      bytes: (await import("../../services/gen/deltaset/v1/gossip.js")).GossipFrame.encode({
        cluster: "sim",
        from: "b",
        frameId: 1n,
        payloads: [{ partition: 1 - sim.partitionOf("k"), kind: 1, seq: 1n, keys: [{ key: "k", state: undefined }] }],
        acks: [],
        partitions: 2,
        boot: 1n,
        dropped: [],
        leaving: false,
        mac: Buffer.alloc(0),
      }).finish(),
      resets: 0,
    });
    await sim.step();
    assert.equal(sim.transport("c").framesRejected, 1);
    assert.notEqual(await sim.runUntilConverged(20), -1);
    assert.deepEqual(await sim.elementsOf("c", "k"), ["x"]);
    await sim.close();
  });
});
