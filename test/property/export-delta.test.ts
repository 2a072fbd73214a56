// Export and Import of a set, by the laws they must keep: the delta since a context is ⊑ the
// state and, joined into any copy whose context includes that context, gives the same as joining
// the whole state; regrouped chunks tile the element space within their limits; and the real
// export stream (from an in-memory store, through the wire encoding) imported into another store
// equals the join, is idempotent, and a stream cut after any chunk leaves the receiver between
// its state before and the join.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  AWSet,
  AWSetLattice,
  CausalContext,
  ChunkRegrouper,
  type DotSet,
  type ElementKey,
  type EntryChunk,
  ObjectType,
  awsetEntrySize,
  deltaSince,
  elementBytes,
  elementKey,
  inChunkRange,
} from "../../services/crdt/index.js";
import { KeyChunkSequence, partitionOf } from "../../services/gossip/index.js";
import { ExportChunk } from "../../services/gen/deltaset/v1/replica.js";
import { AWSetState } from "../../services/gen/deltaset/v1/types.js";
import { exportChunks } from "../../services/replica/export-stream.js";
import { applyImport } from "../../services/replica/import-apply.js";
import { testLimits } from "../helpers/limits.ts";
import { Store } from "../../services/store/store.js";
import { RUNS, awUniverse } from "./universe.js";

const KEY = "k";
const pairs = awUniverse.chain((u) => fc.record({ x: fc.constantFrom(...u.pool), y: fc.constantFrom(...u.pool), z: fc.constantFrom(...u.pool) }));

/** The copy's context, or a part of it: a since every dot of which the copy has seen. */
const sinceOf = (y: AWSet, z: AWSet, useZ: boolean) => (useZ ? y.ctx.intersect(z.ctx) : y.ctx.clone());

describe("deltaSince", () => {
  it("is ⊑ the state, and joined into a copy that has seen since it gives the join of the whole state", () => {
    fc.assert(
      fc.property(pairs, fc.boolean(), ({ x, y, z }, useZ) => {
        const since = sinceOf(y, z, useZ);
        const d = deltaSince(x, since);
        assert.ok(AWSetLattice.leq(d, x), "delta not below the state");
        assert.ok(AWSetLattice.equals(AWSetLattice.join(y, d), AWSetLattice.join(y, x)), "y ⊔ delta differs from y ⊔ x");
        // The delta is never bigger than the state, and carries no dot since has seen.
        for (const dots of d.entries.values()) for (const dot of dots) assert.ok(!since.containsDot(dot));
      }),
      { numRuns: RUNS },
    );
  });

  it("since the empty context is the whole state; since the state's own context carries no element", () => {
    fc.assert(
      fc.property(pairs, ({ x }) => {
        assert.ok(AWSetLattice.equals(deltaSince(x, new CausalContext()), x));
        assert.equal(deltaSince(x, x.ctx).entries.size, 0);
      }),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------- regrouping

const entryArb = fc.uniqueArray(fc.uint8Array({ minLength: 0, maxLength: 4 }), { selector: (b) => Buffer.from(b).toString("hex"), maxLength: 40 });

/** Sorted entries, split into tiling input chunks at random cut points. */
function inputChunks(elements: Uint8Array[], cuts: number[]): { chunks: EntryChunk[]; all: Array<[ElementKey, DotSet]> } {
  const keys = elements.map((e) => elementKey(e)).sort();
  const all: Array<[ElementKey, DotSet]> = keys.map((k, i) => [k, Array.from({ length: (i % 3) + 1 }, (_, j) => ({ replica: "r", counter: i * 3 + j + 1 }))]);
  const points = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b).filter((p) => p > 0 && p < all.length);
  const chunks: EntryChunk[] = [];
  let start = Buffer.alloc(0);
  let from = 0;
  for (const p of points) {
    const end = elementBytes(all[p - 1]![0]);
    chunks.push({ rangeStart: start, rangeEnd: end, rangeOpen: false, entries: new Map(all.slice(from, p)) });
    start = Buffer.concat([end, Buffer.from([0])]);
    from = p;
  }
  chunks.push({ rangeStart: start, rangeEnd: Buffer.alloc(0), rangeOpen: true, entries: new Map(all.slice(from)) });
  return { chunks, all };
}

describe("ChunkRegrouper", () => {
  it("gives chunks that tile in order, hold every entry once inside their range, and keep both limits", () => {
    fc.assert(
      fc.property(entryArb, fc.array(fc.nat(), { maxLength: 8 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 60 }), (elements, cuts, maxEntries, maxBytes) => {
        const { chunks, all } = inputChunks(elements, cuts);
        const r = new ChunkRegrouper({ maxEntries, maxBytes, entryBytes: awsetEntrySize });
        const out = chunks.flatMap((c) => r.push(c));
        const order = new KeyChunkSequence();
        const seen: Array<[ElementKey, DotSet]> = [];
        out.forEach((c, i) => {
          const range = { rangeStart: c.rangeStart.length > 0 ? elementKey(c.rangeStart) : undefined, rangeEnd: c.rangeOpen ? undefined : elementKey(c.rangeEnd), rangeOpen: c.rangeOpen };
          order.accept({ ...range, context: i === 0 ? new CausalContext() : undefined, keyDone: c.rangeOpen });
          for (const [k, dots] of c.entries) {
            assert.ok(inChunkRange(range, k), "entry outside its chunk's range");
            seen.push([k, dots]);
          }
          assert.ok(c.entries.size <= maxEntries);
          const bytes = [...c.entries].reduce((n, [k, d]) => n + awsetEntrySize(k, d), 0);
          assert.ok(c.entries.size <= 1 || bytes <= maxBytes, `chunk of ${bytes} bytes over ${maxBytes}`);
        });
        assert.ok(order.done, "the last chunk is not open");
        assert.deepEqual(seen, all);
      }),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------- export → import between stores

const LIMITS = testLimits();

let opened = 0;
async function storeOf(s: AWSet): Promise<Store> {
  const store = await Store.open({ dir: "memory", nodeId: `e${opened++}`, partitions: 1, partitionOf, sync: "buffered" });
  if (!s.isBottom()) await store.merge(KEY, ObjectType.AWSET, s);
  return store;
}

async function stateOf(s: Store): Promise<AWSet> {
  return ((await s.readState(KEY))?.state as AWSet | undefined) ?? AWSet.bottom();
}

/** The export of x's store, each chunk through the wire encoding. */
async function exported(x: Store, opts: { maxEntries: number; maxBytes: number; since?: CausalContext }): Promise<ExportChunk[]> {
  const out: ExportChunk[] = [];
  for await (const c of exportChunks(x, KEY, opts)) out.push(ExportChunk.decode(ExportChunk.encode(c).finish()));
  return out;
}

async function* streamOf(chunks: ExportChunk[]) {
  yield* chunks;
}

const importInto = (to: Store, chunks: ExportChunk[]) => applyImport({ store: to, limits: LIMITS, notify: () => {}, clockSkewBoundMs: 2000 }, streamOf(chunks));

describe("export and import between stores", () => {
  it("a delta since any context, imported chunk by chunk, equals joining deltaSince whole", async () => {
    await fc.assert(
      fc.asyncProperty(pairs, fc.integer({ min: 1, max: 3 }), async ({ x, y, z }, maxEntries) => {
        if (x.isBottom()) return;
        const xs = await storeOf(x);
        const ys = await storeOf(y);
        await importInto(ys, await exported(xs, { maxEntries, maxBytes: 1 << 16, since: z.ctx }));
        const got = await stateOf(ys);
        assert.ok(AWSetLattice.equals(got, AWSetLattice.join(y, deltaSince(x, z.ctx))));
        assert.ok(AWSetLattice.leq(y, got) && AWSetLattice.leq(got, AWSetLattice.join(y, x)));
        await Promise.all([xs.close(), ys.close()]);
      }),
      { numRuns: 80 },
    );
  });

  it("importing the export (whole or since the receiver's context) gives the join; twice changes nothing more; a cut stream stays between", async () => {
    await fc.assert(
      fc.asyncProperty(pairs, fc.integer({ min: 1, max: 3 }), fc.integer({ min: 8, max: 40 }), fc.constantFrom("whole", "since-y", "since-part"), fc.nat(), async ({ x, y, z }, maxEntries, maxBytes, mode, cutAt) => {
        if (x.isBottom()) return;
        const xs = await storeOf(x);
        const since = mode === "whole" ? undefined : sinceOf(y, z, mode === "since-part");
        const chunks = await exported(xs, { maxEntries, maxBytes, since });
        assert.ok(chunks.length >= 1 && chunks.at(-1)!.last);
        for (const c of chunks) {
          const n = AWSetState.decode(c.slice!.payload).entries.length;
          assert.ok(n <= maxEntries && (n <= 1 || c.slice!.payload.length <= maxBytes), `a chunk of ${n} entries and ${c.slice!.payload.length} bytes`);
        }
        assert.equal(chunks[0]!.delta, since !== undefined);
        const want = AWSetLattice.join(y, x);

        const ys = await storeOf(y);
        const r = await importInto(ys, chunks);
        assert.equal(r.chunks, BigInt(chunks.length));
        assert.ok(AWSetLattice.equals(await stateOf(ys), want), "import differs from the join");
        const again = await importInto(ys, chunks);
        assert.equal(again.changed, false);
        assert.ok(AWSetLattice.equals(await stateOf(ys), want), "a second import changed the state");

        const cut = cutAt % chunks.length;
        const partial = await storeOf(y);
        await assert.rejects(importInto(partial, chunks.slice(0, cut)), /no chunk|ended before its last chunk/);
        const s = await stateOf(partial);
        assert.ok(AWSetLattice.leq(y, s) && AWSetLattice.leq(s, want), `a stream cut after ${cut} chunk(s) left a state outside [y, y ⊔ x]`);
        await Promise.all([xs.close(), ys.close(), partial.close()]);
      }),
      { numRuns: 80 },
    );
  });
});
