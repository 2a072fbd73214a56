// A replica's counters end at Number.MAX_SAFE_INTEGER (past it two adds would share a dot, and
// every codec refuses the state). A context from elsewhere (a Merge, a peer) can carry a replica's
// counter to the end: minting past it is refused with nothing changed, and the store mints under a
// fresh replica id instead, so writes go on and the stored state stays valid.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { AWSet, AWSetLattice, CausalContext, CounterLattice, DotSpaceExhaustedError, ObjectType, PNCounter } from "../../services/crdt/index.ts";
import { Store } from "../../services/store/store.ts";

const MAX = Number.MAX_SAFE_INTEGER;
const root = mkdtempSync(join(tmpdir(), "deltaset-dot-space-"));
after(() => rmSync(root, { recursive: true, force: true }));
const el = (s: string) => Buffer.from(s);
const partitionOf = () => 0;

/** A context in which replica r has seen every counter up to last. */
function seenUpTo(r: string, last: number): CausalContext {
  const c = new CausalContext();
  c.addRange(r, 1, last);
  return c;
}

describe("a replica's last counters", () => {
  it("an add may take the last counter, not one past it; a refusal changes nothing", () => {
    const s = AWSet.fromParts(new Map(), seenUpTo("r", MAX - 1));
    const d = s.addDelta("r", [el("a")]);
    assert.equal([...d.entries.values()][0]![0]!.counter, MAX);
    assert.throws(() => s.addDelta("r", [el("a"), el("b")]), DotSpaceExhaustedError);
    assert.throws(() => s.add("r", [el("a"), el("b")]), DotSpaceExhaustedError);
    assert.equal(s.ctx.max("r"), MAX - 1);
    assert.equal(s.entries.size, 0);
    // Another replica's counters are untouched.
    assert.equal([...s.addDelta("q", [el("a"), el("b")]).entries.values()][1]![0]!.counter, 2);
  });

  it("a counter increment past the last counter is refused", () => {
    assert.throws(() => new PNCounter(new Map(), seenUpTo("r", MAX)).incrementDelta("r", 1n), DotSpaceExhaustedError);
    assert.throws(() => seenUpTo("r", MAX).nextDot("r"), DotSpaceExhaustedError);
  });

  it("a store whose replica reached the end on a key mints under a fresh replica id; the state stays valid across a restart", async () => {
    const dir = join(root, "set");
    let s = await Store.open({ dir, nodeId: "n1", partitions: 4, partitionOf, sync: "buffered" });
    const before = s.replicaId;
    await s.merge("k", ObjectType.AWSET, AWSet.fromParts(new Map(), seenUpTo(before, MAX)));
    const a = await s.add("k", [el("a")]);
    const b = await s.add("k", [el("b")]);
    assert.notEqual(s.replicaId, before);
    assert.deepEqual(
      [a.dots[0], b.dots[0]].map((d) => [d!.replica, d!.counter]),
      [[s.replicaId, 1], [s.replicaId, 2]],
    );
    // Removes and the counter type work on under the new id.
    await s.remove("k", [el("a")]);
    await s.merge("c", ObjectType.COUNTER, new PNCounter(new Map(), seenUpTo(s.replicaId, MAX)));
    const idBeforeCounter = s.replicaId;
    await s.increment("c", 5n);
    assert.notEqual(s.replicaId, idBeforeCounter);
    const state = (await s.readState("k"))!.state as AWSet;
    assert.deepEqual(state.sortedKeys().map((k) => Buffer.from(k, "latin1").toString()), ["b"]);
    // Every codec accepts what is stored (no counter past the end).
    AWSetLattice.decode(AWSetLattice.encode(state));
    await s.close();
    s = await Store.open({ dir, nodeId: "n1", partitions: 4, partitionOf, sync: "buffered" });
    const again = (await s.readState("k"))!.state as AWSet;
    assert.ok(AWSetLattice.leq(state, again) && AWSetLattice.leq(again, state));
    const counter = (await s.readState("c"))!.state as PNCounter;
    assert.equal(CounterLattice.decode(CounterLattice.encode(counter)).value(), 5n);
    await s.close();
  });
});
