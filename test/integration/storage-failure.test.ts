// Fail-stop on a failed storage write, with a real node process and real LevelDB: the node runs
// under a limit on the size of the files it writes (RLIMIT_FSIZE), so once its write-ahead log
// reaches it, LevelDB's write fails with EFBIG, as a write fails on a full disk. The write in
// flight is answered UNAVAILABLE naming the storage failure, the node stops serving and its
// process exits 1 saying why, and a restart on the same data directory (without the limit) holds
// every add that was acknowledged.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { once } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-storage-failure-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** 1 MiB: LevelDB's log reaches it long before its 4 MiB memtable would start a new one. */
const LIMIT_KIB = 1024;
const BATCH = 200;
const MAX_BATCHES = 2_000;

describe("a failed storage write stops the node (fail-stop), and nothing acknowledged is lost", () => {
  it("the write is refused UNAVAILABLE naming the storage, the process exits 1, and a restart holds every acknowledged add", async () => {
    const data = join(dir, "data");
    const flags = ["--data-dir", data, "--node-id", "solo", "--log-level", "info"];
    const node = await startNodeProcess(["--listen", "127.0.0.36:0", ...flags], {}, 30_000, LIMIT_KIB);
    const exited = once(node.child, "exit");
    const client = replicaClient(node.address);
    const acknowledged: string[] = [];
    let refusal: grpc.ServiceError | undefined;
    try {
      for (let b = 0; b < MAX_BATCHES && refusal === undefined; b++) {
        const names = Array.from({ length: BATCH }, (_, i) => `element-${b}-${i}-${"x".repeat(24)}`);
        try {
          await call(client, client.add, { key: "k", elements: names.map((n) => Buffer.from(n)), texts: [] }, { timeoutMs: 10_000 });
          acknowledged.push(...names);
        } catch (err) {
          refusal = err as grpc.ServiceError;
        }
      }
    } finally {
      client.close();
    }
    assert.ok(refusal !== undefined, `no write failed in ${MAX_BATCHES} batches of ${BATCH}`);
    assert.ok(acknowledged.length > 0, "the limit left no room for a first write");
    assert.equal(refusal.code, grpc.status.UNAVAILABLE, `${grpc.status[refusal.code]}: ${refusal.details}`);
    assert.match(refusal.details, /storage failed to write .*File too large.*retry/i);

    let timer: NodeJS.Timeout | undefined;
    const [code] = await Promise.race([exited, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("the node did not exit")), 30_000)))]);
    clearTimeout(timer);
    assert.equal(code, 1);
    assert.match(node.logs(), /storage write failed: the node stops/);
    assert.match(node.logs(), /deltaset node: the node's storage failed to write/);

    // The same directory without the limit: LevelDB recovers its log, every acknowledged add is there.
    const again = await startNodeProcess(["--listen", "127.0.0.36:0", ...flags]);
    const c2 = replicaClient(again.address);
    try {
      const present = new Set<string>();
      for (let from = 0; from < acknowledged.length; from += 1000) {
        const chunk = acknowledged.slice(from, from + 1000);
        const r = await call(c2, c2.query, { key: "k", elements: chunk.map((n) => Buffer.from(n)), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
        r.presence.forEach((p, i) => p.present && present.add(chunk[i]!));
      }
      assert.equal(present.size, acknowledged.length, `${acknowledged.length - present.size} of ${acknowledged.length} acknowledged adds missing after the restart`);
    } finally {
      c2.close();
      await again.stop();
    }
  });

  it("a node whose storage refuses its first writes does not start: one line saying why, exit 1", async () => {
    // 1 KiB: enough for LevelDB to open, not for the node's first records.
    await assert.rejects(
      startNodeProcess(["--listen", "127.0.0.37:0", "--data-dir", join(dir, "tiny"), "--log-level", "warn"], {}, 30_000, 1),
      (err: Error) => /exited with 1 before listening/.test(err.message) && /deltaset node: the node's storage failed to write \(IO error: .*File too large\)\n/.test(err.message) && !/\n\s+at /.test(err.message),
    );
  });
});
