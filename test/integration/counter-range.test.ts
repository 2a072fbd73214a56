// Counters never become unreadable, seen from outside: real node processes over gRPC. An Increment
// or Merge that would leave int64 answers OUT_OF_RANGE and changes nothing; a data directory that
// already holds an overflowed counter (written straight into LevelDB) answers OUT_OF_RANGE naming
// the key, is reported by `deltaset verify`, and is repaired by a decrement; and two nodes whose
// counters only overflow when joined each refuse the join for that key (logged, counted) while
// every other key keeps converging, and once a decrement brings the sum back in range every node
// joins what it refused, with no other write to the key.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { CounterLattice, INT64_MAX, INT64_MIN, ObjectType } from "../../services/crdt/index.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";
import { rawCounter, writeRawCounter } from "../helpers/overflowed-counter.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-counter-range-"));
after(() => rmSync(root, { recursive: true, force: true }));
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--log-level", "info"];

const incr = (c: ReplicaClient, key: string, amount: bigint) => call(c, c.increment, { key, amount, requestId: "" });
const query = (c: ReplicaClient, key: string) =>
  call(c, c.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });

async function expectCode(p: Promise<unknown>, code: grpc.status, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, code, `expected ${grpc.status[code]}, got ${grpc.status[e.code]}: ${e.details}`);
    assert.match(e.details, pattern);
    return true;
  });
}

async function withNode<T>(args: string[], fn: (c: ReplicaClient, n: NodeProcess) => Promise<T>): Promise<T> {
  const n = await startNodeProcess(args);
  const c = replicaClient(n.address);
  try {
    return await fn(c, n);
  } finally {
    c.close();
    assert.equal(await n.stop(), 0);
  }
}

describe("counters at the int64 boundary", () => {
  it("an Increment or Merge past int64 answers OUT_OF_RANGE and changes nothing", async () => {
    await withNode(["--listen", "127.0.0.131:0", "--data-dir", join(root, "a")], async (c) => {
      assert.equal((await incr(c, "hits", INT64_MAX)).value, INT64_MAX);
      await expectCode(incr(c, "hits", INT64_MAX), grpc.status.OUT_OF_RANGE, /counter "hits".*nothing was changed/);
      await expectCode(incr(c, "hits", 1n), grpc.status.OUT_OF_RANGE, /counter "hits"/);
      await expectCode(incr(c, "low", INT64_MIN), grpc.status.OUT_OF_RANGE, /decrements.*9223372036854775808/);
      assert.equal((await query(c, "hits")).counterValue, INT64_MAX);
      // A state from elsewhere whose join would overflow: refused, the key unchanged.
      const payload = Buffer.from(CounterLattice.encode(rawCounter({ elsewhere: { positive: 10n, negative: 0n } })));
      await expectCode(
        call(c, c.merge, { key: "hits", state: { type: ObjectType.COUNTER, payload } }),
        grpc.status.OUT_OF_RANGE,
        /counter "hits".*outside int64.*nothing was changed/,
      );
      assert.equal((await query(c, "hits")).counterValue, INT64_MAX);
      assert.equal((await incr(c, "hits", -1n)).value, INT64_MAX - 1n);
      // The same state merges into a counter with room for it.
      assert.equal((await call(c, c.merge, { key: "room", state: { type: ObjectType.COUNTER, payload } })).changed, true);
      assert.equal((await query(c, "room")).counterValue, 10n);
    });
  });

  it("a data directory holding an overflowed counter: Query names the key, verify reports it, a decrement repairs it", async () => {
    const dir = join(root, "old");
    const args = ["--listen", "127.0.0.132:0", "--data-dir", dir];
    await withNode(args, (c) => incr(c, "fine", 3n));
    // What two Increment(INT64_MAX) calls left behind before the range checks.
    const broken = rawCounter({ "old~0000": { positive: 2n * INT64_MAX, negative: 0n } });
    await writeRawCounter(dir, partitionOf("visits", 64), "visits", broken);

    const report = await runCli(["verify", "--data-dir", dir]);
    assert.equal(report.code, 1, report.stdout + report.stderr);
    assert.match(report.stdout, /visits: replica old~0000's positive total 18446744073709551614 is outside/);
    assert.match(report.stdout, /visits: value 18446744073709551614 is outside int64/);
    assert.doesNotMatch(report.stdout, /fine:/);

    await withNode(args, async (c) => {
      await expectCode(query(c, "visits"), grpc.status.OUT_OF_RANGE, /counter "visits" holds 18446744073709551614.*decrement/);
      assert.equal((await query(c, "fine")).counterValue, 3n, "other keys answer");
      await expectCode(incr(c, "visits", 1n), grpc.status.OUT_OF_RANGE, /counter "visits"/);
      assert.equal((await incr(c, "visits", -INT64_MAX)).value, INT64_MAX);
      assert.equal((await query(c, "visits")).counterValue, INT64_MAX);
    });
  });

  it("gossip of counters that overflow only when joined: each node refuses the join for that key, logs and counts it, and other keys converge", async () => {
    const A = "127.0.0.133:7133";
    const B = "127.0.0.134:7134";
    const METRICS = "127.0.0.133:9133";
    const dirA = join(root, "ga");
    const dirB = join(root, "gb");
    // A set in the same partition as the counter: its partition's gossip must keep flowing.
    let setKey = "s0";
    for (let i = 0; partitionOf(setKey, 64) !== partitionOf("total", 64) && i < 10_000; i++) setKey = `s${i}`;
    assert.equal(partitionOf(setKey, 64), partitionOf("total", 64));

    // Each node counts to INT64_MAX on its own before they ever meet.
    await withNode(["--listen", B, "--data-dir", dirB, "--node-id", "gb"], (c) => incr(c, "total", INT64_MAX));
    const a = await startNodeProcess(["--listen", A, "--data-dir", dirA, "--node-id", "ga", "--metrics-listen", METRICS, ...FAST]);
    const ca = replicaClient(A);
    let b: NodeProcess | undefined;
    let cb: ReplicaClient | undefined;
    try {
      await incr(ca, "total", INT64_MAX);
      await call(ca, ca.add, { key: setKey, elements: [], texts: ["x"] });
      b = await startNodeProcess(["--listen", B, "--data-dir", dirB, "--node-id", "gb", "--seeds", A, ...FAST]);
      cb = replicaClient(B);
      const bClient = cb;
      await eventually("the set reaches B", () => query(bClient, setKey), (r) => r.size === 1n, 20_000);
      await eventually("A refuses B's counter", async () => a.logs(), (l) => /"msg":"counter join refused[^\n]*"node":"ga"[^\n]*"key":"total"/.test(l), 20_000);
      await eventually("B refuses A's counter", async () => b!.logs(), (l) => /counter join refused.*"key":"total"/.test(l), 20_000);
      const metrics = await (await fetch(`http://${METRICS}/metrics`)).text();
      assert.match(metrics, /^deltaset_counter_joins_refused(_total)? [1-9]/m);
      // Both still answer, each with its own count; and both keep serving writes to the counter.
      assert.equal((await query(ca, "total")).counterValue, INT64_MAX);
      assert.equal((await query(cb, "total")).counterValue, INT64_MAX);
      assert.equal((await incr(ca, "total", -5n)).value, INT64_MAX - 5n);
    } finally {
      ca.close();
      cb?.close();
      await b?.stop();
      await a.stop();
    }
  });
  it("three nodes whose increments overflow only together converge once a decrement brings the sum back in range, with no other write", async () => {
    const addrs = ["127.0.23.11:7311", "127.0.23.12:7312", "127.0.23.13:7313"];
    const METRICS = "127.0.23.11:9311";
    const nodes: NodeProcess[] = [];
    const clients: ReplicaClient[] = [];
    const BIG = INT64_MAX - 807n;
    try {
      for (const [i, address] of addrs.entries()) {
        const seeds = i === 0 ? [] : ["--seeds", addrs[0]!];
        const metrics = i === 0 ? ["--metrics-listen", METRICS] : [];
        nodes.push(await startNodeProcess(["--listen", address, "--data-dir", join(root, `three-${i}`), "--node-id", `n${i}`, ...seeds, ...metrics, ...FAST]));
        clients.push(replicaClient(address));
      }
      const [ca, cb] = clients as [ReplicaClient, ReplicaClient];
      // Every node gossips with the other two before the counter is written.
      await call(ca, ca.add, { key: "ready", elements: [], texts: ["x"] });
      await call(cb, cb.add, { key: "ready", elements: [], texts: ["y"] });
      for (const c of clients) await eventually("the cluster formed", () => query(c, "ready"), (r) => r.size === 2n, 20_000);

      // Both acknowledged; only their sum leaves int64, so each node refuses one of them.
      const [a, b] = await Promise.all([incr(ca, "total", BIG), incr(cb, "total", 1000n)]);
      assert.equal(a.value, BIG);
      assert.equal(b.value, 1000n);
      await eventually("a refuses b's increment", async () => nodes[0]!.logs(), (l) => /counter join refused[^\n]*"key":"total"/.test(l), 20_000);
      await eventually("b refuses a's increment", async () => nodes[1]!.logs(), (l) => /counter join refused[^\n]*"key":"total"/.test(l), 20_000);
      assert.equal((await query(ca, "total")).counterValue, BIG, "a keeps its own value");

      assert.equal((await incr(ca, "total", -5000n)).value, BIG - 5000n);
      // The true total, on every node, within a few gossip periods (100 ms here).
      const total = BIG + 1000n - 5000n;
      for (const c of clients) await eventually("every node reads the in-range total", () => query(c, "total"), (r) => r.counterValue === total, 10_000);
      // a held b's increment when it refused it. Which path then brings it in is a race: a's held
      // state tried again after its own decrement, or b's increment forwarded by c after that
      // decrement (joined as any delta); either converges, which is what the loop above checks.
      const metrics = await (await fetch(`http://${METRICS}/metrics`)).text();
      assert.match(metrics, /^deltaset_gossip_transport_events(_total)?\{event="refused_joins_held"\} [1-9]/m);
    } finally {
      for (const c of clients) c.close();
      for (const n of nodes) await n.stop();
    }
  });
});
