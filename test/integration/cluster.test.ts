// Real node processes (5, then a 6th joining) forming a cluster: writes spread over all nodes converge everywhere; a
// SIGKILLed node is declared dead and leaves the gossip ack map; restarted, it rejoins under the
// same id and catches up by full state; a graceful leave is seen at once; a new node joining a
// cluster with data receives all of it; writes during churn converge on every live node.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import type { ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-cluster-"));
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150", "--reap-after-ms", "4000", "--log-level", "info"];
const addr = (i: number) => `127.0.0.${60 + i}:7460`;
const ALL = [1, 2, 3, 4, 5, 6].map(addr);
const nodes = new Map<number, NodeProcess>();

async function start(i: number): Promise<NodeProcess> {
  const seeds = ALL.filter((a) => a !== addr(i)).join(",");
  const n = await startNodeProcess(["--listen", addr(i), "--node-id", `c${i}`, "--data-dir", join(dir, `c${i}`), "--seeds", seeds, ...FAST]);
  nodes.set(i, n);
  return n;
}

async function members(i: number): Promise<Map<string, MemberState>> {
  const c = membershipClient(addr(i));
  try {
    const r = await call(c, c.members, { includeDeparted: true }, { timeoutMs: 3000 });
    return new Map(r.members.map((m) => [m.nodeId, m.state]));
  } finally {
    c.close();
  }
}

async function read(i: number, key: string): Promise<string[]> {
  const c = replicaClient(addr(i));
  try {
    const out: string[] = [];
    for await (const ch of c.scan({ key, chunkSize: 1000, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<ScanChunk>) {
      out.push(...ch.members.map((m) => m.element.toString()));
    }
    return out;
  } finally {
    c.close();
  }
}


async function sameEverywhere(key: string, on: number[], expected?: string[]): Promise<string[]> {
  const reads = await untilOrDump(
    `identical reads of "${key}" on ${on.join(",")}`,
    () => Promise.all(on.map((i) => read(i, key))),
    (rs) => rs.every((r) => JSON.stringify(r) === JSON.stringify(rs[0])) && (expected === undefined || JSON.stringify(rs[0]) === JSON.stringify(expected)),
  );
  return reads[0]!;
}

async function addOn(i: number, key: string, els: string[]): Promise<void> {
  const c = replicaClient(addr(i));
  try {
    await call(c, c.add, { key, elements: els.map((e) => Buffer.from(e)), texts: [] });
  } finally {
    c.close();
  }
}

/** On failure, the nodes' logs go to stderr (and to files when CLUSTER_LOGS names a directory). */
/** eventually(), printing the nodes' logs when it gives up. */
function untilOrDump<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  return eventually(what, fn, ok, timeoutMs, dumpLogs);
}

function dumpLogs(): void {
  for (const [i, n] of nodes) process.stderr.write(`--- c${i} log (last 30 lines)\n${n.logs().split("\n").slice(-30).join("\n")}\n`);
}

before(async () => {
  await Promise.all([1, 2, 3, 4, 5].map(start));
  await untilOrDump("five alive members", () => members(1), (m) => [...m.values()].filter((s) => s === MemberState.ALIVE).length === 5);
});

after(async () => {
  if (process.env.CLUSTER_LOGS) for (const [i, n] of nodes) (await import("node:fs")).writeFileSync(`${process.env.CLUSTER_LOGS}/c${i}.log`, n.logs());
  await Promise.all([...nodes.values()].map((n) => n.kill()));
  rmSync(dir, { recursive: true, force: true });
});

describe("a 5-node cluster", () => {
  it("converges: writes spread over every node are read identically everywhere", async () => {
    const expected: string[] = [];
    await Promise.all(
      [1, 2, 3, 4, 5].map(async (i) => {
        for (let b = 0; b < 10; b++) {
          const els = Array.from({ length: 20 }, (_, j) => `n${i}-${String(b * 20 + j).padStart(4, "0")}`);
          await addOn(i, "spread", els);
        }
      }),
    );
    for (const i of [1, 2, 3, 4, 5]) for (let k = 0; k < 200; k++) expected.push(`n${i}-${String(k).padStart(4, "0")}`);
    // Remove some on a node other than their writer: the removal must win everywhere.
    const c = replicaClient(addr(2));
    // A remove removes what this node has observed: wait until c2 has seen both adds.
    await untilOrDump("n1's and n3's adds at n2", () => read(2, "spread"), (r) => r.includes("n1-0000") && r.includes("n3-0199"));
    await call(c, c.remove, { key: "spread", elements: [Buffer.from("n1-0000"), Buffer.from("n3-0199")], texts: [] });
    await call(c, c.increment, { key: "count", amount: 7n, requestId: "" });
    c.close();
    const got = await sameEverywhere("spread", [1, 2, 3, 4, 5]);
    assert.ok(!got.includes("n1-0000") && !got.includes("n3-0199"), "a removed element is still there");
    if (got.length !== expected.length - 2) {
      dumpLogs();
      const missing = expected.filter((e) => !got.includes(e));
      process.stderr.write(`missing ${missing.length}: ${missing.slice(0, 20).join(" ")}\n`);
      for (const i of [1, 2, 3, 4, 5]) process.stderr.write(`c${i} holds ${(await read(i, "spread")).length}\n`);
    }
    assert.equal(got.length, expected.length - 2);
    for (const e of expected) if (e !== "n1-0000" && e !== "n3-0199") assert.ok(got.includes(e), `${e} missing`);
  });

  it("a Remove sent to a node that has not yet received the add still removes what the reader saw", async () => {
    const c1 = replicaClient(addr(1));
    const c5 = replicaClient(addr(5));
    try {
      await call(c1, c1.add, { key: "read-then-remove", elements: [Buffer.from("x")], texts: [] });
      const seen = await call(c1, c1.query, { key: "read-then-remove", elements: [Buffer.from("x")], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
      // Immediately, at another node: it removes the add now if it has it, or defers the remove
      // until anti-entropy brings the add; either way the element is gone everywhere.
      const r = await call(c5, c5.remove, { key: "read-then-remove", elements: [Buffer.from("x")], texts: [], context: seen.context });
      assert.equal(r.removed + r.pending, 1);
    } finally {
      c1.close();
      c5.close();
    }
    await sameEverywhere("read-then-remove", [1, 2, 3, 4, 5], []);
  });

  it("a SIGKILLed node is declared dead and leaves the gossip neighbour set", async () => {
    await nodes.get(3)!.kill();
    for (const i of [1, 2, 4, 5]) {
      await untilOrDump(`c3 DEAD at c${i}`, () => members(i), (m) => m.get("c3") === MemberState.DEAD || m.get("c3") === undefined, 12_000);
    }
    await untilOrDump(
      "c1 gossip neighbours without c3",
      async () => nodes.get(1)!.logs(),
      (logs) => /"msg":"gossip neighbours","node":"c1","neighbours":\["c2","c4","c5"\],"ackMap":\["c2","c4","c5"\]/.test(logs),
      5000,
    );
  });

  it("restarted, it rejoins under the same id and catches up on what it missed (full state)", async () => {
    await addOn(1, "missed", ["while-down-1", "while-down-2"]);
    await start(3);
    await untilOrDump("c3 ALIVE at c1", () => members(1), (m) => m.get("c3") === MemberState.ALIVE);
    await sameEverywhere("missed", [1, 2, 3, 4, 5], ["while-down-1", "while-down-2"]);
    const spread1 = await read(1, "spread");
    await sameEverywhere("spread", [1, 2, 3, 4, 5], spread1);
  });

  it("a graceful leave is seen at once", async () => {
    const t0 = Date.now();
    const code = await nodes.get(2)!.stop();
    assert.equal(code, 0);
    await untilOrDump("c2 LEFT at c1", () => members(1), (m) => m.get("c2") === MemberState.LEFT || m.get("c2") === undefined, 3000);
    assert.ok(Date.now() - t0 < 5000);
    await start(2);
    await untilOrDump("c2 back", () => members(1), (m) => m.get("c2") === MemberState.ALIVE);
  });

  it("a new node joining a cluster with data receives all of it, and writes during churn converge", async () => {
    let stop = false;
    let written = 0;
    const writer = (async () => {
      for (let k = 0; !stop && k < 2000; k++) {
        try {
          await addOn(1 + (k % 2), "churn", [`w-${String(k).padStart(5, "0")}`]);
          written++;
        } catch {
          // a node in the middle of a restart: the client would retry elsewhere
        }
      }
    })();
    await start(6);
    await nodes.get(3)!.kill();
    await new Promise((r) => setTimeout(r, 500));
    await start(3);
    stop = true;
    await writer;
    assert.ok(written > 10);
    const spread = await read(1, "spread");
    await sameEverywhere("spread", [1, 2, 3, 4, 5, 6], spread);
    const churn = await sameEverywhere("churn", [1, 2, 3, 4, 5, 6]);
    assert.ok(churn.length >= written, `${churn.length} < ${written} acknowledged`);
    await sameEverywhere("missed", [6], ["while-down-1", "while-down-2"]);
  });
});
