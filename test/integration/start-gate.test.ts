// A node answers client calls only once its first join through the seeds has ended: before, it
// knew no other member, took every key for its own, and answered a read of a key another node
// owns as absent (an outside check: 6 of 15 restarts, in the 10-37 ms before the join). Real node
// processes at R = 1: a key lives on sg0; sg1 starts (then restarts) with sg0 as its seed and is
// read at once, the moment it says it listens.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { call } from "../../services/client/rpc.ts";
import { keyWhere } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { Ownership } from "../../services/gossip/ownership.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-start-gate-"));
const PARTITIONS = 16;
const FLAGS = ["--replication-factor", "1", "--partitions", String(PARTITIONS), "--probe-interval-ms", "200", "--probe-timeout-ms", "150", "--leave-timeout-ms", "500"];
const c = new TestCluster(dir, ["127.0.13.1:7131", "127.0.13.2:7132"], FLAGS, "sg");
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Members of key by Query through node i, or the error's code. */
async function queried(i: number, key: string): Promise<number | string> {
  try {
    const r = await c.replica(i, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 1000, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 5000 }));
    return r.members.length;
  } catch (err) {
    return `error ${(err as { code?: number }).code}`;
  }
}

describe("a starting node", () => {
  it("answers reads of keys others own only once it knows them", { timeout: 90_000 }, async () => {
    const two = new Ownership("sg0", "a", PARTITIONS, 1);
    two.setLive(new Map([["sg1", "b"]]));
    const keys = Array.from({ length: 4 }, (_, k) => keyWhere((p) => two.ownersOf(p)[0] === "sg0", `sg-key-${k}-`, PARTITIONS));
    await c.start(0);
    for (const key of keys) await c.add(0, key, Array.from({ length: 50 }, (_, j) => `e${j}`));
    for (const round of ["start", "restart"]) {
      if (round === "restart") await c.nodes.get(1)!.stop();
      await c.start(1);
      // At once: the node said it listens, so it answers as a member of the cluster.
      const answers = await Promise.all(keys.map((key) => queried(1, key)));
      assert.deepEqual(answers, keys.map(() => 50), `${round}: reads through sg1 as soon as it listens`);
    }
  });
});
