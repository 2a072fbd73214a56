// A received gossip frame joins its keys into the store at once rather than one after another:
// their writes share group commits, so a frame of many keys waits for about one durable write
// instead of one per key (GossipExchange.receiveFrame, on a real LevelDB store with fsync). And
// the bounded runner it uses keeps its limit, runs everything and reports the first failure.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { AWSet, ObjectType } from "../../services/crdt/index.ts";
import { type GossipFrame, PayloadKind } from "../../services/gen/deltaset/v1/gossip.ts";
import { GossipExchange } from "../../services/gossip/exchange.ts";
import { keyedToProto } from "../../services/gossip/keyed-states.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { createLogger } from "../../services/common/logger.ts";
import { forEachBounded } from "../../services/common/bounded.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-frame-keys-"));
after(() => rmSync(root, { recursive: true, force: true }));
const P = 16;

async function members(store: Store, key: string): Promise<string[]> {
  const s = await store.readState(key);
  return s === undefined ? [] : (s.state as AWSet).elements().map((e) => e.toString()).sort();
}

describe("receiving a frame of many keys", () => {
  it("joins every key, durably, in about one group commit, and acks each payload", async () => {
    const dir = join(root, "many");
    const store = await Store.open({ dir, nodeId: "a", partitions: P, partitionOf, sync: "fsync" });
    const x = await GossipExchange.create(
      { store, log: createLogger("error"), cluster: "t", partitions: P, sync: { algorithm: 2, bp: true, rr: true, maxBufferBytes: 1 << 20 }, stateChunkEntries: 100, maxMessageBytes: 4 << 20, boot: 7n, random: () => 0.5 },
      (id) => id === "b",
    );
    // 12 keys, each with its own element added under replica z, spread over the partitions.
    const keys = Array.from({ length: 12 }, (_, i) => `frame-key-${i}`);
    const byPartition = new Map<number, Map<string, { type: ObjectType; state: AWSet }>>();
    for (const key of keys) {
      const p = partitionOf(key, P);
      if (!byPartition.has(p)) byPartition.set(p, new Map());
      byPartition.get(p)!.set(key, { type: ObjectType.AWSET, state: AWSet.bottom().add("z", [Buffer.from(`${key}-e`)]) });
    }
    const frame: GossipFrame = {
      cluster: "t", from: "b", partitions: P, boot: 3n, frameId: 1n, acks: [], dropped: [], leaving: false, mac: Buffer.alloc(0),
      payloads: [...byPartition].map(([partition, states]) => ({ partition, kind: PayloadKind.DELTA, seq: 5n, keys: keyedToProto(states, Date.now()) })),
    };
    const before = store.stats().batches;
    const answer = await x.receiveFrame(frame);
    assert.ok("reply" in answer, "refused" in answer ? answer.refused.details : "");
    // Sequential joins took one group commit per key (12); joined at once they share them.
    const batches = store.stats().batches - before;
    assert.ok(batches <= 3, `the frame's ${keys.length} keys took ${batches} group commits`);
    assert.deepEqual(answer.reply.acks.map((a) => a.partition).sort((a, b) => a - b), [...byPartition.keys()].sort((a, b) => a - b));
    await store.close();
    const reopened = await Store.open({ dir, nodeId: "a", partitions: P, partitionOf, sync: "fsync" });
    try {
      for (const key of keys) assert.deepEqual(await members(reopened, key), [`${key}-e`], key);
    } finally {
      await reopened.close();
    }
  });
});

describe("forEachBounded", () => {
  it("runs every item with at most the limit running at once", async () => {
    for (const [n, limit] of [[0, 3], [1, 3], [2, 5], [10, 3], [25, 1], [7, 7]] as const) {
      let running = 0;
      let most = 0;
      const seen: number[] = [];
      await forEachBounded(Array.from({ length: n }, (_, i) => i), limit, async (item, index) => {
        assert.equal(item, index);
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, (item * 7) % 3));
        seen.push(item);
        running--;
      });
      assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i), `n=${n} limit=${limit}`);
      assert.ok(most <= Math.max(1, limit), `n=${n}: ${most} ran at once, limit ${limit}`);
      if (n >= limit && n > 1) assert.equal(most, limit, `n=${n}: the limit is used`);
    }
  });

  it("rejects with the first failure once the running calls settle, and starts nothing after it", async () => {
    const started: number[] = [];
    let settled = 0;
    const run = forEachBounded([0, 1, 2, 3, 4, 5, 6, 7], 2, async (i) => {
      started.push(i);
      await new Promise((r) => setTimeout(r, i === 1 ? 1 : 5));
      settled++;
      if (i === 1) throw new Error("one failed");
      if (i === 2) throw new Error("a later failure");
    });
    await assert.rejects(run, /one failed/);
    assert.equal(settled, started.length, "every started call had settled");
    assert.ok(started.length < 8, `started ${started.join(",")}`);
  });
});
