import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { CopyWaiters, type SetTimer } from "../../services/gossip/copy-waiters.ts";

/** A hand-driven clock: timers fire on advance(). */
function manualTimers(): { setTimer: SetTimer; advance(ms: number): void; pending(): number } {
  let now = 0;
  const timers = new Set<{ at: number; fn: () => void }>();
  return {
    setTimer: (ms, fn) => {
      const t = { at: now + ms, fn };
      timers.add(t);
      return () => void timers.delete(t);
    },
    advance(ms) {
      now += ms;
      for (const t of [...timers].sort((a, b) => a.at - b.at)) {
        if (t.at > now) continue;
        timers.delete(t);
        t.fn();
      }
    },
    pending: () => timers.size,
  };
}

/** Acks per partition and peer, as the engine keeps them. */
function ackTable() {
  const acks = new Map<number, Map<string, number>>();
  return {
    ack(p: number, peer: string, n: number) {
      const m = acks.get(p) ?? new Map<string, number>();
      m.set(peer, Math.max(m.get(peer) ?? 0, n));
      acks.set(p, m);
    },
    heldBy: (p: number, _from: number, to: number) => [...(acks.get(p)?.values() ?? [])].filter((a) => a >= to).length,
  };
}

describe("CopyWaiters: a write answers once enough neighbours acknowledged its interval of seqs", () => {
  it("resolves when the need is met by acks of its partition, not before, and not by other partitions", async () => {
    const t = manualTimers();
    const a = ackTable();
    const w = new CopyWaiters(a.heldBy, t.setTimer);
    let got: number | undefined;
    void w.wait(3, 4, 5, 2, 1000).then((n) => (got = n));
    a.ack(3, "b", 5);
    w.acked([3]);
    await Promise.resolve();
    assert.equal(got, undefined, "one of two neighbours held it");
    a.ack(4, "c", 9);
    w.acked([4]);
    await Promise.resolve();
    assert.equal(got, undefined, "an ack of another partition counts for nothing");
    a.ack(3, "c", 4);
    w.acked([3]);
    await Promise.resolve();
    assert.equal(got, undefined, "an ack below the write's seq does not hold it");
    a.ack(3, "c", 6);
    w.acked([3]);
    await new Promise((r) => setImmediate(r));
    assert.equal(got, 2);
    assert.equal(w.size, 0);
    assert.equal(t.pending(), 0, "its timer was cancelled");
  });

  it("answers at once when the acks are there already, and at the timeout with how many held it", async () => {
    const t = manualTimers();
    const a = ackTable();
    const w = new CopyWaiters(a.heldBy, t.setTimer);
    a.ack(0, "b", 10);
    assert.equal(await w.wait(0, 6, 7, 1, 1000), 1);
    let got: number | undefined;
    void w.wait(0, 6, 7, 2, 1000).then((n) => (got = n));
    t.advance(999);
    await Promise.resolve();
    assert.equal(got, undefined);
    t.advance(1);
    await new Promise((r) => setImmediate(r));
    assert.equal(got, 1, "short of the two asked: the count at the deadline");
    assert.equal(w.size, 0);
  });

  it("answers each waiter of a partition by its own interval, and endAll answers the rest with what they have", async () => {
    const t = manualTimers();
    const a = ackTable();
    const w = new CopyWaiters(a.heldBy, t.setTimer);
    const got = new Map<string, number>();
    void w.wait(1, 2, 3, 1, 5000).then((n) => got.set("early", n));
    void w.wait(1, 7, 8, 1, 5000).then((n) => got.set("late", n));
    void w.wait(2, 0, 1, 2, 5000).then((n) => got.set("other", n));
    a.ack(1, "b", 4);
    w.acked([1]);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual([...got], [["early", 1]]);
    a.ack(2, "b", 1);
    w.endAll();
    await new Promise((r) => setImmediate(r));
    assert.equal(got.get("late"), 0);
    assert.equal(got.get("other"), 1);
    assert.equal(w.size, 0);
    assert.equal(t.pending(), 0);
  });
});
