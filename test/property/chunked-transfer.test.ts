// Chunked full-state transfer of an AWSET key between real stores (in memory, the store code a
// node runs): the chunks tile the element space, applying them all equals the join, a stream cut
// after any chunk loses nothing (the delta_crdt_ex trap), and the receiver refuses chunks that
// break the protocol.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, AWSetLattice, CausalContext, DecodeError, ObjectType, awsetEntrySize, chunkSliceContext, decodeSlice, dotKey, elementKey } from "../../services/crdt/index.js";
import { ChunkOrderError, KeyChunkSequence, partitionOf } from "../../services/gossip/index.js";
import { type StateChunk, Store } from "../../services/store/store.js";
import type { ChunkLimits } from "../../services/store/layout.js";

const RUNS = 60;
const KEY = "k";
const el = (s: string) => Buffer.from(s, "latin1");
// Edge cases of byte order: the smallest element (one zero byte: an element is never empty), a key
// and its successor ("a" < "a\0"), 0xff.
const ALPHABET = ["\u0000", "a", "a\u0000", "ab", "b", "ba", "c", "m", "\u00ff", "\u00ff\u00ff"];

type Op = { t: "add"; r: number; es: string[] } | { t: "rm"; r: number; es: string[] } | { t: "sync"; from: number; to: number };

const elems = fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 3 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant("add" as const), r: fc.nat(2), es: elems }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("rm" as const), r: fc.nat(2), es: elems }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("sync" as const), from: fc.nat(2), to: fc.nat(2) }) },
);

/** Chunk limits: a few entries, and bytes of entries either unbounded or small enough to cut. */
const limitsArb = (maxEntries: number): fc.Arbitrary<ChunkLimits> =>
  fc.record({ maxEntries: fc.integer({ min: 1, max: maxEntries }), maxBytes: fc.oneof(fc.constant(Number.MAX_SAFE_INTEGER), fc.integer({ min: 1, max: 120 })) });
const entries = (max: number): ChunkLimits => ({ maxEntries: max, maxBytes: Number.MAX_SAFE_INTEGER });

let opened = 0;
const open = () => Store.open({ dir: "memory", nodeId: `n${opened++}`, partitions: 1, partitionOf, sync: "buffered" });

async function stateOf(s: Store): Promise<AWSet> {
  return ((await s.readState(KEY))?.state as AWSet | undefined) ?? AWSet.bottom();
}

/** A fresh store holding a copy of a state (to apply a cut stream to, many times over). */
async function copyOf(state: AWSet): Promise<Store> {
  const s = await open();
  if (!state.isBottom()) await s.merge(KEY, ObjectType.AWSET, state);
  return s;
}

/** Three stores after adds, removes and whole-state syncs. */
async function run(ops: Op[]): Promise<Store[]> {
  const rs = [await open(), await open(), await open()];
  for (const op of ops) {
    if (op.t === "add") await rs[op.r]!.add(KEY, op.es.map(el));
    else if (op.t === "rm") await rs[op.r]!.remove(KEY, op.es.map(el));
    else if (op.from !== op.to) await rs[op.to]!.merge(KEY, ObjectType.AWSET, await stateOf(rs[op.from]!));
  }
  return rs;
}

/** The sender's chunks as a receiver gets them: through the wire encoding and the slice decoder. */
async function chunksOf(sender: Store, limits: ChunkLimits): Promise<StateChunk[]> {
  const out: StateChunk[] = [];
  for await (const c of sender.stateChunks(KEY, limits)) {
    const range = { rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined, rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd), rangeOpen: c.rangeOpen };
    const bytes = AWSetLattice.encode(c.slice as AWSet);
    out.push({ ...c, slice: decodeSlice(ObjectType.AWSET, bytes, (out[0]?.ctx ?? c.ctx)!, range) });
  }
  return out;
}

const header = (c: StateChunk) => ({
  rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined,
  rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd),
  rangeOpen: c.rangeOpen,
  context: c.ctx,
  keyDone: c.keyDone,
});

/** Apply chunks (checked in order) to a receiver; finishKey after the key's last one. */
async function apply(to: Store, chunks: readonly StateChunk[]): Promise<void> {
  const seq = new KeyChunkSequence();
  for (const c of chunks) {
    const ctx = seq.accept(header(c));
    await to.applyChunk(KEY, { type: c.type, senderCtx: ctx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: c.slice });
    if (c.keyDone) await to.finishKey(KEY, c.type, ctx);
  }
}

function liveDots(s: AWSet): Set<string> {
  const out = new Set<string>();
  for (const dots of s.entries.values()) for (const d of dots) out.add(dotKey(d));
  return out;
}

describe("chunked transfer between stores", () => {
  it("the chunks tile the element space in order, within the limits, the context on the first chunk only", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 25 }), limitsArb(4), async (ops, max) => {
        const [sender] = await run(ops);
        const state = await stateOf(sender!);
        const chunks = await chunksOf(sender!, max);
        if ((await sender!.describe(KEY)) === undefined) {
          assert.equal(chunks.length, 0, "a key never written has no stream");
          return;
        }
        const seq = new KeyChunkSequence();
        const seen: string[] = [];
        for (const [i, c] of chunks.entries()) {
          assert.ok(seq.accept(header(c)).equals(state.ctx));
          assert.equal(c.ctx !== undefined, i === 0);
          const slice = c.slice as AWSet;
          assert.ok(slice.size <= max.maxEntries);
          let bytes = 0;
          for (const [k, dots] of slice.entries) bytes += awsetEntrySize(k, dots);
          assert.ok(bytes <= max.maxBytes || slice.size === 1, `${bytes} bytes of entries in a chunk, limit ${max.maxBytes}`);
          seen.push(...slice.sortedKeys());
        }
        assert.ok(seq.done);
        assert.deepEqual(seen, state.sortedKeys());
      }),
      { numRuns: RUNS },
    );
  });

  it("(a) all chunks then finishKey equal local ⊔ sender", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), limitsArb(4), fc.nat(2), fc.nat(2), async (ops, max, li, si) => {
        const rs = await run(ops);
        const local = rs[li]!;
        const expected = AWSetLattice.join(await stateOf(local), await stateOf(rs[si]!));
        await apply(local, await chunksOf(rs[si]!, max));
        assert.ok(AWSetLattice.equals(await stateOf(local), expected));
        assert.deepEqual(await local.verify(KEY), []);
      }),
      { numRuns: RUNS },
    );
  });

  it("(b) a stream cut after any chunk leaves local ⊑ s ⊑ local ⊔ sender, losing no element", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), limitsArb(3), fc.nat(2), fc.nat(2), async (ops, max, li, si) => {
        const rs = await run(ops);
        const local = await stateOf(rs[li]!);
        const join = AWSetLattice.join(local, await stateOf(rs[si]!));
        const chunks = await chunksOf(rs[si]!, max);
        const liveInBoth = [...liveDots(local)].filter((d) => liveDots(join).has(d));
        for (let cut = 1; cut <= chunks.length; cut++) {
          const receiver = await copyOf(local);
          await apply(receiver, chunks.slice(0, cut));
          const s = await stateOf(receiver);
          assert.ok(AWSetLattice.leq(local, s), `local ⋢ s after ${cut} chunks`);
          assert.ok(AWSetLattice.leq(s, join), `s ⋢ local ⊔ sender after ${cut} chunks`);
          const live = liveDots(s);
          for (const d of liveInBoth) assert.ok(live.has(d), `dot ${d} lost after ${cut} chunks`);
          assert.deepEqual(await receiver.verify(KEY), [], "every stored dot stays covered by the context");
          await receiver.close();
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("drops an element in range that the sender removed, but only after its chunk arrives", async () => {
    const local = await open();
    await local.add(KEY, [el("a"), el("z")]);
    const sender = await copyOf(await stateOf(local));
    await sender.remove(KEY, [el("a"), el("z")]);
    await sender.add(KEY, [el("b"), el("c"), el("q")]);
    await sender.remove(KEY, [el("q")]); // only the sender's context tells of q's dot
    const expected = AWSetLattice.join(await stateOf(local), await stateOf(sender));
    const chunks = await chunksOf(sender, entries(1)); // [..b], (b..c], (c..)
    assert.equal(chunks.length, 3);
    const seq = new KeyChunkSequence();
    let ctx!: CausalContext;
    const applyNext = async (c: StateChunk) => {
      ctx = seq.accept(header(c));
      await local.applyChunk(KEY, { type: ObjectType.AWSET, senderCtx: ctx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: c.slice });
    };
    await applyNext(chunks[0]!);
    assert.deepEqual((await stateOf(local)).sortedKeys(), ["b", "z"], "a was in the first range, z not yet");
    await applyNext(chunks[1]!);
    assert.deepEqual((await stateOf(local)).sortedKeys(), ["b", "c", "z"]);
    await applyNext(chunks[2]!);
    assert.deepEqual((await stateOf(local)).sortedKeys(), ["b", "c"], "z was in the last (open) range");
    assert.ok(!AWSetLattice.equals(await stateOf(local), expected), "q's dot not yet known");
    assert.ok((await local.finishKey(KEY, ObjectType.AWSET, ctx)).changed);
    assert.ok(!(await local.finishKey(KEY, ObjectType.AWSET, ctx)).changed, "folding the context twice changes nothing");
    assert.ok(AWSetLattice.equals(await stateOf(local), expected));
  });
});

describe("the chunk rule and the order check", () => {
  it("joining the sender's whole context with the first chunk (the wrong way) loses data for good", () => {
    // Both replicas hold a and b; the sender also holds c and streams one element per chunk.
    const both = AWSet.bottom().add("r0", [el("a"), el("b")]);
    const sender = both.clone().add("r1", [el("c")]);
    const first = new Map([...sender.entries].filter(([k]) => k === "a"));
    // Wrong: the first chunk joined as a state with the sender's whole context, which covers b's
    // dot while the chunk does not carry b: the join reads b as removed.
    const wrong = both.clone();
    wrong.joinInPlace(AWSet.fromParts(first, sender.ctx.clone()));
    assert.deepEqual(wrong.sortedKeys(), ["a"], "b dropped after the first chunk");
    // The stream is cut here. Even a later complete join cannot bring b back, nor c: the context
    // says their dots were seen, the store that they were removed, and a join trusts that.
    wrong.joinInPlace(sender);
    assert.deepEqual(wrong.sortedKeys(), ["a"], "b and c are gone for good");
    // Right: the chunk joined with the context of its own range keeps b.
    const right = both.clone();
    const inRange = [...right.entries].filter(([k]) => k <= "a").map(([, d]) => d);
    right.joinInPlace(AWSet.fromParts(first, chunkSliceContext(first.values(), inRange, sender.ctx)));
    assert.deepEqual(right.sortedKeys(), ["a", "b"]);
  });

  it("refuses chunks out of order, without a context, after the last, and slices with entries outside their range", async () => {
    const s = await open();
    await s.add(KEY, [el("a"), el("b"), el("c")]);
    const [c0, c1, c2] = await chunksOf(s, entries(1));
    assert.throws(() => new KeyChunkSequence().accept(header(c1!)), ChunkOrderError);
    const seq = new KeyChunkSequence();
    seq.accept(header(c0!));
    assert.throws(() => seq.accept(header(c2!)), ChunkOrderError, "skipping a chunk leaves a gap");
    assert.throws(() => seq.accept({ ...header(c1!), context: new CausalContext() }), ChunkOrderError);
    seq.accept(header(c1!));
    seq.accept(header(c2!));
    assert.throws(() => seq.accept(header(c2!)), ChunkOrderError);
    // c1 covers ("a\0", "b"]: a slice carrying "a" does not belong to it.
    const state = await stateOf(s);
    const wrongSlice = AWSetLattice.encode(AWSet.fromParts(new Map([["a", state.entries.get("a")!]]), new CausalContext()));
    assert.throws(() => decodeSlice(ObjectType.AWSET, wrongSlice, state.ctx, header(c1!)), DecodeError);
  });
});
