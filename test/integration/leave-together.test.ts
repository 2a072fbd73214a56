// Nodes that stop at the same moment (a StatefulSet scale-down, podManagementPolicy Parallel),
// on real node processes at R = 1: each ships what it owns to the owners it leaves it to before
// it goes (NodeGossip.ship), and a node that leaves too is not one of them. Their frames and
// replies say they leave (GossipFrame.leaving), a leaving node takes nothing over, and a
// neighbour's acknowledgement counts only once it answered after the shipping began and did not
// say it leaves. Before, two nodes that left together shipped each other's partitions to each
// other, both counted them shipped, and the node that stayed never received them.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { eventually } from "../helpers/eventually.ts";
import { localKeys, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-leave-together-"));
after(() => rmSync(dir, { recursive: true, force: true }));

// A leave that times out (--leave-timeout-ms) keeps what it did not ship on its disk and says so:
// 2 of 74 runs here did not ship to the staying node within 5 s, and one run under CI's load not
// within 20 s (not yet explained). So what is asserted is what the fix guarantees: a key is never
// left behind by a node that reports everything shipped. Without the fix the two count each
// other's acks within milliseconds, report it shipped, and leave the keys behind.
const FLAGS = ["--replication-factor", "1", "--partitions", "16", "--gossip-interval-ms", "200", "--probe-interval-ms", "200", "--probe-timeout-ms", "150", "--leave-timeout-ms", "10000"];
const KEYS = Array.from({ length: 48 }, (_, k) => `k${k}`);

describe("nodes that leave together (R = 1)", () => {
  it("leave the keys they owned with the node that stays, or say they keep them", { timeout: 120_000 }, async () => {
    const c = new TestCluster(dir, ["127.0.11.1:7861", "127.0.11.2:7861", "127.0.11.3:7861"], FLAGS, "l");
    try {
      await c.startAll();
      // Every node places every key alike, over all three.
      await eventually(
        "three members in every view",
        async () => Promise.all([0, 1, 2].map(async (i) => (await Promise.all(KEYS.map((key) => ownersAt(c, i, key)))).join("|"))),
        (v) => v.every((x) => x === v[0]) && new Set(v[0]!.split(/[|,]/)).size === 3,
        30_000,
      );
      const owners = await Promise.all(KEYS.map((key) => ownersAt(c, 2, key)));
      assert.ok(owners.some((o) => o[0] === "l0") && owners.some((o) => o[0] === "l1"), "keys owned by each leaving node");
      // Every key written through the node that stays, forwarded to its owner.
      for (const [k, key] of KEYS.entries()) await c.add(2, key, [`e${k}`]);
      // Both other nodes get SIGTERM at the same moment, and exit cleanly.
      const leaving = [c.nodes.get(0)!, c.nodes.get(1)!];
      const codes = await Promise.all(leaving.map((n) => n.stop()));
      assert.deepEqual(codes, [0, 0]);
      c.nodes.delete(0);
      c.nodes.delete(1);
      // The node that stays owns everything now, and holds it in its own store.
      const held = await localKeys(c, 2);
      const kept = leaving.map((n) => /leaving with changes no neighbour acknowledged yet/.test(n.logs()));
      const shipped = leaving.map((n) => /changes shipped to neighbours before leaving/.test(n.logs()));
      // Which leaving node owned key k (-1: the node that stays).
      const leaver = (k: number) => ["l0", "l1"].indexOf(owners[k]![0]!);
      // Taken silently: a key whose owner left reporting everything shipped.
      const silently = KEYS.filter((key, k) => !held.has(key) && !(leaver(k) >= 0 && kept[leaver(k)]));
      if (silently.length > 0) for (const n of [...leaving, c.nodes.get(2)!]) console.error(n.logs());
      assert.deepEqual(silently, [], "keys a leaving node took with it while it reported everything shipped");
      // A node that reports everything shipped left all it owned with the node that stays.
      for (const [k, key] of KEYS.entries()) if (leaver(k) < 0 || shipped[leaver(k)]) assert.deepEqual(await c.read(2, key), [`e${k}`]);
      // Peers drop a leaving node from their views as it goes: expected, so not warned about.
      for (const n of leaving) assert.doesNotMatch(n.logs(), /a peer refuses this node's gossip/, "a clean leave warned of refused gossip");
      if (!shipped.every(Boolean)) console.error(`leave timed out on ${shipped.filter((x) => !x).length} of 2 nodes: their keys stay on their disks`);
    } finally {
      await c.close();
    }
  });
});
