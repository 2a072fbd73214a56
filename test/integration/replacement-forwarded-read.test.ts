// A read forwarded to a node that was just replaced under its id with an empty volume answers the
// key from the partition's other owner, not as absent. Three real nodes at R = 2: the key's first
// owner is SIGKILLed, its data directory deleted and a new process started at once under the same
// id. The other nodes' placement does not change (the same member is back before it is declared
// dead), so the third node, which owns nothing of the key, still forwards reads to the replaced
// node, which answered them from its empty store (an outside check: 33 of 818 forwarded reads
// found settled keys absent, while the replaced node caught up under load). Suspicion outlasts the
// test, so the killed node is never declared dead, and the other owner sends no gossip, so the
// replaced node stays empty unless a read fetches the key.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { call } from "../../services/client/rpc.ts";
import { Ownership } from "../../services/gossip/ownership.ts";
import { eventually } from "../helpers/eventually.ts";
import { keyWhere, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-replaced-read-"));
const PARTITIONS = 16;
// Reads ask the next owner, and new owners fetch, for this long after a placement change.
const MOVE_WINDOW_MS = 8000;
let c: TestCluster;
let started = 0;

before(async () => {
  c = new TestCluster(
    dir,
    ["127.0.22.1:7221", "127.0.22.2:7222", "127.0.22.3:7223"],
    ["--replication-factor", "2", "--partitions", String(PARTITIONS), "--gossip-interval-ms", "30000", "--gossip-push-local-ms", "5", "--probe-interval-ms", "300", "--probe-timeout-ms", "200", "--suspicion-mult", "200", "--read-after-move-ms", String(MOVE_WINDOW_MS), "--log-level", "warn"],
    "rr",
  );
  // rr1 sends no gossip at all (every send dropped): the replaced rr0 gets nothing of rr1's copy
  // but what a read fetches, however soon gossip would otherwise have sent it.
  await Promise.all([c.start(0), c.start(1, ["--gossip-loss-rate", "1"]), c.start(2)]);
  started = Date.now();
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const query = (i: number, key: string) => c.replica(i, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 100, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 10_000 }));
const scanCount = (i: number, key: string) =>
  c.replica(i, async (r) => {
    let n = 0;
    for await (const chunk of r.scan({ key, chunkSize: 0, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<{ members: unknown[] }>) n += chunk.members.length;
    return n;
  });

describe("a read forwarded to a replaced owner", () => {
  it("finds the key its other owner holds", { timeout: 90_000 }, async () => {
    const view = new Ownership("rr2", "c", PARTITIONS, 2);
    view.setLive(new Map([["rr0", "a"], ["rr1", "b"]]));
    // Owned by rr0 (ranked first) and rr1; rr2 forwards to rr0 first.
    const key = keyWhere((p) => view.ownersOf(p)[0] === "rr0" && !view.ownersOf(p).includes("rr2"), "rr-set-", PARTITIONS);
    await eventually("every node places the key on rr0 and rr1", async () => Promise.all([0, 1, 2].map((i) => ownersAt(c, i, key))), (v) => v.every((o) => o.join() === "rr0,rr1"), 20_000);
    const elements = Array.from({ length: 20 }, (_, i) => Buffer.from(`e${i}`));
    await c.replica(2, (r) => call(r, r.add, { key, elements, texts: [] }));
    await eventually("both owners hold the set", async () => Promise.all([0, 1].map(async (i) => (await query(i, key)).size)), (s) => s.every((n) => n === 20n), 15_000);
    // Past every node's window of its own start: rr2 then forwards a read to rr0 alone.
    await new Promise((r) => setTimeout(r, Math.max(0, started + MOVE_WINDOW_MS + 500 - Date.now())));

    await c.wipeAndRestart(0);
    // Through the node that owns nothing of the key: forwarded to rr0, the replaced node, for 4 s
    // (within rr0's window of its own start, and nothing but a read's fetch brings it the key).
    const wrong: string[] = [];
    const until = Date.now() + 4000;
    for (let n = 0; Date.now() < until && n < 400; n++) {
      const read = await query(2, key);
      if (read.size !== 20n) wrong.push(`Query ${read.size}`);
      const scanned = await scanCount(2, key);
      if (scanned !== 20) wrong.push(`Scan ${scanned}`);
    }
    assert.deepEqual(wrong, [], "every forwarded read found all 20 elements");
  });
});
