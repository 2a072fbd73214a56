// `deltaset verify` on a real node's data directory: consistent after a workload, refused while
// the node runs, and a damaged dot index is reported with exit status 1.
import { strict as assert } from "node:assert";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { ClassicLevel } from "classic-level";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { dotIndexRange, objectPrefix } from "../../services/store/keys.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { runCli, startNodeProcess } from "../helpers/node-process.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-verify-"));
after(() => rmSync(root, { recursive: true, force: true }));

describe("deltaset verify", () => {
  it("checks a stopped node's directory and reports damage", async () => {
    const dir = join(root, "data");
    const node = await startNodeProcess(["--listen", "127.0.0.93:0", "--data-dir", dir, "--log-level", "warn"]);
    const c = replicaClient(node.address);
    try {
      const els = Array.from({ length: 500 }, (_, i) => Buffer.from(`e${i}`));
      await call(c, c.add, { key: "s1", elements: els, texts: [] });
      await call(c, c.remove, { key: "s1", elements: els.slice(0, 100), texts: [] });
      await call(c, c.add, { key: "s2", elements: [], texts: ["x", "y"] });
      await call(c, c.increment, { key: "n", amount: 5n, requestId: "" });
      const running = await runCli(["verify", "--data-dir", dir]);
      assert.equal(running.code, 1);
      assert.match(running.stderr, /stop it first/);
    } finally {
      c.close();
      assert.equal(await node.stop(), 0);
    }

    const ok = await runCli(["verify", "--data-dir", dir, "--json"]);
    assert.equal(ok.code, 0, ok.stderr);
    const report = JSON.parse(ok.stdout) as { sets: number; otherKeys: number; elements: number; problems: unknown[] };
    assert.deepEqual([report.sets, report.otherKeys, report.elements, report.problems.length], [2, 1, 402, 0]);
    const human = await runCli(["verify", "--data-dir", dir, "s2"]);
    assert.match(human.stdout, /1 set\(s\) with 2 element\(s\).*consistent/);

    // Lose one dot-index bucket of s1: its dots can no longer be found by a remote remove.
    const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: "buffer", valueEncoding: "buffer" });
    await db.open();
    const [bucket] = await db.keys({ ...dotIndexRange(objectPrefix(partitionOf("s1", 64), "s1")), limit: 1 }).all();
    await db.del(bucket!);
    await db.close();
    const bad = await runCli(["verify", "--data-dir", dir]);
    assert.equal(bad.code, 1);
    assert.match(bad.stdout, /s1: dot .* is indexed to nothing/);

    const missing = await runCli(["verify", "--data-dir", join(root, "nothing-here")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /nothing-here does not exist/);
    assert.equal(existsSync(join(root, "nothing-here")), false, "verify created a database where there was none");
    // A directory that holds something other than a store, and a file, are told apart.
    mkdirSync(join(root, "foreign"));
    writeFileSync(join(root, "foreign", "notes.txt"), "x");
    const foreign = await runCli(["verify", "--data-dir", join(root, "foreign")]);
    assert.equal(foreign.code, 1);
    assert.match(foreign.stderr, /holds no LevelDB database/);
    const file = await runCli(["verify", "--data-dir", join(root, "foreign", "notes.txt")]);
    assert.equal(file.code, 1);
    assert.match(file.stderr, /is a file, not a directory/);
  });

  it("reports a damaged data block as a problem, without a stack trace, and leaves its files 0600", async () => {
    const dir = join(root, "damaged");
    const node = await startNodeProcess(["--listen", "127.0.0.93:0", "--data-dir", dir, "--log-level", "warn"]);
    const c = replicaClient(node.address);
    try {
      for (let b = 0; b < 4; b++) await call(c, c.add, { key: "big", elements: Array.from({ length: 5000 }, (_, i) => Buffer.from(`element-${b}-${i}-`.padEnd(60, "x"))), texts: [] });
    } finally {
      c.close();
      assert.equal(await node.stop(), 0);
    }
    // Into table files, then damage the largest in its middle (as a failing disk would).
    const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: "buffer", valueEncoding: "buffer" });
    await db.open();
    await db.compactRange(Buffer.alloc(0), Buffer.alloc(64, 0xff));
    await db.close();
    const tables = readdirSync(dir).filter((f) => f.endsWith(".ldb")).map((f) => join(dir, f));
    assert.ok(tables.length > 0, "no table file after compaction");
    const largest = tables.sort((a, b) => statSync(b).size - statSync(a).size)[0]!;
    const bytes = readFileSync(largest);
    for (let i = 0; i < 64; i++) bytes[Math.floor(bytes.length / 3) + i]! ^= 0xa5;
    writeFileSync(largest, bytes);
    // As the node leaves them (this process's compaction wrote with its own umask).
    for (const f of readdirSync(dir)) chmodSync(join(dir, f), 0o600);

    const r = await runCli(["verify", "--data-dir", dir]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /unreadable: .*orrupt/i);
    assert.doesNotMatch(r.stderr, /triggerUncaughtException|at .*\.js:\d+/);
    for (const f of readdirSync(dir)) assert.equal(statSync(join(dir, f)).mode & 0o077, 0, `${f} is readable by others after verify`);

    // A node on it serves, and answers a read of the damaged key DATA_LOSS naming what to do.
    const again = await startNodeProcess(["--listen", "127.0.0.93:0", "--data-dir", dir, "--log-level", "error"]);
    const c2 = replicaClient(again.address);
    try {
      const err = await new Promise<grpc.ServiceError | undefined>((resolve) => {
        const s = c2.scan({ key: "big", chunkSize: 0, startAfter: Buffer.alloc(0), withText: false });
        s.on("data", () => {});
        s.on("error", resolve);
        s.on("end", () => resolve(undefined));
      });
      assert.equal(err?.code, grpc.status.DATA_LOSS, err?.details);
      assert.match(err!.details, /deltaset verify/);
    } finally {
      c2.close();
      await again.stop();
    }
  });
});
