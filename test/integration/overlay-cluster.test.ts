// Nine real nodes with --gossip-overlay fingers: each gossips with its ring fingers only (six of
// the eight others at n = 9, the same set the pure overlay computes), writes on several nodes reach
// every node, and after a node is killed the survivors' overlay is rebuilt from membership and
// writes still reach every survivor.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fingerNeighbours } from "../../services/gossip/overlay.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-overlay-"));
const addrs = Array.from({ length: 9 }, (_, i) => `127.0.2.${i + 1}:7901`);
const FLAGS = ["--gossip-overlay", "fingers", "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "200", "--reap-after-ms", "3000", "--partitions", "8"];
const c = new TestCluster(dir, addrs, FLAGS, "f");
const ids = addrs.map((_, i) => `f${i}`);

/** The neighbours node i logged last ("gossip neighbours"). */
function loggedNeighbours(i: number): string[] | undefined {
  const lines = c.nodes.get(i)?.logs().split("\n").filter((l) => l.includes('"msg":"gossip neighbours"')) ?? [];
  const last = lines.at(-1);
  return last === undefined ? undefined : (JSON.parse(last).neighbours as string[]);
}

before(async () => {
  await c.startAll(["--log-level", "info"]);
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("nine nodes on the finger overlay", () => {
  it("gossip with their fingers only", { timeout: 120_000 }, async () => {
    for (let i = 0; i < 9; i++) {
      const want = fingerNeighbours(ids[i]!, ids);
      assert.equal(want.length, 6);
      await eventually(`node ${i}'s neighbours`, async () => loggedNeighbours(i), (n) => JSON.stringify(n) === JSON.stringify(want), 60_000);
    }
  });

  it("spread writes made on several nodes to all nine", { timeout: 120_000 }, async () => {
    for (const i of [0, 4, 8]) await c.add(i, "spread", [`from-${i}-a`, `from-${i}-b`]);
    await c.converged("spread", [0, 1, 2, 3, 4, 5, 6, 7, 8], ["from-0-a", "from-0-b", "from-4-a", "from-4-b", "from-8-a", "from-8-b"], 60_000);
  });

  it("rebuild the overlay when a node dies, and still reach every survivor", { timeout: 120_000 }, async () => {
    await c.kill(3);
    const survivors = ids.filter((id) => id !== "f3");
    for (const i of [0, 1, 2, 4, 5, 6, 7, 8]) {
      const want = fingerNeighbours(ids[i]!, survivors);
      await eventually(`node ${i}'s neighbours without f3`, async () => loggedNeighbours(i), (n) => JSON.stringify(n) === JSON.stringify(want), 60_000);
    }
    await c.add(5, "after-death", ["x", "y"]);
    await c.converged("after-death", [0, 1, 2, 4, 5, 6, 7, 8], ["x", "y"], 60_000);
  });
});
