// A set's live digest (store/live-digest.ts): a function of its (element, dot) pairs only, kept
// exact in the stored header by every change of an element's dots, unknown for headers written
// before it existed until the set is emptied. And the digest of a key stored whole, kept per
// version of its header.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { ClassicLevel } from "classic-level";
import { type Dot, ObjectType } from "../../services/crdt/index.ts";
import { headerKey, objectPrefix } from "../../services/store/keys.ts";
import { type LiveDigest, emptyLiveDigest, sameLiveDigest, updateLiveDigest } from "../../services/store/live-digest.ts";
import { decodeHeader, encodeHeader } from "../../services/store/records.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-live-digest-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const newDir = () => join(root, `db${dirs++}`);
const partitionOf = (key: string, p: number) => Buffer.from(key).reduce((a, b) => (a * 31 + b) % p, 7);
const open = (dir: string, nodeId: string) => Store.open({ dir, nodeId, partitions: 8, partitionOf, sync: "buffered" });
const el = (n: number) => Buffer.from(`e${n}`);

function digestOf(pairs: ReadonlyArray<[Uint8Array, Dot]>): LiveDigest {
  const g = emptyLiveDigest();
  for (const [e, d] of pairs) updateLiveDigest(g, e, d, 1);
  return g;
}

describe("live digest", () => {
  const pairArb = fc.tuple(fc.uint8Array({ maxLength: 6 }), fc.constantFrom("a", "b", "node-c"), fc.integer({ min: 1, max: 2 ** 40 }));
  const pairsArb = fc.uniqueArray(pairArb, { selector: ([, r, c]) => `${r} ${c}`, maxLength: 12 });
  const toPairs = (ps: Array<[Uint8Array, string, number]>): Array<[Uint8Array, Dot]> => ps.map(([e, replica, counter]) => [e, { replica, counter }]);

  it("depends only on the set of pairs: any order, and taking out what was put in", () => {
    fc.assert(
      fc.property(pairsArb, pairsArb, fc.nat(), (xs, extra, seed) => {
        const ps = toPairs(xs);
        const shuffled = [...ps].sort((p, q) => ((p[1].counter * 7919 + seed) % 101) - ((q[1].counter * 7919 + seed) % 101));
        assert.ok(sameLiveDigest(digestOf(ps), digestOf(shuffled)));
        const g = digestOf(ps);
        for (const [e, d] of toPairs(extra)) updateLiveDigest(g, e, d, 1);
        for (const [e, d] of toPairs(extra)) updateLiveDigest(g, e, d, -1);
        assert.ok(sameLiveDigest(g, digestOf(ps)));
      }),
    );
  });

  it("tells apart sets that differ in one dot, one element or which element holds which dot", () => {
    const a1 = { replica: "a", counter: 1 };
    const a2 = { replica: "a", counter: 2 };
    const b1 = { replica: "b", counter: 1 };
    const base = digestOf([[el(1), a1], [el(2), a2]]);
    assert.ok(!sameLiveDigest(base, digestOf([[el(1), a1]])));
    assert.ok(!sameLiveDigest(base, digestOf([[el(1), a1], [el(2), b1]])));
    assert.ok(!sameLiveDigest(base, digestOf([[el(1), a1], [el(3), a2]])));
    assert.ok(!sameLiveDigest(base, digestOf([[el(2), a1], [el(1), a2]])));
    assert.ok(!sameLiveDigest(digestOf([[el(1), { replica: "a", counter: 2 ** 32 + 1 }]]), digestOf([[el(1), a1]])));
    assert.ok(sameLiveDigest(digestOf([]), emptyLiveDigest()));
  });
});

describe("a set's stored live digest", () => {
  it("follows a remove that takes one of an element's two dots (size and context unchanged)", async () => {
    const a = await open(newDir(), "A");
    const b = await open(newDir(), "B");
    await a.add("k", [el(1)]);
    await b.add("k", [el(1)]);
    // A holds the element under both dots; B removes it before it has seen A's add, so its
    // remove takes only B's dot.
    await a.merge("k", ObjectType.AWSET, (await b.readState("k"))!.state);
    const removeAtB = (await b.remove("k", [el(1)])).delta;
    const before = await a.describe("k");
    await a.merge("k", ObjectType.AWSET, removeAtB);
    const afterRemove = await a.describe("k");
    assert.equal(afterRemove!.size, before!.size, "the element is still there");
    assert.ok(afterRemove!.ctx.equals(before!.ctx), "the context did not move");
    assert.ok(!sameLiveDigest(afterRemove!.live, before!.live), "one live dot less");
    assert.deepEqual(await a.verify("k"), [], "the stored header carries the new digest");
    await a.close();
    await b.close();
  });

  it("agrees between copies that hold the same state, and is read back from disk", async () => {
    const dirA = newDir();
    const a = await open(dirA, "A");
    const b = await open(newDir(), "B");
    await a.add("k", [el(1), el(2), el(3)]);
    await a.remove("k", [el(2)]);
    await b.merge("k", ObjectType.AWSET, (await a.readState("k"))!.state);
    const da = await a.describe("k");
    assert.ok(da!.live !== undefined);
    assert.ok(sameLiveDigest(da!.live, (await b.describe("k"))!.live));
    await a.close();
    const again = await open(dirA, "A");
    assert.ok(sameLiveDigest((await again.describe("k"))!.live, da!.live));
    await again.close();
    await b.close();
  });

  it("is unknown for a set whose header has none (written before it existed) until the set is emptied", async () => {
    const dir = newDir();
    let s = await open(dir, "A");
    await s.add("k", [el(1), el(2)]);
    await s.close();
    // Rewrite the header as an older version wrote it: no digest.
    const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: "buffer", valueEncoding: "buffer" });
    const hk = headerKey(objectPrefix(partitionOf("k", 8), "k"));
    const h = decodeHeader(await db.get(hk) as Buffer);
    assert.ok(h.live !== undefined);
    await db.put(hk, encodeHeader({ ...h, live: undefined }));
    assert.equal(decodeHeader(await db.get(hk) as Buffer).live, undefined);
    await db.close();
    s = await open(dir, "A");
    assert.equal((await s.describe("k"))!.live, undefined);
    await s.add("k", [el(3)]);
    assert.equal((await s.describe("k"))!.live, undefined, "not guessed from a part of the set");
    assert.deepEqual(await s.verify("k"), []);
    await s.remove("k", [el(1), el(2), el(3)]);
    assert.ok(sameLiveDigest((await s.describe("k"))!.live, emptyLiveDigest()), "an empty set's digest is known");
    await s.add("k", [el(4)]);
    assert.deepEqual(await s.verify("k"), []);
    await s.close();
    s = await open(dir, "A");
    assert.ok((await s.describe("k"))!.live !== undefined);
    assert.deepEqual(await s.verify("k"), []);
    await s.close();
  });
});

describe("a key stored whole: its state digest", () => {
  it("is read once per version of the key and follows every change", async () => {
    const s = await open(newDir(), "A");
    await s.increment("c", 5n);
    let reads = 0;
    const stateChunks = s.stateChunks.bind(s);
    s.stateChunks = (key, limits) => (reads++, stateChunks(key, limits));
    const first = await s.wholeStateDigest("c");
    assert.ok(first !== undefined && first.length === 32);
    assert.deepEqual(await s.wholeStateDigest("c"), first);
    assert.equal(reads, 1, "the second answer came from memory");
    await s.increment("c", 1n);
    const second = await s.wholeStateDigest("c");
    assert.notDeepEqual(second, first, "a change gives a new digest");
    assert.equal(reads, 2);
    assert.equal(await s.wholeStateDigest("no-such-key"), undefined);
    await s.add("set", [el(1)]);
    assert.equal(await s.wholeStateDigest("set"), undefined, "sets have their live digest instead");
    await s.close();
  });
});
