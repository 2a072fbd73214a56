// The hand-off of partitions a node holds without owning them (gossip/hand-off.ts), on a real
// LevelDB store and the real engine: the local copy goes only once every owner acknowledged all of
// it and the placement was stable for the grace period; keys owned here, keys with deferred
// removes, and everything after a restart (acks back at 0) stay.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { CausalContext, ObjectType } from "../../services/crdt/index.ts";
import { AntiEntropyEngine } from "../../services/gossip/engine.ts";
import { HandOff } from "../../services/gossip/hand-off.ts";
import { keyedStatesOps } from "../../services/gossip/keyed-states.ts";
import { Ownership } from "../../services/gossip/ownership.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { keyWhere } from "../helpers/placement.ts";
import { createLogger } from "../../services/common/logger.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-handoff-"));
after(() => rmSync(root, { recursive: true, force: true }));
const P = 8;
const b = (s: string) => Buffer.from(s);


async function setup(name: string) {
  const store = await Store.open({ dir: join(root, name), nodeId: "a", partitions: P, partitionOf, sync: "buffered" });
  // R = 1 with peers b and c: this node (a) owns some partitions, b and c the others.
  const own = new Ownership("a", "127.0.0.1:1", P, 1);
  own.setLive(new Map([["b", "127.0.0.1:2"], ["c", "127.0.0.1:3"]]));
  const engine = (seqs?: number[]) => {
    const e = new AntiEntropyEngine<unknown>({ self: "a", ops: keyedStatesOps as never, random: () => 0.5, partitions: P, sync: { algorithm: 2, bp: true, rr: true, initialSeqs: seqs }, neighbours: ["b", "c"] });
    e.setPartitionPeers((p) => own.peersOf(p));
    return e;
  };
  return { store, own, engine };
}

/**
 * A hand-off at a whose clock the test moves (clock.now), and a key of a partition b owns, which
 * a owns once b is gone, written here and buffered: b, leaving, ships it here.
 */
async function takenFromB(name: string) {
  const { store, own, engine } = await setup(name);
  const e = engine();
  const clock = { now: 5000 };
  const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => clock.now, successorHoldMs: 10_000 });
  const taken = keyWhere((p) => !own.owns(p) && own.peersOf(p)[0] === "b" && own.ownsOnceGone(p, "b"), name, P);
  await writeBuffered(store, e, taken);
  return { store, own, e, h, clock, taken, p: partitionOf(taken, P) };
}

async function held(store: Store, key: string): Promise<boolean> {
  return (await store.readState(key)) !== undefined;
}

/** An add to key, then the engine told of its delta, as the node does once the write is durable. */
async function writeBuffered(store: Store, e: AntiEntropyEngine<unknown>, key: string, elements: string[] = ["x"]): Promise<void> {
  const r = await store.add(key, elements.map(b));
  e.local(partitionOf(key, P), new Map([[key, { type: ObjectType.AWSET, state: r.delta }]]));
}

/** Every owner of partition p in own's view acknowledges it up to seq (default: all of it). */
function ackAll(own: Ownership, e: AntiEntropyEngine<unknown>, p: number, seq = e.seq(p)): void {
  for (const o of own.peersOf(p)) e.onAcks(o, [{ partition: p, seq }]);
}

describe("hand-off: a partition not owned here is dropped only once its owners acked it", () => {
  it("waits for every owner's ack and for the grace period, then drops only that partition's keys", async () => {
    const { store, own, engine } = await setup("acks");
    const e = engine();
    let now = 0;
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 1000, now: () => now });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    const mine = keyWhere((p) => own.owns(p), "mine", P);
    const p = partitionOf(gone, P);
    const before = store.replicaId;
    for (const key of [gone, mine]) await writeBuffered(store, e, key, ["x", "y"]);
    const [owner] = own.peersOf(p);
    const seq = e.seq(p);
    assert.ok(seq > 0);
    now = 5000;
    assert.deepEqual(h.ready().map((r) => r.partition), [], "no ack yet");
    e.onAcks(owner!, [{ partition: p, seq: seq - 1 }]);
    assert.deepEqual(h.ready().map((r) => r.partition), [], "an ack below the partition's seq does not cover everything held");
    e.onAcks(owner!, [{ partition: p, seq }]);
    assert.deepEqual(h.ready().map((r) => r.partition), [p]);
    // A placement change restarts the grace period.
    own.setLive(new Map([["b", "127.0.0.1:2"]]));
    own.setLive(new Map([["b", "127.0.0.1:2"], ["c", "127.0.0.1:3"]]));
    assert.deepEqual(h.ready().map((r) => r.partition), [], "within the grace period after a change");
    now += 1000;
    assert.deepEqual(h.ready().map((r) => r.partition), [p]);
    await h.run();
    assert.equal(await held(store, gone), false, "the handed-off key is gone here");
    assert.equal(await held(store, mine), true, "a key owned here stays");
    assert.equal(h.counters.keysDropped, 1);
    assert.ok(h.counters.bytesDropped > 0);
    assert.equal(h.counters.partitionsDropped, 1);
    const left: string[] = [];
    for await (const k of store.keys(p)) left.push(k);
    assert.deepEqual(left, []);
    // A later add to the dropped key must not reuse a dot the owners have seen: a new replica id.
    assert.notEqual(store.replicaId, before);
    const again = await store.add(gone, [b("z")]);
    assert.equal(again.dots[0]!.replica, store.replicaId);
    await store.close();
  });

  it("a leaving node drops nothing, though its partitions' owners acked them", async () => {
    const { store, own, engine } = await setup("leaving");
    const e = engine();
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 5000 });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    await writeBuffered(store, e, gone);
    ackAll(own, e, partitionOf(gone, P));
    assert.deepEqual(h.ready().map((r) => r.partition), [partitionOf(gone, P)], "ready to drop");
    own.startLeaving();
    await h.run();
    assert.equal(await held(store, gone), true, "kept while leaving");
    assert.equal(h.counters.partitionsDropped, 0);
    await store.close();
  });

  it("counts an owner's ack only if that owner was heard since the placement last changed (a node killed a moment ago is an owner until suspected)", async () => {
    const { store, own, engine } = await setup("heard");
    const e = engine();
    const now = 5000;
    const heard = new Map<string, number>();
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => now, heardSince: (peer, since) => (heard.get(peer) ?? -Infinity) >= since });
    const gone = keyWhere((p) => !own.owns(p), "unheard", P);
    const p = partitionOf(gone, P);
    await writeBuffered(store, e, gone);
    const [owner] = own.peersOf(p);
    // The owner acked it all before it died: its acks stand, yet nothing of it was heard since.
    e.onAcks(owner!, [{ partition: p, seq: e.seq(p) }]);
    heard.set(owner!, 4999);
    assert.deepEqual(h.ready().map((x) => x.partition), [], "not heard since the placement changed: no drop");
    assert.equal(h.waitingToHear, true, "the caller is told to greet the owners");
    await h.run();
    assert.equal(await held(store, gone), true);
    heard.set(owner!, 5000);
    assert.deepEqual(h.ready().map((x) => x.partition), [p]);
    assert.equal(h.waitingToHear, false);
    await h.run();
    assert.equal(await held(store, gone), false);
    await store.close();
  });

  it("a partition taken from a leaving owner as its successor is kept, though the owner acked it, until the hold runs out", async () => {
    const { store, e, h, clock, taken, p } = await takenFromB("successor");
    h.takenAsSuccessor(p, "b");
    // b holds it all and says so: without the hold this is a drop, and b would leave with the only other copy.
    e.onAcks("b", [{ partition: p, seq: e.seq(p) }]);
    assert.deepEqual(h.ready().map((x) => x.partition), [], "held after the successor's receipt");
    await h.run();
    assert.equal(await held(store, taken), true);
    clock.now += 9_999;
    assert.deepEqual(h.ready().map((x) => x.partition), []);
    // b never left (views only differed): once the hold ran out, the usual drop.
    clock.now += 1;
    assert.deepEqual(h.ready().map((x) => x.partition), [p]);
    await h.run();
    assert.equal(await held(store, taken), false);
    await store.close();
  });

  it("a partition taken from an owner that said it leaves is kept while that owner is in the view, however long", async () => {
    const { store, own, e, h, clock, taken, p } = await takenFromB("successor-leaving");
    assert.equal(own.peerLeaving("b", true), true);
    h.takenAsSuccessor(p, "b");
    e.onAcks("b", [{ partition: p, seq: e.seq(p) }]);
    // b's leave has not arrived (lost, or b stalled before sending it): a time-based hold ran out
    // here and dropped the copy b then left without.
    clock.now += 60_000;
    assert.deepEqual(h.ready().map((x) => x.partition), [], "held while b, leaving, is in the view");
    await h.run();
    assert.equal(await held(store, taken), true);
    // b is gone: the partition is this node's.
    own.setLive(new Map([["c", "127.0.0.1:3"]]));
    assert.ok(own.owns(p));
    clock.now += 60_000;
    await h.run();
    assert.equal(await held(store, taken), true);
    await store.close();
  });

  it("a partition whose durable local changes still wait outside the buffer (the gossip's local gate) is not dropped", async () => {
    const { store, own, engine } = await setup("gate");
    const e = engine();
    let waiting = true;
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0, localChangesWaiting: () => waiting });
    const gone = keyWhere((p) => !own.owns(p), "gate", P);
    const p = partitionOf(gone, P);
    await writeBuffered(store, e, gone);
    ackAll(own, e, p);
    // A later write of the key is durable here but held behind a stream being joined: no seq yet,
    // so the owners' acks above do not cover it.
    await store.add(gone, [b("held")]);
    assert.deepEqual(h.ready().map((x) => x.partition), []);
    await h.run();
    assert.deepEqual((await store.readState(gone)) !== undefined, true, "kept while a change waits");
    waiting = false;
    assert.deepEqual(h.ready().map((x) => x.partition), [p]);
    await store.close();
  });

  it("after a restart nothing is dropped until the owners acknowledge the full state again", async () => {
    const { store, own, engine } = await setup("restart");
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    const p = partitionOf(gone, P);
    await store.add(gone, [b("x")]);
    // A restarted node: seqs past the durable ones, every ack at 0.
    const e = engine(Array.from({ length: P }, () => 7));
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0 });
    assert.deepEqual(h.ready().map((r) => r.partition), []);
    await h.run();
    assert.equal(await held(store, gone), true);
    ackAll(own, e, p, 7);
    await h.run();
    assert.equal(await held(store, gone), false);
    await store.close();
  });

  it("keeps a key whose deferred removes wait here (they exist nowhere else)", async () => {
    const { store, own, engine } = await setup("pending");
    const e = engine(Array.from({ length: P }, () => 3));
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0 });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    const p = partitionOf(gone, P);
    await store.add(gone, [b("x")]);
    // A remove of an add this node has not seen yet waits here.
    const r = await store.remove(gone, [b("x")], CausalContext.of([{ replica: "elsewhere~1", counter: 4 }]));
    assert.equal(r.pending, 1);
    ackAll(own, e, p, 3);
    await h.run();
    assert.equal(await held(store, gone), true);
    assert.equal(h.counters.keysKept, 1);
    assert.equal(h.counters.keysDropped, 0);
    await store.close();
  });

  it("gives a key's deferred removes to an owner, then drops the key", async () => {
    const { store, own, engine } = await setup("pending-handover");
    const e = engine(Array.from({ length: P }, () => 3));
    const given: Array<{ key: string; element: string; unseen: string }> = [];
    let refuse = true;
    const h = new HandOff({
      store,
      engine: e,
      ownership: own,
      log: createLogger("error"),
      graceMs: 0,
      now: () => 0,
      handOverRemove: async (key, element, unseen) => {
        if (refuse) throw new Error("no owner answered");
        given.push({ key, element: element.toString(), unseen: JSON.stringify([...unseen.dots()]) });
      },
    });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    const p = partitionOf(gone, P);
    await store.add(gone, [b("x")]);
    await store.remove(gone, [b("x")], CausalContext.of([{ replica: "elsewhere~1", counter: 4 }]));
    ackAll(own, e, p, 3);
    await h.run();
    assert.equal(await held(store, gone), true, "kept while no owner took the remove");
    assert.equal(store.pendingRemoves(gone), 1);
    refuse = false;
    await h.run();
    assert.equal(given.length, 1);
    assert.equal(given[0]!.key, gone);
    assert.equal(given[0]!.element, "x");
    assert.equal(given[0]!.unseen, JSON.stringify([{ replica: "elsewhere~1", counter: 4 }]), "the dots the remove waits for");
    assert.equal(store.pendingRemoves(gone), 0, "forgotten here once an owner took it");
    assert.equal(await held(store, gone), false);
    assert.equal(h.counters.removesHandedOver, 1);
    await store.close();
  });

  it("keeps a key a write reached after the partition's acks were checked, and drops it once that write is acked", async () => {
    const { store, own, engine } = await setup("late-write");
    const e = engine();
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0 });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    const p = partitionOf(gone, P);
    await writeBuffered(store, e, gone);
    ackAll(own, e, p);
    // The write lands between hand-off's check of the partition and the drop of the key: the id
    // rotation is the last step before the drop, so the write is started there.
    const rotate = store.rotateReplicaId.bind(store);
    let late: Promise<void> | undefined;
    store.rotateReplicaId = async () => {
      late ??= writeBuffered(store, e, gone, ["late"]);
      return rotate();
    };
    await h.run();
    await late;
    assert.equal(await held(store, gone), true, "not dropped: the owners have not acked the late write");
    assert.equal(h.counters.keysDropped, 0);
    ackAll(own, e, p);
    await h.run();
    assert.equal(await held(store, gone), false, "dropped once the owners acked it");
    await store.close();
  });

  it("a key written to a partition after its drop scanned past it is dropped by a later run, not left behind", async () => {
    const { store, own, engine } = await setup("behind-scan");
    const e = engine();
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0 });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    const p = partitionOf(gone, P);
    const other = keyWhere((q) => q === p, `${gone}-late`, P);
    await writeBuffered(store, e, gone);
    ackAll(own, e, p);
    // The write lands once the drop's scan has passed every key (a forwarded write a node serves
    // whatever its view says): the scan ends without seeing it.
    const keys = store.keys.bind(store);
    let once = true;
    store.keys = async function* (q: number) {
      yield* keys(q);
      if (q === p && once) {
        once = false;
        await writeBuffered(store, e, other);
      }
    };
    await h.run();
    assert.equal(await held(store, gone), false);
    assert.equal(await held(store, other), true, "written after the scan: not dropped in that run");
    ackAll(own, e, p);
    await h.run();
    assert.equal(await held(store, other), false, "dropped once the owners acked it, not left behind");
    await store.close();
  });

  it("drops a partition only against the seq its owners acknowledged, though a write reached it while another partition was dropped", async () => {
    const { store, own, engine } = await setup("stale-seq");
    const e = engine();
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0 });
    // Two partitions not owned here, both acked by their owners.
    const first = keyWhere((p) => !own.owns(p), "first", P);
    const second = keyWhere((p) => !own.owns(p) && p !== partitionOf(first, P), "second", P);
    await writeBuffered(store, e, first, ["x"]);
    await writeBuffered(store, e, second, ["y"]);
    for (const key of [first, second]) ackAll(own, e, partitionOf(key, P));
    const ready = h.ready().map((r) => r.partition);
    assert.ok(ready.includes(partitionOf(first, P)) && ready.includes(partitionOf(second, P)));
    // While the first partition's key is dropped, a write reaches the second (a call forwarded
    // here by a node whose view lags): its owners have not acknowledged it.
    const drop = store.dropLocalCopy.bind(store);
    let late: Promise<void> | undefined;
    store.dropLocalCopy = async (key, still) => {
      if (key === first) late ??= writeBuffered(store, e, second, ["late"]);
      await late;
      return drop(key, still);
    };
    await h.run();
    assert.equal(await held(store, first), false, "the first partition went");
    assert.equal(await held(store, second), true, "the second was dropped against a seq its owners never acknowledged");
    assert.deepEqual(await store.contains(second, [b("y"), b("late")]), [true, true]);
    await store.close();
  });

  it("keeps a key whose chunked transfer is under way", async () => {
    const { store } = await setup("transfer");
    await store.add("k", [b("x")]);
    const release = await store.beginTransfer("k");
    assert.equal(await store.dropLocalCopy("k"), false, "dropped between the chunks of a transfer");
    release();
    assert.ok((await store.dropLocalCopy("k")) !== false);
    assert.equal(await held(store, "k"), false);
    await store.close();
  });

  it("with R = all nothing is ever dropped", async () => {
    const store = await Store.open({ dir: join(root, "all"), nodeId: "a", partitions: P, partitionOf, sync: "buffered" });
    const own = new Ownership("a", "127.0.0.1:1", P, "all");
    own.setLive(new Map([["b", "127.0.0.1:2"]]));
    const e = new AntiEntropyEngine<unknown>({ self: "a", ops: keyedStatesOps as never, random: () => 0.5, partitions: P, sync: { algorithm: 2, bp: true, rr: true, initialSeqs: Array.from({ length: P }, () => 2) }, neighbours: ["b"] });
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("error"), graceMs: 0, now: () => 0 });
    await store.add("k", [b("x")]);
    for (let p = 0; p < P; p++) e.onAcks("b", [{ partition: p, seq: 2 }]);
    assert.deepEqual(h.ready().map((r) => r.partition), []);
    await h.run();
    assert.equal(await held(store, "k"), true);
    await store.close();
  });

  it("a run the store's close cuts short warns of nothing (the node stops; there is nothing to retry)", async () => {
    const { store, own, engine } = await setup("closing");
    const e = engine(Array.from({ length: P }, () => 7));
    const lines: string[] = [];
    const h = new HandOff({ store, engine: e, ownership: own, log: createLogger("warn", {}, (l) => lines.push(l)), graceMs: 0, now: () => 0 });
    const gone = keyWhere((p) => !own.owns(p), "gone", P);
    await store.add(gone, [b("x")]);
    ackAll(own, e, partitionOf(gone, P), 7);
    await store.close();
    await h.run();
    assert.deepEqual(lines, []);
  });
});
