// Catch-up by contexts (gossip/catch-up.ts): a full-state push sends each key only what the
// receiver lacks, per the contexts (or digests) it named; the receiver refuses deltas cut against
// what it held in another life or before a drop.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { type AWSet, ObjectType } from "../../services/crdt/index.js";
import { AWSetState } from "../../services/gen/deltaset/v1/types.js";
import { type Algorithm1Config, GossipExchange, GossipSimulation, NO_FAULTS } from "../../services/gossip/index.js";
import type { StateChunk } from "../../services/gen/deltaset/v1/gossip.js";
import { partitionOf } from "../../services/gossip/partition.js";
import { Store } from "../../services/store/store.js";
import type { StoreDb } from "../../services/store/db.js";
import { ALG2_BP_RR, RING3 } from "./gossip-helpers.js";

const b = (s: string) => Buffer.from(s);
const PARTITIONS = 8;
const quiet = { debug() {}, info() {}, warn() {}, error() {} } as never;

/** 3 nodes holding 24 sets of 30 elements, some removed, converged and every ack back. */
async function loaded(catchUpByContexts: boolean): Promise<GossipSimulation> {
  const sim = await GossipSimulation.create({ topology: RING3, sync: ALG2_BP_RR, partitions: PARTITIONS, seed: 9, faults: NO_FAULTS, catchUpByContexts });
  for (let k = 0; k < 24; k++) await sim.add(sim.nodeIds[k % 3]!, `k${k}`, Array.from({ length: 30 }, (_, i) => b(`e${i}`)));
  assert.notEqual(await sim.runUntilConverged(50), -1);
  for (let k = 0; k < 24; k += 2) await sim.remove(sim.nodeIds[(k + 1) % 3]!, `k${k}`, [b("e0"), b("e7")]);
  assert.notEqual(await sim.runUntilConverged(50), -1);
  for (let i = 0; i < 5; i++) await sim.step();
  return sim;
}

async function expectAll(sim: GossipSimulation, id: string): Promise<void> {
  for (let k = 0; k < 24; k++) {
    const want = Array.from({ length: 30 }, (_, i) => `e${i}`).filter((e) => k % 2 === 1 || (e !== "e0" && e !== "e7"));
    assert.deepEqual(await sim.elementsOf(id, `k${k}`), want.sort(), `${id} k${k}`);
  }
}

describe("catch-up by contexts (simulation)", () => {
  it("a node restarted with its data is sent, and sends, no element again, its neighbours reading none of the sets unchanged; with the option off, every partition both ways", async () => {
    const shipped: Record<string, number> = {};
    for (const on of [true, false]) {
      const sim = await loaded(on);
      const before = sim.traffic.statePayloadBytes;
      await sim.restart("c");
      await sim.add("a", "k1", [b("while-back")]);
      assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
      for (let i = 0; i < 3; i++) await sim.step();
      shipped[String(on)] = sim.traffic.statePayloadBytes - before;
      assert.ok(await sim.hasElement("c", "k1", b("while-back")));
      if (on) {
        const skipped = sim.nodeIds.reduce((n, id) => n + sim.transport(id).catchUpKeysSkipped + sim.transport(id).catchUpDeltaKeys, 0);
        assert.ok(skipped >= 24, `keys caught up by contexts: ${skipped}`);
        // Live digests agree for every set but the one written meanwhile: left out without a read.
        const unread = sim.nodeIds.reduce((n, id) => n + sim.transport(id).catchUpKeysUnread, 0);
        assert.ok(unread >= skipped - 3, `sets left out unread: ${unread} of ${skipped}`);
        assert.ok(sim.traffic.contextsBytes > 0);
      }
      await sim.close();
    }
    // Only the removes' contexts (a few bytes per key holding one) go, against 4 copies of everything.
    assert.ok(shipped.false! > 20_000, `off: ${shipped.false} bytes`);
    assert.ok(shipped.true! < shipped.false! / 50, `on: ${shipped.true} bytes, off: ${shipped.false}`);
  });

  it("a node that missed removes while away gets them as its keys' removes, and nothing of what it held; the sets it did not miss go unread", async () => {
    const sim = await loaded(true);
    // c is cut off (its neighbours forget it and collect their buffers), a removes, c restarts.
    sim.setNeighbours("a", ["b"]);
    sim.setNeighbours("b", ["a"]);
    sim.setNeighbours("c", []);
    for (let k = 1; k < 24; k += 2) await sim.remove("a", `k${k}`, [b("e0"), b("e7")]);
    // An element added and removed meanwhile: the same live dots, but a context c must learn (or
    // a late copy of the add would bring the element back there).
    await sim.add("a", "k0", [b("brief")]);
    await sim.remove("a", "k0", [b("brief")]);
    for (let i = 0; i < 6; i++) await sim.step();
    await sim.restart("c");
    for (const [id, n] of RING3) sim.setNeighbours(id, n);
    const before = sim.traffic.statePayloadBytes;
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    for (let k = 0; k < 24; k++) assert.deepEqual(await sim.elementsOf("c", `k${k}`), Array.from({ length: 30 }, (_, i) => `e${i}`).filter((e) => e !== "e0" && e !== "e7").sort());
    assert.ok(sim.transport("a").catchUpDeltaKeys + sim.transport("b").catchUpDeltaKeys > 0, "keys went as deltas");
    // a read and cut the 12 sets whose removes c missed (same context, other live dots) and k0
    // (same live dots, a larger context), and left the 11 others out unread.
    assert.equal(sim.transport("a").catchUpDeltaKeys, 13);
    assert.ok(sim.transport("a").catchUpKeysUnread >= 11, `unread at a: ${sim.transport("a").catchUpKeysUnread}`);
    assert.ok((await sim.store("c").describe("k0"))!.ctx.equals((await sim.store("a").describe("k0"))!.ctx), "c learnt the add and remove it missed");
    assert.ok(sim.traffic.statePayloadBytes - before < 5_000, `state payload: ${sim.traffic.statePayloadBytes - before} bytes`);
    await sim.close();
  });

  it("answers cut at their size limit are continued page by page: a restarted node still gets nothing back", async () => {
    const sim = await GossipSimulation.create({ topology: RING3, sync: ALG2_BP_RR, partitions: 2, seed: 5, faults: NO_FAULTS, contextsReplyBytes: 120 });
    for (let k = 0; k < 40; k++) await sim.add(sim.nodeIds[k % 3]!, `key-${k}`, [b("x"), b("y")]);
    assert.notEqual(await sim.runUntilConverged(50), -1);
    for (let i = 0; i < 5; i++) await sim.step();
    const before = sim.traffic.statePayloadBytes;
    await sim.restart("c");
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    for (let i = 0; i < 3; i++) await sim.step();
    assert.equal(sim.traffic.statePayloadBytes - before, 0, "no key went whole");
    const answered = sim.nodeIds.reduce((n, id) => n + sim.transport(id).contextsAnswered, 0);
    assert.ok(answered > 3 * 2 * 2, `Contexts calls (several pages per partition): ${answered}`);
    await sim.close();
  });

  it("a wiped node still gets everything (its contexts are empty)", async () => {
    const sim = await loaded(true);
    await sim.restart("c", { wipe: true });
    assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
    await expectAll(sim, "c");
    await sim.close();
  });

  it("whole-state keys the receiver holds alike are skipped, those that differ go whole", async () => {
    const shipped: Record<string, number> = {};
    for (const on of [true, false]) {
      const sim = await GossipSimulation.create({ topology: RING3, sync: ALG2_BP_RR, partitions: PARTITIONS, seed: 4, faults: NO_FAULTS, catchUpByContexts: on });
      for (let k = 0; k < 6; k++) await sim.operate("a", `f${k}`, ObjectType.GBF, { kind: "add", elements: [b(`x${k}`)], params: { capacity: 200 } });
      assert.notEqual(await sim.runUntilConverged(50), -1);
      for (let i = 0; i < 5; i++) await sim.step();
      // c is cut off while f0 changes, then restarts: its neighbours push it full state.
      sim.setNeighbours("a", ["b"]);
      sim.setNeighbours("b", ["a"]);
      sim.setNeighbours("c", []);
      await sim.operate("a", "f0", ObjectType.GBF, { kind: "add", elements: [b("late")] });
      for (let i = 0; i < 6; i++) await sim.step();
      await sim.restart("c");
      for (const [id, n] of RING3) sim.setNeighbours(id, n);
      const before = sim.traffic.statePayloadBytes;
      assert.notEqual(await sim.runUntilConverged(50), -1, "did not converge");
      assert.ok(await sim.converged());
      shipped[String(on)] = sim.traffic.statePayloadBytes - before;
      if (on) assert.ok(sim.transport("a").catchUpKeysSkipped + sim.transport("b").catchUpKeysSkipped >= 4, "filters held alike were skipped");
      await sim.close();
    }
    // Off: 6 filters both ways at least; on: f0 (the one that changed) and little else.
    assert.ok(shipped.true! > 0, "f0 went");
    assert.ok(shipped.true! * 3 <= shipped.false!, `on: ${shipped.true} bytes, off: ${shipped.false}`);
  });
});

// Two exchanges over in-memory stores, driven by hand, to reach the receiver's refusals.
async function node(
  id: string,
  boot: bigint,
  o: { db?: StoreDb; contextsReplyBytes?: number; contextsClaimMs?: number; contextsAhead?: number; clock?: () => number; sync?: Algorithm1Config } = {},
): Promise<{ store: Store; x: GossipExchange }> {
  const store = await Store.open({ dir: "memory", db: o.db, nodeId: id, replicaId: `${id}~${boot}`, partitions: PARTITIONS, partitionOf, sync: "buffered" });
  const x = await GossipExchange.create(
    { store, log: quiet, cluster: "t", partitions: PARTITIONS, sync: ALG2_BP_RR, stateChunkEntries: 4, maxMessageBytes: 1 << 20, boot, random: () => 0.5, ...o },
    () => true,
  );
  x.engine.setNeighbours(["a", "b", "c"].filter((n) => n !== id));
  return { store, x };
}

async function collect(gen: AsyncGenerator<StateChunk, number>): Promise<StateChunk[]> {
  const out: StateChunk[] = [];
  for (let n = await gen.next(); !n.done; n = await gen.next()) out.push(n.value);
  return out;
}

describe("catch-up by contexts (exchange)", () => {
  const key = "set";
  const p = partitionOf(key, PARTITIONS);

  async function pair() {
    const a = await node("a", 11n);
    const bNode = await node("b", 21n);
    await a.store.add(key, [b("x"), b("y"), b("z")]);
    const held = await bNode.store.add(key, [b("w")]);
    await bNode.store.merge(key, ObjectType.AWSET, (await a.store.readState(key))!.state);
    assert.ok(held.added === 1);
    await a.store.add(key, [b("new")]);
    const answer = await bNode.x.answerContexts(a.x.contextsRequest(p));
    assert.ok("reply" in answer);
    const holdings = a.x.holdingsFrom("b", answer.reply)!;
    assert.ok(holdings.keys.get(key)?.ctx !== undefined);
    const chunks = await collect(a.x.stateStream([{ partition: p, seq: a.x.engine.seq(p) }], async () => holdings));
    return { a, bNode, chunks };
  }

  it("a key the receiver holds goes as its delta: only the element it lacks", async () => {
    const { bNode, chunks } = await pair();
    const keyChunks = chunks.filter((c) => c.key === key);
    assert.ok(keyChunks.length > 0 && keyChunks.every((c) => c.delta));
    assert.equal(keyChunks[0]!.sinceBoot, 21n);
    const r = await bNode.x.receiveStateStream(chunks);
    assert.ok("reply" in r, "refused" in r ? r.refused.details : "");
    const sent = keyChunks.flatMap((c) => AWSetState.decode(c.slice!.payload).entries.map((e) => Buffer.from(e.element).toString()));
    assert.deepEqual(sent, ["new"], "the elements sent");
    assert.deepEqual(((await bNode.store.readState(key))!.state as AWSet).sortedKeys(), ["new", "w", "x", "y", "z"]);
  });

  it("the receiver refuses a delta cut against contexts of its previous life, or before it dropped the partition", async () => {
    for (const lose of ["restart", "drop"] as const) {
      const { bNode, chunks } = await pair();
      let receiver = bNode;
      if (lose === "restart") receiver = await node("b", 22n, { db: bNode.store.db });
      else receiver.x.engine.noteDropped(p);
      const r = await receiver.x.receiveStateStream(chunks);
      assert.ok("refused" in r, `${lose}: accepted`);
      assert.equal(r.refused.code, status.FAILED_PRECONDITION);
      assert.equal(receiver.x.counters.catchUpStale, 1);
      assert.equal(await receiver.store.contains(key, [b("new")]).then((v) => v[0]), false, `${lose}: nothing applied`);
    }
  });

  it("a partition whose keys the receiver held alike is refused at its end, not acknowledged, if the receiver dropped it since it answered", async () => {
    for (const drop of [false, true]) {
      const a = await node("a", 11n);
      const bNode = await node("b", 21n);
      await a.store.add(key, [b("x"), b("y")]);
      await bNode.store.merge(key, ObjectType.AWSET, (await a.store.readState(key))!.state);
      const answer = await bNode.x.answerContexts(a.x.contextsRequest(p));
      assert.ok("reply" in answer);
      const holdings = a.x.holdingsFrom("b", answer.reply)!;
      // seq 3: the sender's deltas of p up to 3 are what an end marker acknowledges.
      const chunks = await collect(a.x.stateStream([{ partition: p, seq: 3 }], async () => holdings));
      assert.deepEqual(chunks.map((c) => [c.key, c.partitionDone]), [["", true]], "the key was held alike: only the end marker goes");
      // The hand-off dropped the partition (its keys with it) after the answer.
      if (drop) bNode.x.engine.noteDropped(p);
      const r = await bNode.x.receiveStateStream(chunks);
      if (!drop) {
        assert.ok("reply" in r, "refused" in r ? r.refused.details : "");
        assert.equal(bNode.x.counters.catchUpStale, 0);
        continue;
      }
      assert.ok("refused" in r, "accepted as whole after a drop");
      assert.equal(r.refused.code, status.FAILED_PRECONDITION);
      assert.equal(bNode.x.counters.catchUpStale, 1);
    }
  });

  it("malformed delta chunks are refused: removes off the last chunk, a delta of a whole-state type, a key mixing both", async () => {
    const { bNode, chunks } = await pair();
    const first = chunks.findIndex((c) => c.key === key);
    const bad: Array<[string, StateChunk[]]> = [
      ["removes on a first chunk", chunks.map((c, i) => (i === first ? { ...c, keyDone: false, rangeOpen: false, removed: { vv: [], cloud: [] } } : c))],
      ["delta of a GBF", chunks.map((c, i) => (i === first ? { ...c, type: ObjectType.GBF, slice: { type: ObjectType.GBF, payload: c.slice!.payload } } : c))],
    ];
    for (const [what, stream] of bad) {
      const r = await bNode.x.receiveStateStream(stream);
      assert.ok("refused" in r, `${what}: accepted`);
      assert.equal(r.refused.code, status.INVALID_ARGUMENT, what);
    }
    assert.equal(await bNode.store.contains(key, [b("new")]).then((v) => v[0]), false, "nothing applied");
  });

  it("a partition another neighbour is pushing is answered busy, and the asker leaves it unacknowledged for later", async () => {
    let now = 1000;
    const receiver = await node("c", 31n, { clock: () => now, contextsClaimMs: 5000 });
    const a = await node("a", 11n);
    const bNode = await node("b", 21n);
    for (const n of [a, bNode]) await n.store.add(key, [b(n === a ? "from-a" : "from-b")]);
    const askA = await receiver.x.answerContexts(a.x.contextsRequest(p));
    assert.ok("reply" in askA && !askA.reply.busy, "the first asker may push");
    const askB = await receiver.x.answerContexts(bNode.x.contextsRequest(p));
    assert.ok("reply" in askB && askB.reply.busy && askB.reply.keys.length === 0, "the second is told to wait");
    const holdings = bNode.x.holdingsFrom("c", askB.reply)!;
    const gen = bNode.x.stateStream([{ partition: p, seq: bNode.x.engine.seq(p) }], async () => holdings);
    const first = await gen.next();
    assert.deepEqual([first.done, first.value], [true, 1], "nothing sent, the partition counted as covered");
    assert.equal(bNode.x.counters.catchUpBusyDeferred, 1);
    // a's push of p ends: the claim goes, b may push (and is told what a brought).
    const fromA = await collect(a.x.stateStream([{ partition: p, seq: a.x.engine.seq(p) }], async () => a.x.holdingsFrom("c", askA.reply)));
    assert.ok("reply" in (await receiver.x.receiveStateStream(fromA)));
    const again = await receiver.x.answerContexts(bNode.x.contextsRequest(p));
    assert.ok("reply" in again && !again.reply.busy && again.reply.keys.some((k) => k.key === key));
    // A claim whose push never starts lapses after contextsClaimMs.
    const q = (p + 1) % PARTITIONS;
    assert.ok("reply" in (await receiver.x.answerContexts(a.x.contextsRequest(q))));
    const waits = await receiver.x.answerContexts(bNode.x.contextsRequest(q));
    assert.ok("reply" in waits && waits.reply.busy);
    now += 5001;
    const lapsed = await receiver.x.answerContexts(bNode.x.contextsRequest(q));
    assert.ok("reply" in lapsed && !lapsed.reply.busy, "the claim lapsed");
  });

  it("a stream asks only about the partitions that hold a key here, ahead of reaching them", async () => {
    const a = await node("a", 11n, { contextsAhead: 2 });
    const keys = ["k1", "k2", "k3", "k4", "k5", "k6"];
    for (const k of keys) await a.store.add(k, [b("v")]);
    const holding = new Set(keys.map((k) => partitionOf(k, PARTITIONS)));
    assert.ok(holding.size < PARTITIONS, "some partitions are empty");
    const asked: number[] = [];
    const order = Array.from({ length: PARTITIONS }, (_, i) => (i + 3) % PARTITIONS);
    const chunks = await collect(
      a.x.stateStream(
        order.map((partition) => ({ partition, seq: 0 })),
        async (partition) => {
          asked.push(partition);
          return undefined;
        },
      ),
    );
    assert.deepEqual(asked, order.filter((q) => holding.has(q)), "each partition holding a key once, in stream order");
    assert.deepEqual(new Set(chunks.map((c) => c.key)), new Set(keys), "every key still sent whole");
    // Algorithm 1 pushes full state as its routine: whole, without asking.
    const alg1 = await node("a1", 12n, { sync: { algorithm: 1, transitive: true, choose: "state" } });
    for (const k of keys) await alg1.store.add(k, [b("v")]);
    asked.length = 0;
    const whole = await collect(alg1.x.stateStream(order.map((partition) => ({ partition, seq: 0 })), async (partition) => (asked.push(partition), undefined)));
    assert.deepEqual(asked, [], "Algorithm 1 asked");
    assert.deepEqual(new Set(whole.map((c) => c.key)), new Set(keys));
  });

  it("a stream that ends, even one without any chunk, ends its sender's claims", async () => {
    const receiver = await node("c", 31n, { contextsClaimMs: 60_000 });
    const a = await node("a", 11n);
    const bNode = await node("b", 21n);
    const q = (p + 1) % PARTITIONS;
    for (const part of [p, q]) assert.ok("reply" in (await receiver.x.answerContexts(a.x.contextsRequest(part))));
    const busy = await receiver.x.answerContexts(bNode.x.contextsRequest(p));
    assert.ok("reply" in busy && busy.reply.busy, "claimed by a");
    // a held everything alike, so its stream carried nothing: the call's header names it.
    assert.ok("reply" in (await receiver.x.receiveStateStream([], "a")));
    for (const part of [p, q]) {
      const free = await receiver.x.answerContexts(bNode.x.contextsRequest(part));
      assert.ok("reply" in free && !free.reply.busy, `partition ${part} free once a's stream ended`);
    }
    // b now holds p (it asked last). Another sender's stream ending leaves that claim alone.
    await receiver.x.receiveStateStream([], "other");
    const stillB = await receiver.x.answerContexts(a.x.contextsRequest(p));
    assert.ok("reply" in stillB && stillB.reply.busy, "b's claim holds");
  });

  it("a Contexts answer stops at its byte limit, in key order, and says it is incomplete", async () => {
    const a = await node("a", 11n);
    const keys = Array.from({ length: 200 }, (_, i) => `k${i}`).filter((k) => partitionOf(k, PARTITIONS) === p);
    for (const k of keys) await a.store.add(k, [b("v")]);
    const req = { cluster: "t", from: "b", partitions: PARTITIONS, boot: 5n, partition: p, startAfter: "" };
    const whole = await a.x.answerContexts(req);
    assert.ok("reply" in whole && whole.reply.complete && whole.reply.keys.length === keys.length);
    const listed = whole.reply.keys.map((k) => k.key);
    assert.deepEqual(listed, [...listed].sort(), "key order");
    const limited = await node("a", 12n, { db: a.store.db, contextsReplyBytes: 100 });
    const cut = await limited.x.answerContexts(req);
    assert.ok("reply" in cut && !cut.reply.complete);
    assert.ok(cut.reply.keys.length >= 1 && cut.reply.keys.length < keys.length, `${cut.reply.keys.length} listed`);
    assert.deepEqual(cut.reply.keys.map((k) => k.key), listed.slice(0, cut.reply.keys.length), "the first keys, in key order");
    // Page after page from the last key listed: every key once, in order, the last page complete.
    const paged: string[] = [];
    let page = cut.reply;
    for (let i = 0; i < keys.length + 1; i++) {
      paged.push(...page.keys.map((k) => k.key));
      if (page.complete) break;
      const next = await limited.x.answerContexts({ ...req, startAfter: page.keys.at(-1)!.key });
      assert.ok("reply" in next);
      page = next.reply;
    }
    assert.ok(page.complete);
    assert.deepEqual(paged, listed);
  });
});
