// A read of a key whose partition a node came to own lately is not answered from part of the key
// (node/read-pull.ts). Real node processes at R = 1 with gossip so slow (every 60 s) that no
// partition is handed over during the test: a key of 300 elements lives on its old owner; a third
// node joins and takes the key's partition; an element added then lands on the new owner alone,
// which now holds 1 element of 301. Query, Scan and Export, through the new owner and through the
// other nodes (which forward to it), must find all 301. Without the fetch they found 1.
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
    // A key that node pm2 owns once it is there, held by pm0 or pm1 before.
    const three = new Ownership("pm0", "a", PARTITIONS, 1);
    three.setLive(new Map([["pm1", "b"], ["pm2", "c"]]));
    const key = keyWhere((p) => three.ownersOf(p)[0] === "pm2", "pm-key-", PARTITIONS);

    await Promise.all([c.start(0), c.start(1)]);
    await eventually("two members", async () => Promise.all([0, 1].map((i) => ownersAt(c, i, key))), (v) => v[0]!.length === 1 && v[0]!.join() === v[1]!.join());
    const old = Number((await ownersAt(c, 0, key))[0]!.slice(2));
    for (let b = 0; b < 3; b++) await c.add(0, key, Array.from({ length: 100 }, (_, j) => `e${b * 100 + j}`));
    assert.equal(await queried(0, key), 300);
    const exportedBefore = await exportedChunks(old, key);

    await c.start(2);
    await eventually("pm2 owns the key in every view", async () => Promise.all([0, 1, 2].map((i) => ownersAt(c, i, key))), (v) => v.every((o) => o.join() === "pm2"));
    // An add after the move lands on the new owner, which holds nothing else of the key.
    await c.add(2, key, ["fresh"]);
    // What the new owner holds of it itself (Keys is never forwarded): the one element.
    assert.equal(await heldSize(2, key), 1, "the new owner holds 1 element: the partition was not handed over yet");

    for (const i of [2, 0, 1]) {
      assert.equal(await queried(i, key), 301, `Query through pm${i}`);
      assert.equal((await c.read(i, key)).length, 301, `Scan through pm${i}`);
    }
    // The new owner's Export carries the old owner's elements and the new one.
    assert.ok((await exportedChunks(2, key)) > exportedBefore, "Export through pm2");
  });
});
