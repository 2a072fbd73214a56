// The store's join of a state it has mostly seen (gossip delivers a delta again through every
// neighbour) must equal the lattice's join. Two replicas make random adds and removes; the
// store holding one of them merges states and deltas taken from either, or from its own past
// (redundant: the fast path that decides from the header alone), and after each merge it must
// hold exactly the AWSet join, and say `changed` exactly when the join changed something.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { Store } from "../../services/store/store.ts";

const KEY = "k";
const el = (n: number) => Buffer.from(`e${n}`);

type Op = { kind: "add" | "remove"; at: 0 | 1; e: number } | { kind: "merge"; source: "other" | "past" | "otherDelta"; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constantFrom("add" as const, "remove" as const), at: fc.constantFrom(0 as const, 1 as const), e: fc.nat(5) }),
  fc.record({ kind: fc.constant("merge" as const), source: fc.constantFrom("other" as const, "past" as const, "otherDelta" as const), pick: fc.nat() }),
);

function members(s: AWSet): string[] {
  return s.elements().map((e) => e.toString()).sort();
}

describe("store join of redundant states and deltas equals the lattice join", () => {
  it("any sequence of adds, removes and merges (states, deltas, or the store's own past)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
        const store = await Store.open({ dir: "memory", nodeId: "s", partitions: 1, partitionOf: () => 0, sync: "buffered" });
        try {
          // The store is replica 0's copy; `model` is the same set as a plain AWSet.
          let model = AWSet.bottom();
          let other = AWSet.bottom();
          const past: AWSet[] = [];
          const otherDeltas: AWSet[] = [];
          for (const op of ops) {
            if (op.kind !== "merge") {
              if (op.at === 0) {
                const r = op.kind === "add" ? await store.add(KEY, [el(op.e)]) : await store.remove(KEY, [el(op.e)]);
                model = AWSetLattice.join(model, r.delta);
                past.push(r.delta);
              } else {
                const d = op.kind === "add" ? other.addDelta("o", [el(op.e)]) : other.removeDelta([el(op.e)]);
                other = AWSetLattice.join(other, d);
                otherDeltas.push(d);
              }
              continue;
            }
            const pool = op.source === "other" ? [other] : op.source === "past" ? past : otherDeltas;
            if (pool.length === 0) continue;
            const incoming = pool[op.pick % pool.length]!;
            const expected = AWSetLattice.join(model, incoming);
            const r = await store.merge(KEY, ObjectType.AWSET, incoming);
            assert.equal(r.changed, !AWSetLattice.equals(expected, model), "changed exactly when the join changed the set");
            model = expected;
            const held = (await store.readState(KEY))?.state as AWSet | undefined;
            assert.deepEqual(members(held ?? AWSet.bottom()), members(model));
            assert.ok((held ?? AWSet.bottom()).ctx.equals(model.ctx), "same causal context");
          }
        } finally {
          await store.close();
        }
      }),
      { numRuns: 150 },
    );
  });
});
