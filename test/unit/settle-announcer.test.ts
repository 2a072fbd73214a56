// Settle announcements (gossip/settle-announcer.ts): a key is due once it had no change for the
// quiet time, once per quiet spell, oldest change first; the exchange sends such a key of a
// probabilistic set whole, as its own change, after a join that changed what reads return.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { SettleAnnouncer } from "../../services/gossip/settle-announcer.ts";
import { AWSetProb, DEFAULT_AWSET_PROB_PARAMS } from "../../services/crdt/awset-prob.ts";
import "../../services/crdt/awset-prob-operations.ts"; // registers the AWSET_PROB lattice and layout
import { ObjectType } from "../../services/crdt/index.ts";
import { type GossipFrame, PayloadKind } from "../../services/gen/deltaset/v1/gossip.ts";
import { GossipExchange } from "../../services/gossip/exchange.ts";
import { keyedToProto } from "../../services/gossip/keyed-states.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { createLogger } from "../../services/common/logger.ts";

/** The keys quiet at now, announced: what the exchange does with each (quiet, then done). */
function due<T>(a: SettleAnnouncer<T>, now: number): Array<{ key: string; type: T }> {
  const out = a.quiet(now);
  for (const d of out) a.done(d.key);
  return out.map(({ key, type }) => ({ key, type }));
}

describe("SettleAnnouncer", () => {
  it("a key is due once it was quiet for the quiet time, and then only after a new change", () => {
    const a = new SettleAnnouncer<string>(1000);
    a.touch("k", "T", 0);
    assert.deepEqual(due(a, 999), []);
    assert.deepEqual(due(a, 1000), [{ key: "k", type: "T" }]);
    assert.deepEqual(due(a, 5000), [], "announced once per quiet spell");
    a.touch("k", "T", 6000);
    assert.deepEqual(due(a, 7000), [{ key: "k", type: "T" }]);
    assert.equal(a.pending, 0);
  });

  it("every change restarts the key's quiet time", () => {
    const a = new SettleAnnouncer<string>(1000);
    a.touch("k", "T", 0);
    a.touch("k", "T", 800);
    assert.deepEqual(due(a, 1500), [], "changed 700 ms ago");
    assert.deepEqual(due(a, 1800), [{ key: "k", type: "T" }]);
  });

  it("quiet() lists the due keys without dropping them; done() drops one", () => {
    const a = new SettleAnnouncer<string>(100);
    a.touch("a", "T", 0);
    a.touch("b", "T", 10);
    assert.deepEqual(a.quiet(200).map((d) => d.key), ["a", "b"]);
    a.done("a");
    assert.deepEqual(a.quiet(200).map((d) => d.key), ["b"]);
    assert.equal(a.pending, 1);
  });

  it("a key that never goes quiet is due once maxWaitMs passed since its first unannounced change", () => {
    const a = new SettleAnnouncer<string>(1000, 3000);
    const announcedAt: number[] = [];
    // Changed every 500 ms for 10 s: never quiet for 1000 ms.
    for (let now = 0; now <= 10_000; now += 100) {
      if (now % 500 === 0) a.touch("hot", "T", now);
      if (due(a, now).length > 0) announcedAt.push(now);
    }
    // 3000 after the first change; then 3000 after the first change following each announcement.
    assert.deepEqual(announcedAt, [3000, 6500, 10_000]);
    const b = new SettleAnnouncer<string>(1000); // no max wait: never
    for (let now = 0; now <= 10_000; now += 500) {
      b.touch("hot", "T", now);
      assert.deepEqual(due(b, now), []);
    }
  });

  it("lists overdue keys first, oldest first change first, then quiet ones, each once", () => {
    const a = new SettleAnnouncer<string>(100, 1000);
    a.touch("hot", "T", 0);
    a.touch("both", "T", 10);
    a.touch("both", "T", 20);
    a.touch("calm", "T", 500);
    a.touch("hot", "T", 1000);
    // At 1050: hot and both changed first at 0 and 10 (overdue); both and calm are quiet; hot is not.
    assert.deepEqual(a.quiet(1050), [
      { key: "hot", type: "T", overdue: true },
      { key: "both", type: "T", overdue: false }, // quiet too: due anyway
      { key: "calm", type: "T", overdue: false },
    ]);
  });

  it("returns the keys due, oldest change first, and keeps the others", () => {
    const a = new SettleAnnouncer<string>(100);
    a.touch("a", "T", 0);
    a.touch("b", "T", 10);
    a.touch("c", "T", 50);
    a.touch("a", "T", 60); // a moves behind c
    assert.deepEqual(due(a, 155).map((d) => d.key), ["b", "c"]);
    assert.equal(a.pending, 1);
    assert.deepEqual(due(a, 160).map((d) => d.key), ["a"]);
  });
});

describe("GossipExchange: settle announcements of a probabilistic set", () => {
  const P = 4;
  const key = "prob";
  const frameOf = (state: AWSetProb, id: bigint): GossipFrame => ({
    cluster: "t", from: "b", partitions: P, boot: 3n, frameId: id, acks: [], dropped: [], leaving: false, mac: Buffer.alloc(0),
    payloads: [{ partition: partitionOf(key, P), kind: PayloadKind.DELTA, seq: id, keys: keyedToProto(new Map([[key, { type: ObjectType.AWSET_PROB, state }]]), Date.now()) }],
  });
  async function exchange(settleMaxBytes?: number, settleBytesPerPeriod?: number, more: { settleMaxWaitMs?: number; clock?: () => number } = {}) {
    const store = await Store.open({ dir: "memory", nodeId: "a", partitions: P, partitionOf, sync: "buffered" });
    const x = await GossipExchange.create(
      { store, log: createLogger("error"), cluster: "t", partitions: P, sync: { algorithm: 2, bp: true, rr: true, maxBufferBytes: 1 << 20 }, stateChunkEntries: 100, maxMessageBytes: 4 << 20, boot: 7n, random: () => 0.5, settleMs: 1000, settleMaxBytes, settleBytesPerPeriod, ...more },
      (id) => id === "b" || id === "c",
    );
    x.engine.setNeighbours(["b", "c"]);
    return { store, x };
  }

  it("sends the key whole once it was quiet, once, after a join that changed its reads", async () => {
    const { store, x } = await exchange();
    try {
      const remote = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
      remote.joinInPlace(remote.addDelta(Buffer.from("e"), 42n));
      const t0 = Date.now();
      assert.ok("reply" in (await x.receiveFrame(frameOf(remote, 1n))));
      const p = partitionOf(key, P);
      const before = x.engine.buffered(p).length;
      assert.equal(await x.announceSettled(t0 + 500), 0, "not quiet long enough");
      assert.equal(await x.announceSettled(t0 + 5000), 1);
      const last = x.engine.buffered(p).at(-1)!;
      assert.equal(x.engine.buffered(p).length, before + 1);
      assert.notEqual(last.origin, "b", "announced as this node's own change: b gets it too");
      const announced = last.delta.get(key)!.state as AWSetProb;
      assert.ok(announced.holds(42n), "the whole state, with the dot the join took");
      assert.equal(await x.announceSettled(t0 + 10_000), 0, "once per quiet spell");
      assert.equal(x.counters.settleAnnouncements, 1);
      assert.equal(x.counters.settleOverdue, 0, "announced quiet, not overdue");
      // A join that changes only the filter (a remove of a dot this node never held) is not a change reads see.
      const filterOnly = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
      filterOnly.joinInPlace(filterOnly.addDelta(Buffer.from("x"), 7n));
      filterOnly.joinInPlace(filterOnly.removeDelta(Buffer.from("x")));
      assert.ok("reply" in (await x.receiveFrame(frameOf(filterOnly, 2n))));
      assert.equal(await x.announceSettled(Date.now() + 5000), 0, "a filter-only change is not announced");
    } finally {
      await store.close();
    }
  });

  it("announces at most settleBytesPerPeriod per call (at least one key); the rest wait, in order", async () => {
    const { store, x } = await exchange(undefined, 1);
    try {
      const keys = ["p1", "p2", "p3"];
      for (const [i, k] of keys.entries()) {
        const remote = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
        remote.joinInPlace(remote.addDelta(Buffer.from("e"), BigInt(100 + i)));
        const frame: GossipFrame = {
          cluster: "t", from: "b", partitions: P, boot: 3n, frameId: BigInt(i + 1), acks: [], dropped: [], leaving: false, mac: Buffer.alloc(0),
          payloads: [{ partition: partitionOf(k, P), kind: PayloadKind.DELTA, seq: BigInt(i + 1), keys: keyedToProto(new Map([[k, { type: ObjectType.AWSET_PROB, state: remote }]]), Date.now()) }],
        };
        assert.ok("reply" in (await x.receiveFrame(frame)));
      }
      const later = Date.now() + 5000;
      const announced: string[] = [];
      for (let period = 0; period < 4; period++) {
        const before = keys.map((k) => x.engine.buffered(partitionOf(k, P)).filter((e) => e.origin !== "b" && e.delta.has(k)).length);
        assert.ok((await x.announceSettled(later)) <= 1, "one key a period: each is over the budget");
        keys.forEach((k, i) => {
          if (x.engine.buffered(partitionOf(k, P)).filter((e) => e.origin !== "b" && e.delta.has(k)).length > before[i]!) announced.push(k);
        });
      }
      assert.deepEqual(announced, keys, "every key, one per period, oldest change first");
    } finally {
      await store.close();
    }
  });

  it("does not announce a state larger than settleMaxBytes, and counts it", async () => {
    const { store, x } = await exchange(16);
    try {
      const remote = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
      remote.joinInPlace(remote.addDelta(Buffer.from("e"), 42n));
      assert.ok("reply" in (await x.receiveFrame(frameOf(remote, 1n))));
      assert.equal(await x.announceSettled(Date.now() + 5000), 0);
      assert.equal(x.counters.settleTooLarge, 1);
    } finally {
      await store.close();
    }
  });

  it("announces a key whose reads keep changing once settleMaxWaitMs passed, though it is never quiet", async () => {
    let now = 1_000_000;
    const { store, x } = await exchange(undefined, undefined, { settleMaxWaitMs: 3000, clock: () => now });
    try {
      const p = partitionOf(key, P);
      const announcements = () => x.counters.settleAnnouncements;
      // A new dot from b every 500 ms: each join changes what reads return here.
      for (let i = 0; i < 12; i++) {
        const remote = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
        remote.joinInPlace(remote.addDelta(Buffer.from(`e${i}`), BigInt(1000 + i)));
        assert.ok("reply" in (await x.receiveFrame(frameOf(remote, BigInt(i + 1)))));
        await x.announceSettled(now);
        if (i < 6) assert.equal(announcements(), 0, `not yet at ${i * 500} ms`);
        now += 500;
      }
      assert.equal(announcements(), 1, "once, 3000 ms after the first change, while still changing");
      assert.equal(x.counters.settleOverdue, 1, "counted as overdue");
      const last = x.engine.buffered(p).filter((e) => e.origin !== "b").at(-1)!;
      assert.ok((last.delta.get(key)!.state as AWSetProb).holds(1006n), "the whole state as it was then");
    } finally {
      await store.close();
    }
  });
});
