// The shrink gate's gauge (deltaset_gossip_oldest_unacked_seconds): everything older than it is on
// every live owner. A suspected peer may be dead with what it acknowledged, so while one is a peer
// of a partition the gauge reads Infinity (unknown), not the age its acks give.
// Before, replacing a crashed node read below 3 s with the dead node still suspected and one
// owner holding the only copy; killing that owner next lost keys (outside check).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { ObjectType } from "../../services/crdt/index.js";
import { GossipExchange } from "../../services/gossip/index.js";
import { partitionOf } from "../../services/gossip/partition.js";
import { Store } from "../../services/store/store.js";
import { ALG2_BP_RR } from "./gossip-helpers.js";

const PARTITIONS = 8;
const quiet = { debug() {}, info() {}, warn() {}, error() {} } as never;

describe("oldest unacknowledged change", () => {
  it("reads Infinity while a peer of a partition is suspected, the acknowledged age otherwise", async () => {
    let now = 1_000;
    const store = await Store.open({ dir: "memory", nodeId: "a", replicaId: "a~1", partitions: PARTITIONS, partitionOf, sync: "buffered" });
    const x = await GossipExchange.create({ store, log: quiet, cluster: "t", partitions: PARTITIONS, sync: ALG2_BP_RR, stateChunkEntries: 4, maxMessageBytes: 1 << 20, boot: 1n, random: () => 0.5, clock: () => now }, () => true);
    x.engine.setNeighbours(["b", "c"]);
    const r = await store.add("k", [Buffer.from("x")]);
    x.local("k", ObjectType.AWSET, r.delta);
    const p = partitionOf("k", PARTITIONS);
    // Both peers acknowledge everything: nothing unacknowledged.
    for (const peer of ["b", "c"]) x.engine.onAcks(peer, [{ partition: p, seq: x.engine.seq(p) }]);
    assert.ok(x.engine.seq(p) > 0, "the change has a seq");
    now += 5_000;
    assert.equal(x.oldestUnackedMs(), 0);
    assert.equal(x.oldestUnackedMs(new Set(["c"])), Infinity, "c acknowledged, but is suspected");
    assert.equal(x.oldestUnackedMs(new Set(["z"])), 0, "a suspect that is no peer of any partition");
    await store.close();
  });
});
