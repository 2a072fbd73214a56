// Chunked full-state transfer of an AWSET key: the chunks tile the element space, applying them
// all equals the join, and a stream cut after any chunk loses nothing (the delta_crdt_ex trap).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, AWSetLattice, CausalContext, DecodeError, awsetEntrySize, dotKey } from "../../services/crdt/index.js";
import {
  type AWSetChunk,
  type ChunkLimits,
  ChunkOrderError,
  KeyChunkSequence,
  applyChunk,
  applyChunks,
  chunkAWSet,
  chunkFromProto,
  chunkToProto,
  finishKey,
} from "../../services/gossip/index.js";

const RUNS = 300;
const el = (s: string) => Buffer.from(s, "latin1");
// Edge cases of byte order: the empty element, a key and its successor ("a" < "a\0"), 0xff.
const ALPHABET = ["", "a", "a\u0000", "ab", "b", "ba", "c", "m", "\u00ff", "\u00ff\u00ff"];
const REPLICAS = ["r0", "r1", "r2"];

type Op =
  | { t: "add"; r: number; es: string[] }
  | { t: "rm"; r: number; es: string[] }
  | { t: "sync"; from: number; to: number };

const elems = fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 3 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant("add" as const), r: fc.nat(2), es: elems }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("rm" as const), r: fc.nat(2), es: elems }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("sync" as const), from: fc.nat(2), to: fc.nat(2) }) },
);

/** States reachable by delta mutators and syncs on three replicas. */
function run(ops: Op[]): AWSet[] {
  const rs = REPLICAS.map(() => AWSet.bottom());
  for (const op of ops) {
    if (op.t === "add") rs[op.r]!.joinInPlace(rs[op.r]!.addDelta(REPLICAS[op.r]!, op.es.map(el)));
    else if (op.t === "rm") rs[op.r]!.joinInPlace(rs[op.r]!.removeDelta(op.es.map(el)));
    else rs[op.to]!.joinInPlace(rs[op.from]!);
  }
  return rs;
}

const limitsArb: fc.Arbitrary<ChunkLimits> = fc.oneof(
  fc.record({ maxEntries: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ maxBytes: fc.integer({ min: 1, max: 120 }) }),
  fc.record({ maxEntries: fc.integer({ min: 1, max: 4 }), maxBytes: fc.integer({ min: 20, max: 120 }) }),
);

/** Chunks as a receiver sees them: through the proto form. */
const wire = (chunks: AWSetChunk[]) => chunks.map((c) => chunkFromProto(chunkToProto(c)));

function liveDots(s: AWSet): Set<string> {
  const out = new Set<string>();
  for (const dots of s.entries.values()) for (const d of dots) out.add(dotKey(d));
  return out;
}

describe("chunkAWSet", () => {
  it("tiles the element space in order, within the limits, with the context on the first chunk only", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 25 }), limitsArb, (ops, limits) => {
        const [sender] = run(ops);
        const chunks = chunkAWSet(sender!, limits);
        const seq = new KeyChunkSequence();
        const seen: string[] = [];
        for (const [i, c] of chunks.entries()) {
          assert.ok(seq.accept(c).equals(sender!.ctx));
          assert.equal(c.context !== undefined, i === 0);
          if (limits.maxEntries !== undefined) assert.ok(c.entries.size <= limits.maxEntries);
          if (limits.maxBytes !== undefined && c.entries.size > 1) {
            let bytes = 0;
            for (const [k, dots] of c.entries) bytes += awsetEntrySize(k, dots);
            assert.ok(bytes <= limits.maxBytes);
          }
          seen.push(...c.entries.keys());
        }
        assert.ok(seq.done);
        assert.deepEqual(seen, sender!.sortedKeys());
      }),
      { numRuns: RUNS },
    );
  });

  it("an empty set still sends one open chunk carrying the context", () => {
    const s = AWSet.bottom().add("r0", [el("x")]).remove([el("x")]);
    const chunks = chunkAWSet(s, { maxEntries: 2 });
    assert.equal(chunks.length, 1);
    assert.ok(chunks[0]!.rangeOpen && chunks[0]!.keyDone && chunks[0]!.rangeStart === undefined);
    assert.ok(chunks[0]!.context!.equals(s.ctx));
    // The receiver that still has x learns of the removal from that one chunk.
    const local = AWSet.bottom().add("r0", [el("x")]);
    applyChunks(local, wire(chunks));
    assert.equal(local.size, 0);
    assert.ok(AWSetLattice.equals(local, AWSetLattice.join(AWSet.bottom().add("r0", [el("x")]), s)));
  });
});

describe("applyChunk / finishKey", () => {
  it("(a) all chunks then finishKey equal local ⊔ sender", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 30 }), limitsArb, fc.nat(2), fc.nat(2), (ops, limits, li, si) => {
        const rs = run(ops);
        const local = rs[li]!.clone();
        const sender = rs[si]!;
        const expected = AWSetLattice.join(rs[li]!, sender);
        applyChunks(local, wire(chunkAWSet(sender, limits)));
        assert.ok(AWSetLattice.equals(local, expected));
      }),
      { numRuns: RUNS },
    );
  });

  it("(b) a stream cut after any chunk leaves local ⊑ s ⊑ local ⊔ sender, losing no element", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 30 }), limitsArb, fc.nat(2), fc.nat(2), (ops, limits, li, si) => {
        const rs = run(ops);
        const local = rs[li]!;
        const sender = rs[si]!;
        const join = AWSetLattice.join(local, sender);
        const chunks = wire(chunkAWSet(sender, limits));
        const liveInBoth = [...liveDots(local)].filter((d) => liveDots(join).has(d));
        for (let cut = 1; cut <= chunks.length; cut++) {
          const s = local.clone();
          const seq = new KeyChunkSequence();
          for (const c of chunks.slice(0, cut)) applyChunk(s, c, seq.accept(c));
          assert.ok(AWSetLattice.leq(local, s), `local ⋢ s after ${cut} chunks`);
          assert.ok(AWSetLattice.leq(s, join), `s ⋢ local ⊔ sender after ${cut} chunks`);
          const live = liveDots(s);
          for (const d of liveInBoth) assert.ok(live.has(d), `dot ${d} lost after ${cut} chunks`);
          // Every store dot stays covered by the context.
          for (const dots of s.entries.values()) for (const d of dots) assert.ok(s.ctx.containsDot(d));
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("(c) joining the sender's context with the first chunk (the wrong way) loses data for good", () => {
    // Both replicas hold a and b; the sender streams one element per chunk.
    const both = AWSet.bottom().add("r0", [el("a"), el("b")]);
    const local = both.clone();
    const sender = both.clone().add("r1", [el("c")]);
    const chunks = chunkAWSet(sender, { maxEntries: 1 });
    assert.equal(chunks.length, 3);

    // Wrong: the first chunk is joined as a state with the sender's whole context. The context
    // covers b's dot, the chunk does not carry b, so the join reads b as removed.
    const wrong = local.clone();
    wrong.joinInPlace(AWSet.fromParts(new Map(chunks[0]!.entries), chunks[0]!.context!));
    assert.deepEqual(wrong.sortedKeys(), ["a"], "b dropped after the first chunk");
    // The stream is cut here. Even a later complete join with the sender cannot bring b back,
    // nor c: the receiver's context now says their dots were seen, its store that they were
    // removed, and a join trusts that.
    wrong.joinInPlace(sender);
    assert.deepEqual(wrong.sortedKeys(), ["a"], "b and c are gone for good");
    assert.ok(!AWSetLattice.leq(wrong, AWSetLattice.join(local, sender)));

    // Right: the same cut keeps b, and the complete stream gives the join.
    const right = local.clone();
    const seq = new KeyChunkSequence();
    applyChunk(right, chunks[0]!, seq.accept(chunks[0]!));
    assert.deepEqual(right.sortedKeys(), ["a", "b"]);
    applyChunks(local, chunks);
    assert.deepEqual(local.sortedKeys(), ["a", "b", "c"]);
  });

  it("drops an element in range that the sender removed, but only after its chunk arrives", () => {
    const base = AWSet.bottom().add("r0", [el("a"), el("z")]);
    const local = base.clone();
    // The sender also added and removed q: only its context tells of that dot.
    const sender = base.remove([el("a"), el("z")]).add("r1", [el("b"), el("c"), el("q")]).remove([el("q")]);
    const chunks = chunkAWSet(sender, { maxEntries: 1 }); // [..b], [b\0..)
    assert.equal(chunks.length, 2);
    const seq = new KeyChunkSequence();
    applyChunk(local, chunks[0]!, seq.accept(chunks[0]!));
    assert.deepEqual(local.sortedKeys(), ["b", "z"], "a was in the first range, z not yet");
    applyChunk(local, chunks[1]!, seq.accept(chunks[1]!));
    assert.deepEqual(local.sortedKeys(), ["b", "c"]);
    assert.ok(!AWSetLattice.equals(local, AWSetLattice.join(base, sender)), "q's dot not yet known");
    assert.ok(finishKey(local, sender.ctx));
    assert.ok(!finishKey(local, sender.ctx), "folding the context twice changes nothing");
    assert.ok(AWSetLattice.equals(local, AWSetLattice.join(base, sender)));
  });

  it("refuses chunks out of order, without a context, after the last, or with entries out of range", () => {
    const s = AWSet.bottom().add("r0", [el("a"), el("b"), el("c")]);
    const [c0, c1, c2] = chunkAWSet(s, { maxEntries: 1 });
    assert.throws(() => new KeyChunkSequence().accept(c1!), ChunkOrderError);
    const seq = new KeyChunkSequence();
    seq.accept(c0!);
    assert.throws(() => seq.accept(c2!), ChunkOrderError, "skipping a chunk leaves a gap");
    assert.throws(() => seq.accept({ ...c1!, context: new CausalContext() }), ChunkOrderError);
    seq.accept(c1!);
    seq.accept(c2!);
    assert.throws(() => seq.accept(c2!), ChunkOrderError);
    assert.throws(() => applyChunks(AWSet.bottom(), [c0!, c1!]), ChunkOrderError);
    const bad = chunkToProto({ ...c1!, entries: new Map([...c0!.entries]) });
    assert.throws(() => chunkFromProto(bad), DecodeError);
    assert.throws(() => applyChunk(AWSet.bottom(), { ...c1!, entries: c0!.entries }, s.ctx), RangeError);
  });
});
