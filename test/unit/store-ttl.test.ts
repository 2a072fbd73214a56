// Time to live in the store (store/expiry.ts, element-reads.ts): a real LevelDB store with a clock
// the test moves. Expired adds are hidden from reads at once, removed from storage (element
// record, dot index, expiry entry, live count) by expire(), survive restarts until then, and never
// come back through a join.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { expiryRange } from "../../services/store/keys.ts";
import { Store } from "../../services/store/store.ts";
import { partitionOf } from "../../services/gossip/partition.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const newDir = () => {
  const d = mkdtempSync(join(tmpdir(), "deltaset-ttl-"));
  dirs.push(d);
  return d;
};
const b = (s: string) => Buffer.from(s);

function clocked(dir: string, nodeId: string, t: { now: number }) {
  return Store.open({ dir, nodeId, partitions: 4, partitionOf, sync: "buffered", clock: () => t.now });
}

async function expiryEntries(s: Store): Promise<number> {
  let n = 0;
  for await (const _ of s.db.keys(expiryRange(Number.MAX_SAFE_INTEGER - 1))) n++;
  return n;
}

async function names(s: Store, key: string): Promise<string[]> {
  const out: string[] = [];
  for await (const chunk of s.members(key, { chunkSize: 10 })) out.push(...chunk.map((m) => m.element.toString()));
  return out;
}

describe("store: adds with a time to live", () => {
  it("hides an expired add from every read at once, and expire() removes it from storage", async () => {
    const t = { now: 1_000_000 };
    const s = await clocked(newDir(), "A", t);
    try {
      await s.add("k", [b("short"), b("also")], 500);
      await s.add("k", [b("long")], 5_000);
      await s.add("k", [b("forever")]);
      assert.deepEqual(await names(s, "k"), ["also", "forever", "long", "short"]);
      t.now += 500;
      assert.deepEqual(await s.contains("k", [b("short"), b("long"), b("forever")]), [false, true, true]);
      assert.deepEqual(await names(s, "k"), ["forever", "long"]);
      assert.deepEqual((await s.page("k", undefined, 10)).members.map(String), ["forever", "long"]);
      assert.deepEqual((await s.dotsOf("k", [b("short")]))[0], []);
      assert.equal(await expiryEntries(s), 3, "not swept yet");
      const r = await s.expire(t.now, 100);
      assert.deepEqual(r, { dots: 2, more: false });
      assert.equal(await expiryEntries(s), 1);
      assert.equal(s.stats().expiredDots, 2);
      const state = (await s.readState("k"))!.state as { size: number; ctx: { dotCount(): number } };
      assert.equal(state.size, 2, "the records are gone");
      assert.equal(state.ctx.dotCount(), 4, "the context keeps the expired adds");
      assert.deepEqual(await s.verify("k"), []);
      t.now += 4_500;
      assert.deepEqual(await s.expire(t.now, 100), { dots: 1, more: false });
      assert.deepEqual(await names(s, "k"), ["forever"]);
      assert.equal(await expiryEntries(s), 0);
    } finally {
      await s.close();
    }
  });

  it("sweeps in batches, and drops entries of adds removed or re-added meanwhile", async () => {
    const t = { now: 5_000 };
    const s = await clocked(newDir(), "A", t);
    try {
      await s.add("k", Array.from({ length: 25 }, (_, i) => b(`e${i}`)), 100);
      await s.remove("k", [b("e0")]);
      await s.add("k", [b("e1")]); // re-added without a TTL: the new add supersedes the old
      t.now += 100;
      const first = await s.expire(t.now, 10);
      assert.equal(first.more, true);
      let total = first.dots;
      for (let i = 0; i < 5; i++) {
        const r = await s.expire(t.now, 10);
        total += r.dots;
        if (!r.more) break;
      }
      assert.equal(total, 23, "e0 was removed and e1 re-added: their entries are dropped with nothing to expire");
      assert.equal(await expiryEntries(s), 0);
      assert.deepEqual(await names(s, "k"), ["e1"]);
      assert.deepEqual(await s.verify("k"), []);
    } finally {
      await s.close();
    }
  });

  it("keeps an add's expiry across a restart, and a join of its old copy does not bring it back", async () => {
    const dir = newDir();
    const t = { now: 50_000 };
    let s = await clocked(dir, "A", t);
    const r = await s.add("k", [b("x")], 1_000);
    await s.close();
    s = await clocked(dir, "A", t);
    try {
      assert.deepEqual(await names(s, "k"), ["x"]);
      t.now += 1_000;
      assert.deepEqual(await names(s, "k"), []);
      await s.expire(t.now, 100);
      // The add's own delta, as a peer that still holds it would send it (remaining TTL 10 s).
      const stale = AWSetLattice.decode(AWSetLattice.encode(r.delta, t.now - 9_000), t.now);
      await s.merge("k", ObjectType.AWSET, stale);
      assert.deepEqual(await names(s, "k"), []);
    } finally {
      await s.close();
    }
  });

  it("a copy received by merge expires after the remaining time it carried", async () => {
    const t = { now: 10_000 };
    const a = await clocked(newDir(), "A", t);
    const tb = { now: 777_000 }; // another clock: only remaining times travel
    const other = await clocked(newDir(), "B", tb);
    try {
      const r = await a.add("k", [b("x")], 2_000);
      t.now += 500;
      tb.now += 500;
      await other.merge("k", ObjectType.AWSET, AWSetLattice.decode(AWSetLattice.encode(r.delta, t.now), tb.now));
      tb.now += 1_499;
      assert.deepEqual(await names(other, "k"), ["x"]);
      tb.now += 1;
      assert.deepEqual(await names(other, "k"), []);
      assert.equal((await other.expire(tb.now, 10)).dots, 1);
    } finally {
      await a.close();
      await other.close();
    }
  });
});
