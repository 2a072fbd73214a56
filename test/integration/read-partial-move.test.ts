// A read of a key whose partition a node came to own lately is not answered from part of the key
// (node/read-pull.ts). Real node processes at R = 1 with gossip so slow (every 60 s) that no
// partition is handed over during the test: two keys of 300 elements live on their old owner; a
// third node joins and takes their partition; an element added then lands on the new owner alone,
// which now holds 1 element of 301. One key is read first through another node (which forwards to
// the new owner), the other first through the new owner: Query, Scan and Export must find all 301.
// Without the fetch they found 1. A Delete and a Remove without context through the new owner act
// on the whole key too (without the fetch: 1 of 301 deleted, and nothing removed of a key held
// elsewhere), and a retried Increment through it is applied once (without: twice).
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { call } from "../../services/client/rpc.ts";
import { eventually } from "../helpers/eventually.ts";
import { keyWhere, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { Ownership } from "../../services/gossip/ownership.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-read-partial-move-"));
const PARTITIONS = 16;
const FLAGS = [
  "--replication-factor", "1", "--partitions", String(PARTITIONS), "--gossip-interval-ms", "60000",
  "--probe-interval-ms", "200", "--probe-timeout-ms", "150", "--leave-timeout-ms", "500",
];
const c = new TestCluster(dir, ["127.0.12.1:7121", "127.0.12.2:7122", "127.0.12.3:7123"], FLAGS, "pm");
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Every member of key by Query through node i (one page). */
async function queried(i: number, key: string): Promise<number> {
  const r = await c.replica(i, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 1000, pageToken: Buffer.alloc(0), withText: true }, { timeoutMs: 10_000 }));
  return r.members.length;
}

/** The size of key in node i's own store (Keys is served locally). */
async function heldSize(i: number, key: string): Promise<number> {
  const r = await c.replica(i, (r) => call(r, r.keys, { prefix: key, pageSize: 10, pageToken: Buffer.alloc(0) }, { timeoutMs: 5000 }));
  return Number(r.keys.find((k) => k.key === key)?.size ?? 0);
}

/** The elements an Export of key through node i carries (an AWSET's entries, counted from Scan's view). */
async function exportedChunks(i: number, key: string): Promise<number> {
  return c.replica(i, (r) =>
    new Promise<number>((resolve, reject) => {
      let bytes = 0;
      const s = r.export({ key, maxEntries: 0, maxBytes: 0 });
      s.on("data", (m: { slice?: { payload: Uint8Array } }) => (bytes += m.slice?.payload.length ?? 0));
      s.on("error", reject);
      s.on("end", () => resolve(bytes));
    }),
  );
}

describe("a read of a partition a node came to own lately", () => {
  it("finds every element, not only those that reached the new owner", { timeout: 120_000 }, async () => {
    // Two keys that node pm2 owns once it is there, held by pm0 or pm1 before: one read first
    // through a node that forwards to pm2, the other through pm2 itself.
    const three = new Ownership("pm0", "a", PARTITIONS, 1);
    three.setLive(new Map([["pm1", "b"], ["pm2", "c"]]));
    const forwarded = keyWhere((p) => three.ownersOf(p)[0] === "pm2", "pm-key-", PARTITIONS);
    const direct = keyWhere((p) => three.ownersOf(p)[0] === "pm2", "pm-other-", PARTITIONS);
    // Deleted and removed from through the new owner (a Delete and a Remove without context act
    // on what the node serving them observed): one it holds part of, one it holds nothing of.
    const deleted = keyWhere((p) => three.ownersOf(p)[0] === "pm2", "pm-del-", PARTITIONS);
    const removedFrom = keyWhere((p) => three.ownersOf(p)[0] === "pm2", "pm-rem-", PARTITIONS);
    // A counter incremented with a request id before the move, the retry reaching the new owner.
    const counted = keyWhere((p) => three.ownersOf(p)[0] === "pm2", "pm-cnt-", PARTITIONS);
    const increment = (i: number) => c.replica(i, (r) => call(r, r.increment, { key: counted, amount: 5n, requestId: "order-17", retryFilter: undefined }, { timeoutMs: 10_000 }));
    const counterAt = async (i: number) => (await c.replica(i, (r) => call(r, r.query, { key: counted, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs: 10_000 }))).counterValue;

    await Promise.all([c.start(0), c.start(1)]);
    await eventually("two members", async () => Promise.all([0, 1].map((i) => ownersAt(c, i, forwarded))), (v) => v[0]!.length === 1 && v[0]!.join() === v[1]!.join());
    for (const key of [forwarded, direct, deleted, removedFrom]) {
      for (let b = 0; b < 3; b++) await c.add(0, key, Array.from({ length: 100 }, (_, j) => `e${b * 100 + j}`));
      assert.equal(await queried(0, key), 300);
    }
    const exportedBefore = await exportedChunks(0, direct);
    await increment(0);
    assert.equal(await counterAt(0), 5n);

    await c.start(2);
    await eventually("pm2 owns both keys in every view", async () => Promise.all([0, 1, 2].flatMap((i) => [forwarded, direct].map((k) => ownersAt(c, i, k)))), (v) => v.every((o) => o.join() === "pm2"));
    // An add after the move lands on the new owner, which holds nothing else of the key.
    for (const key of [forwarded, direct, deleted]) await c.add(2, key, ["fresh"]);
    // What the new owner holds of them itself (Keys is never forwarded): the one element.
    for (const key of [forwarded, direct, deleted]) assert.equal(await heldSize(2, key), 1, "the new owner holds 1 element: the partition was not handed over yet");
    assert.equal(await heldSize(2, removedFrom), 0, "the new owner holds nothing of the key removed from");

    // Read first through a node that forwards the Query to the new owner, which fetches then.
    assert.equal(await queried(0, forwarded), 301, "Query through pm0, forwarded to pm2");
    assert.equal((await c.read(1, forwarded)).length, 301, "Scan through pm1");
    // Read first through the new owner itself: a Scan, then Query and Export.
    assert.equal((await c.read(2, direct)).length, 301, "Scan through pm2");
    assert.equal(await queried(2, direct), 301, "Query through pm2");
    assert.ok((await exportedChunks(2, direct)) > exportedBefore, "Export through pm2 carries the old owner's elements and the new one");

    // A Delete through pm0 (forwarded to pm2) removes all 301, not the one pm2 held; a Remove
    // without context through pm2 of an element only the old owner held removes it.
    const del = await c.replica(0, (r) => call(r, r.delete, { key: deleted }, { timeoutMs: 10_000 }));
    assert.equal(Number(del.removed), 301, "Delete removed every element the key held");
    assert.equal(await queried(1, deleted), 0, "nothing of the deleted key comes back");
    const rem = await c.replica(2, (r) => call(r, r.remove, { key: removedFrom, elements: [Buffer.from("e7")], texts: [] }, { timeoutMs: 10_000 }));
    assert.equal(rem.removed, 1, "Remove without context removed the element the old owner held");
    assert.equal(await queried(0, removedFrom), 299);

    // The retry of an increment the old owner applied, through the new owner: applied once.
    await increment(2);
    assert.equal(await counterAt(1), 5n, "the retry through the new owner was applied again");
  });
});
