// A write concern (`copies` on Add, Remove, Increment, Delete, Merge, Import and AddStream), with real node processes: a write
// answered with copies N is on N nodes' disks when the client reads the answer, so it survives
// its own node's SIGKILL at once; one that cannot have its copies now changes nothing, and one
// whose copies do not come within the deadline says how many it got and stays made.
// The gossip period is 10 s and local pushes are off, so ordinary gossip cannot be what brought
// a write to the other nodes within the test (the control below shows it does not).
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { AWSet, AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { addStream } from "../../services/client/add-stream.ts";
import { eventually } from "../helpers/eventually.ts";
import { exportOf, importTo } from "../helpers/export-import.ts";
import { BIN, REPO, runCli, startNodeProcess } from "../helpers/node-process.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-copies-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const SLOW_GOSSIP = ["--gossip-interval-ms", "10000", "--partitions", "16", "--copies-timeout-ms", "1500"];
const bufs = (xs: string[]) => xs.map((x) => Buffer.from(x));

/** Code and details of a failed call. */
async function failure(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    return { code: e.code, details: e.details };
  }
  assert.fail("the call succeeded");
}

/** Wait until node i's writes can have `copies` copies (the members know each other): a warm-up Add. */
async function copiesReady(c: TestCluster, i: number, copies: number): Promise<void> {
  await eventually(
    `${copies} nodes to hold a copy`,
    () => c.replica(i, (r) => call(r, r.add, { key: "warm", elements: bufs(["w"]), texts: [], copies }, { timeoutMs: 5000 })),
    (res) => res.copies === copies,
    30_000,
  );
}

describe("write copies: an answer with copies N means N nodes hold the write durably", () => {
  it("Add, Remove, Delete, Increment and AddStream with copies 3 are readable on every node at once, and survive their node's SIGKILL", async () => {
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.27.${i}:7701`), SLOW_GOSSIP, "a");
    try {
      await c.startAll();
      // Once the three know each other, a write can have 3 copies.
      await copiesReady(c, 0, 3);

      // Control: without copies, an add is on its own node only (the period is 10 s, pushes are off).
      await c.replica(0, (r) => call(r, r.add, { key: "plain", elements: bufs(["p0", "p1"]), texts: [] }, { timeoutMs: 5000 }));
      assert.deepEqual(await c.read(1, "plain"), [], "plain adds reached node 1 without copies: the test cannot tell copies from gossip");

      const elements = Array.from({ length: 24 }, (_, i) => `e${String(i).padStart(2, "0")}`);
      const answers = await Promise.all(
        elements.map((e) => c.replica(0, (r) => call(r, r.add, { key: "k", elements: bufs([e]), texts: [], copies: 3 }, { timeoutMs: 5000 }))),
      );
      assert.deepEqual(new Set(answers.map((a) => a.copies)), new Set([3]));
      await c.replica(0, (r) => call(r, r.add, { key: "gone", elements: bufs(["x", "y"]), texts: [] }, { timeoutMs: 5000 }));
      const removed = await c.replica(0, (r) => call(r, r.remove, { key: "gone", elements: bufs(["x"]), texts: [], copies: 3 }, { timeoutMs: 5000 }));
      assert.equal(removed.copies, 3);
      // A Delete of a key every node holds: answered with 3 copies, so no node lists its elements.
      await c.replica(0, (r) => call(r, r.add, { key: "wiped", elements: bufs(["w1", "w2"]), texts: [], copies: 3 }, { timeoutMs: 5000 }));
      const deleted = await c.replica(0, (r) => call(r, r.delete, { key: "wiped", copies: 3 }, { timeoutMs: 5000 }));
      assert.deepEqual([deleted.removed, deleted.copies], [2n, 3]);
      // The CLI's --copies, as a script would read it.
      const cli = await runCli(["add", "cli", "c1", "--copies", "3", "--addr", c.addresses[0]!, "--json"]);
      assert.equal(cli.code, 0, cli.stderr);
      assert.equal(JSON.parse(cli.stdout).copies, 3);
      const inc = await c.replica(0, (r) => call(r, r.increment, { key: "n", amount: 7n, requestId: "", copies: 3 }, { timeoutMs: 5000 }));
      assert.equal(inc.copies, 3);
      // AddStream: every ack says 3, through the CLI's --stdin --copies.
      const streamed = Array.from({ length: 1500 }, (_, i) => `s${String(i).padStart(4, "0")}`);
      const child = spawn(process.execPath, [BIN, "add", "streamed", "--stdin", "--batch", "100", "--copies", "3", "--addr", c.addresses[0]!, "--json"], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
      let out = "";
      let errText = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (errText += d.toString()));
      child.stdin.end(streamed.join("\n") + "\n");
      const [code] = await once(child, "exit");
      assert.equal(code, 0, errText);
      assert.equal(JSON.parse(out).elements, 1500);

      // Merge: a state made elsewhere, joined with copies 3.
      const outside = AWSet.bottom();
      outside.joinInPlace(outside.addDelta("elsewhere", bufs(["m1", "m2"])));
      const merged = await c.replica(0, (r) => call(r, r.merge, { key: "merged", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(outside)) }, copies: 3 }, { timeoutMs: 5000 }));
      assert.deepEqual([merged.changed, merged.copies], [true, 3]);
      // Import through the CLI: node 0's "plain" (on node 0 alone) exported and imported as "moved" with --copies 3.
      const pipe = spawn("bash", ["-c", `"$0" "$1" export plain --addr "$2" | "$0" "$1" import moved --copies 3 --addr "$2" --json`, process.execPath, BIN, c.addresses[0]!], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
      let imported = "";
      let importErr = "";
      pipe.stdout.on("data", (d: Buffer) => (imported += d.toString()));
      pipe.stderr.on("data", (d: Buffer) => (importErr += d.toString()));
      const [importCode] = await once(pipe, "exit");
      assert.equal(importCode, 0, importErr);
      assert.deepEqual([JSON.parse(imported).size, JSON.parse(imported).copies], ["2", 3], "the JSON prints 64-bit counts as strings");

      // The writing node dies at once: the others already hold all of it (no waiting).
      await c.kill(0);
      for (const i of [1, 2]) {
        assert.deepEqual(await c.read(i, "k"), elements, `node ${i} lacks adds acknowledged with copies 3`);
        assert.deepEqual(await c.read(i, "cli"), ["c1"], `node ${i} lacks the CLI's add with --copies 3`);
        assert.deepEqual(await c.read(i, "wiped"), [], `node ${i} still lists elements of a key deleted with copies 3`);
        assert.deepEqual(await c.read(i, "streamed"), streamed, `node ${i} lacks streamed batches acknowledged with copies 3`);
        assert.deepEqual(await c.read(i, "merged"), ["m1", "m2"], `node ${i} lacks a merge acknowledged with copies 3`);
        assert.deepEqual(await c.read(i, "moved"), ["p0", "p1"], `node ${i} lacks an import acknowledged with copies 3`);
        // The remove came with the add it removes (a remove's delta carries the dots it covers, not the add).
        assert.ok(!(await c.read(i, "gone")).includes("x"), `node ${i} still lists an element removed with copies 3`);
        const q = await c.replica(i, (r) => call(r, r.query, { key: "n", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 5000 }));
        assert.equal(q.counterValue, 7n, `node ${i} lacks an increment acknowledged with copies 3`);
      }
    } finally {
      await c.close();
    }
  });

  it("copies beyond the key's holders: UNAVAILABLE with nothing written; a holder that does not answer: DEADLINE_EXCEEDED, the write stays", async () => {
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.27.${10 + i}:7702`), SLOW_GOSSIP, "b");
    try {
      await c.startAll();
      await copiesReady(c, 0, 3);
      const four = await failure(c.replica(0, (r) => call(r, r.add, { key: "k", elements: bufs(["four"]), texts: [], copies: 4 }, { timeoutMs: 5000 })));
      assert.equal(four.code, grpc.status.UNAVAILABLE, four.details);
      assert.match(four.details, /copies 4 cannot be had: 3 nodes hold/);
      assert.deepEqual(await c.read(0, "k"), [], "a write refused for its copies was made");
      // The same for a Merge and an Import: refused before anything is joined.
      const outside = AWSet.bottom();
      outside.joinInPlace(outside.addDelta("elsewhere", bufs(["m"])));
      const mergeFour = await failure(c.replica(0, (r) => call(r, r.merge, { key: "k", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(outside)) }, copies: 4 }, { timeoutMs: 5000 })));
      assert.equal(mergeFour.code, grpc.status.UNAVAILABLE, mergeFour.details);
      await c.replica(0, (r) => call(r, r.add, { key: "src", elements: bufs(["i1", "i2"]), texts: [] }, { timeoutMs: 5000 }));
      const chunks = await exportOf(c.addresses[0]!, "src");
      const importFour = await failure(importTo(c.addresses[0]!, "k", chunks.map((ch, i) => ({ ...ch, copies: i === 0 ? 4 : undefined }))));
      assert.equal(importFour.code, grpc.status.UNAVAILABLE, importFour.details);
      assert.match(importFour.details, /copies 4 cannot be had/);
      assert.deepEqual(await c.read(0, "k"), [], "a merge or import refused for its copies was joined");

      // Node 2 stops answering (SIGSTOP) but is still a member: its copy never comes.
      c.nodes.get(2)!.child.kill("SIGSTOP");
      try {
        const started = Date.now();
        const late = await failure(c.replica(0, (r) => call(r, r.add, { key: "k", elements: bufs(["late"]), texts: [], copies: 3 }, { timeoutMs: 5000 })));
        assert.equal(late.code, grpc.status.DEADLINE_EXCEEDED, late.details);
        assert.match(late.details, /2 of the 3 copies asked were confirmed within 1500 ms/);
        assert.ok(Date.now() - started >= 1400, "answered before --copies-timeout-ms");
        // A client deadline shorter than --copies-timeout-ms: the node answers first, with its count.
        const short = await failure(c.replica(0, (r) => call(r, r.add, { key: "k", elements: bufs(["short"]), texts: [], copies: 3 }, { timeoutMs: 600 })));
        assert.equal(short.code, grpc.status.DEADLINE_EXCEEDED);
        assert.match(short.details, /2 of the 3 copies asked/, "the client's own deadline came first");
        // A stream whose batch cannot get its copies ends naming that batch.
        const stream = await failure(c.replica(0, (r) => addStream(r, "k-stream", [[Buffer.from("st")]], { copies: 3 })));
        assert.equal(stream.code, grpc.status.DEADLINE_EXCEEDED, stream.details);
        assert.match(stream.details, /^batch seq 1: the batch is made and durable here, but 2 of the 3 copies asked/);
        // Two copies are there to be had.
        const two = await c.replica(0, (r) => call(r, r.add, { key: "k", elements: bufs(["two"]), texts: [], copies: 2 }, { timeoutMs: 5000 }));
        assert.equal(two.copies, 2);
        assert.deepEqual(await c.read(1, "k"), ["late", "short", "two"], "node 1 lacks writes it confirmed");
      } finally {
        c.nodes.get(2)!.child.kill("SIGCONT");
      }
      // The writes that missed their copies stayed made, and reach node 2 as any write does.
      await c.converged("k", [0, 1, 2], ["late", "short", "two"], 30_000);
    } finally {
      await c.close();
    }
  });

  it("with --replication-factor 2, a call to a non-owner is forwarded with its copies: both owners hold the write when it is answered", async () => {
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.27.${30 + i}:7704`), [...SLOW_GOSSIP, "--replication-factor", "2"], "r");
    try {
      await c.startAll();
      // Placement is settled once every node names the same two owners of the key.
      const owners = await eventually(
        "the three nodes to agree on two owners of the key",
        () => Promise.all([0, 1, 2].map((i) => c.replica(i, (r) => call(r, r.owners, { key: "k" }, { timeoutMs: 5000 })))),
        (rs) => rs.every((o) => o.owners.length === 2 && JSON.stringify(o.owners) === JSON.stringify(rs[0]!.owners)),
        30_000,
      );
      const owning = owners[0]!.owners.map((o) => c.addresses.indexOf(o.address));
      const other = [0, 1, 2].find((i) => !owning.includes(i))!;
      await copiesReady(c, other, 2);
      const res = await c.replica(other, (r) => call(r, r.add, { key: "k", elements: bufs(["fwd"]), texts: [], copies: 2 }, { timeoutMs: 5000 }));
      assert.equal(res.copies, 2);
      for (const i of owning) assert.ok((await c.read(i, "k")).includes("fwd"), `owner ${i} lacks a forwarded add acknowledged with copies 2`);
      const three = await failure(c.replica(other, (r) => call(r, r.add, { key: "k", elements: bufs(["three"]), texts: [], copies: 3 }, { timeoutMs: 5000 })));
      assert.equal(three.code, grpc.status.UNAVAILABLE, three.details);
      assert.match(three.details, /copies 3 cannot be had: 2 nodes hold/);
    } finally {
      await c.close();
    }
  });

  it("a holder that restarted behind the delta buffer confirms a write's copy while it still takes its full state", async () => {
    // A small buffer: the bulk load below leaves it, so node 2 needs the partition's full state
    // when it comes back, which takes seconds for 150 000 elements here.
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.27.${40 + i}:7705`), [...SLOW_GOSSIP, "--gossip-max-buffer-bytes", "65536", "--partitions", "1"], "h");
    try {
      await Promise.all([0, 1, 2].map((i) => c.start(i, i === 0 ? ["--metrics-listen", "127.0.27.40:7706"] : [])));
      await copiesReady(c, 0, 3);
      await c.kill(2);
      const { replicaClient } = await import("../../services/client/rpc.ts");
      const { batchFill } = await import("../bench/lib/fill.ts");
      const clients = Array.from({ length: 4 }, () => replicaClient(c.addresses[0]!));
      try {
        await batchFill(clients, "bulk", 0, 150_000, (i) => Buffer.from(`b${String(i).padStart(6, "0")}`));
      } finally {
        for (const x of clients) x.close();
      }
      await c.start(2);
      // Until node 0 counts node 2 a member again, copies 3 cannot be had (UNAVAILABLE, nothing written).
      const first = await eventually(
        "node 2 to be a holder again",
        () =>
          c.replica(0, (r) => call(r, r.add, { key: "w", elements: bufs(["w1"]), texts: [], copies: 3 }, { timeoutMs: 5000 })).then(
            (res) => ({ copies: res.copies, code: grpc.status.OK, details: "" }),
            (err: grpc.ServiceError) => ({ copies: 0, code: err.code, details: err.details }),
          ),
        (res) => res.code !== grpc.status.UNAVAILABLE,
        30_000,
      );
      // The first write that could have its copies had them within --copies-timeout-ms (1.5 s),
      // not after node 2's full state: its delta went to node 2 alone beside that state.
      assert.deepEqual([first.code, first.copies], [grpc.status.OK, 3], first.details);
      assert.deepEqual(await c.read(2, "w"), ["w1"]);
      // Node 0 says how: the write's interval went alone beside the full state.
      const metrics = await (await fetch("http://127.0.27.40:7706/metrics")).text();
      const ranges = /deltaset_gossip_transport_events_total\{event="copy_ranges"[^}]*\} (\d+)/.exec(metrics);
      assert.ok(ranges !== null && Number(ranges[1]) > 0, `copy_ranges counted on node 0: ${ranges?.[0]}`);
      await eventually("node 2 to take the bulk load's full state", () => c.size(2, "bulk"), (n) => n === 150_000, 60_000);
    } finally {
      await c.close();
    }
  });

  it("writes answered with copies 2 survive the loss of their node's disk: SIGKILL, data directory wiped, restarted empty", async () => {
    const c = new TestCluster(dir, [1, 2, 3].map((i) => `127.0.27.${50 + i}:7707`), SLOW_GOSSIP, "d");
    try {
      await c.startAll();
      await copiesReady(c, 0, 2);
      const elements = Array.from({ length: 30 }, (_, i) => `d${String(i).padStart(2, "0")}`);
      const answers = await Promise.all(
        elements.map((e, i) => c.replica(0, (r) => call(r, r.add, { key: `disk${i % 3}`, elements: bufs([e]), texts: [], copies: 2 }, { timeoutMs: 5000 }))),
      );
      assert.ok(answers.every((a) => a.copies >= 2), "every add was answered with 2 copies");
      // The disk that took them is gone: each add is on node 1 or node 2 (or both), by its answer.
      await c.wipeAndRestart(0);
      const kept = new Set<string>();
      for (const i of [1, 2]) for (let k = 0; k < 3; k++) for (const e of await c.read(i, `disk${k}`)) kept.add(e);
      assert.deepEqual([...kept].sort(), elements, "an add answered with copies 2 was lost with its node's disk");
      // And the wiped node takes them back from the others.
      for (let k = 0; k < 3; k++) {
        await c.converged(`disk${k}`, [0, 1, 2], elements.filter((_, i) => i % 3 === k), 30_000);
      }
    } finally {
      await c.close();
    }
  });

  it("a node alone refuses copies 2 (UNAVAILABLE), and under Algorithm 1, which has no acknowledgements, any copies above 1 (FAILED_PRECONDITION)", async () => {
    for (const [algorithm, code, text] of [
      ["alg2", grpc.status.UNAVAILABLE, /this node alone holds the key's partition/],
      ["alg1", grpc.status.FAILED_PRECONDITION, /--gossip-algorithm alg1 does not send/],
    ] as const) {
      const n = await startNodeProcess(["--listen", `127.0.27.${algorithm === "alg2" ? 21 : 22}:7703`, "--data-dir", join(dir, `alone-${algorithm}`), "--gossip-algorithm", algorithm]);
      try {
        const { replicaClient } = await import("../../services/client/rpc.ts");
        const r = replicaClient(n.address);
        try {
          const f = await failure(call(r, r.add, { key: "k", elements: bufs(["x"]), texts: [], copies: 2 }, { timeoutMs: 5000 }));
          assert.equal(f.code, code, f.details);
          assert.match(f.details, text);
          const q = await call(r, r.query, { key: "k", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 5000 });
          assert.equal(q.size, 0n, "a write refused for its copies was made");
          // copies 1 is this node alone: made and answered as without copies.
          const one = await call(r, r.add, { key: "k", elements: bufs(["x"]), texts: [], copies: 1 }, { timeoutMs: 5000 });
          assert.equal(one.added, 1);
        } finally {
          r.close();
        }
      } finally {
        await n.kill();
      }
    }
  });
});
