// A node tells every extension of each durable local change (the gossip engine is one): one that
// throws is logged, and the others are still told; the call that made the change still succeeds.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { createLogger } from "../../services/common/logger.ts";
import { loadConfig } from "../../services/node/config.ts";
import { startNode } from "../../services/node/node.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-extensions-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("node extensions", () => {
  it("a local-change listener that throws does not keep the next from hearing of the change", async () => {
    const lines: string[] = [];
    const log = createLogger("error", {}, (l) => lines.push(l));
    const told: string[] = [];
    const node = await startNode(loadConfig({ listen: "127.0.0.74:0", "data-dir": join(dir, "n") }, {}), log, [
      () => ({ onLocalDelta: () => { throw new Error("listener broke"); } }),
      () => ({ onLocalDelta: (key) => void told.push(key) }),
    ]);
    const c = replicaClient(node.address);
    try {
      const r = await call(c, c.add, { key: "k", elements: [Buffer.from("a")], texts: [] });
      assert.equal(r.added, 1);
      assert.deepEqual(told, ["k"], "the second listener was told");
      assert.ok(lines.some((l) => /local delta listener failed/.test(l) && /listener broke/.test(l)), lines.join("\n"));
    } finally {
      c.close();
      await node.stop();
    }
  });
});
