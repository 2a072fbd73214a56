// --max-concurrent-streams on a real node: one client connection holds at most that many calls
// open at once; a call beyond them waits (HTTP/2 flow control, here until its deadline) and goes
// through once an open stream ends. Without the limit a caller could open streams without end.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-stream-limits-"));
let node: NodeProcess;

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.8.1:0", "--node-id", "s1", "--data-dir", join(dir, "s1"), "--max-concurrent-streams", "2"]);
});
after(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("streams per connection", () => {
  it("a third call on a connection holding two open Watch streams waits until one ends", async () => {
    const c = replicaClient(node.address);
    try {
      await call(c, c.add, { key: "w", elements: [Buffer.from("a")], texts: [] });
      const watches = [0, 1].map(() => {
        const s = c.watch({ key: "w", prefix: "", since: undefined });
        s.on("error", () => {});
        s.on("data", () => {});
        return s;
      });
      await new Promise((r) => setTimeout(r, 300));
      const query = { key: "w", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false };
      const held = await statusOf(call(c, c.query, query, { timeoutMs: 1000 }));
      assert.equal(held.code, grpc.status.DEADLINE_EXCEEDED, "the third call went through beside two open streams");
      watches[0]!.cancel();
      const r = await call(c, c.query, query, { timeoutMs: 5000 });
      assert.equal(Number(r.size), 1);
      watches[1]!.cancel();
    } finally {
      c.close();
    }
  });
});
