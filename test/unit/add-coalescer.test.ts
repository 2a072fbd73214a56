// Unary Adds of one key made together (replica/add-coalescer.ts) on a real store (LevelDB in a
// temporary directory, fsync): adds arriving while the key's earlier add waits for the batch being
// written join one group; each caller is answered with its own elements' dots and how many of its
// elements it made present; groups keep one time to live and a size limit; a failure reaches every
// caller of the group and the next add starts afresh. And the group commit underneath: writes
// queued in one turn share one batch, and turn() resolves once the batch being written is durable.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { type AWSet, ObjectType } from "../../services/crdt/index.ts";
import { AddCoalescer } from "../../services/replica/add-coalescer.ts";
import { Store, TypeMismatchError } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-add-coalescer-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const open = () => Store.open({ dir: join(root, `db${dirs++}`), partitions: 4, partitionOf: (k, p) => k.length % p, sync: "fsync" });
const el = (s: string) => Buffer.from(s);

function coalescer(store: Store, maxElements = 1000) {
  const deltas: Array<{ key: string; delta: AWSet }> = [];
  const adds = new AddCoalescer(store, (key, type, delta) => {
    assert.equal(type, ObjectType.AWSET);
    deltas.push({ key, delta: delta as AWSet });
  }, maxElements);
  return { adds, deltas };
}

describe("AddCoalescer", () => {
  it("adds arriving while a batch is written become one add; each caller gets its own dots and count", async () => {
    const store = await open();
    const { adds, deltas } = coalescer(store);
    const writesBefore = store.stats().writes;
    // A write in flight: the adds below wait for its batch, and meanwhile join one group.
    const first = adds.add("k", [el("a")], undefined);
    await new Promise((r) => setImmediate(r));
    const answers = await Promise.all([
      adds.add("k", [el("b"), el("c")], undefined),
      adds.add("k", [el("a"), el("d")], undefined), // "a" is present already
      adds.add("k", [el("d"), el("e")], undefined), // "d" is new, but the caller before named it first
    ]);
    await first;
    assert.equal(adds.groups, 2, "the first add alone, then the three together");
    assert.equal(adds.adds, 4);
    assert.equal(store.stats().writes - writesBefore, 2, "the first add's write, then one for the three adds");
    assert.deepEqual(answers.map((a) => a.added), [2, 1, 1]);
    assert.deepEqual(answers.map((a) => a.dots.length), [2, 2, 2]);
    // Each element's dot is the one the store holds for it; "d" named twice has one dot.
    const dotsOf = await store.dotsOf("k", [el("b"), el("c"), el("a"), el("d"), el("e")]);
    const counters = (ds: Array<{ counter: number }>) => ds.map((d) => d.counter);
    assert.deepEqual(counters(answers[0]!.dots), [dotsOf[0]![0]!.counter, dotsOf[1]![0]!.counter]);
    assert.deepEqual(counters(answers[1]!.dots), [dotsOf[2]![0]!.counter, dotsOf[3]![0]!.counter]);
    assert.deepEqual(counters(answers[2]!.dots), [dotsOf[3]![0]!.counter, dotsOf[4]![0]!.counter]);
    // Gossip got one delta per group, holding every element of it.
    assert.equal(deltas.length, 2);
    assert.deepEqual([...deltas[1]!.delta.entries.keys()].length, 5);
    assert.deepEqual((await store.page("k", undefined, 10)).members.map(String).sort(), ["a", "b", "c", "d", "e"]);
    await store.close();
  });

  it("keeps groups to one time to live and to maxElements; other keys apart", async () => {
    const store = await open();
    const { adds } = coalescer(store, 3);
    const first = adds.add("k", [el("x")], undefined);
    await new Promise((r) => setImmediate(r));
    const before = adds.groups;
    await Promise.all([
      adds.add("k", [el("a"), el("b")], undefined),
      adds.add("k", [el("c")], undefined), // fills the group to 3
      adds.add("k", [el("d")], undefined), // past 3: the next group
      adds.add("k", [el("e")], 60_000), // another time to live: its own group
      adds.add("other", [el("f")], undefined),
    ]);
    await first;
    assert.equal(adds.groups - before, 4 + 1, "a+b+c, d, e, other; and the first add");
    assert.equal((await store.describe("k"))!.size, 6);
    await store.close();
  });

  it("a failure reaches every caller of the group, and the key's next add starts afresh", async () => {
    const store = await open();
    const { adds } = coalescer(store);
    await store.increment("c", 1n); // a COUNTER key: an add to it fails in the store
    const first = adds.add("c", [el("a")], undefined);
    const joined = adds.add("c", [el("b")], undefined);
    await assert.rejects(first, TypeMismatchError);
    await assert.rejects(joined, TypeMismatchError);
    const again = await adds.add("s", [el("a")], undefined);
    assert.equal(again.added, 1);
    await store.close();
  });
});

describe("GroupCommit", () => {
  it("writes queued in one turn share one batch; turn() waits for the batch being written", async () => {
    const store = await open();
    const { batches } = store.stats();
    // Three adds of three keys started in one turn: one batch, one fsync.
    await Promise.all([store.add("a", [el("1")]), store.add("b", [el("1")]), store.add("c", [el("1")])]);
    assert.equal(store.stats().batches - batches, 1);
    let turned = false;
    void store.commitTurn().then(() => (turned = true));
    await new Promise((r) => setImmediate(r));
    assert.ok(turned, "nothing being written: turn() resolves at once");
    const writing = store.add("d", [el("1")]);
    // Its write is queued in this turn's microtasks and its batch starts at the end of the next turn.
    for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
    const written = store.stats().batches;
    await store.commitTurn();
    assert.equal(store.stats().batches, written + 1, "turn() resolved once the batch being written was durable");
    await writing;
    await store.close();
  });
});
