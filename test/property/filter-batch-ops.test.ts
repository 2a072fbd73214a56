// A batch Add (or ORCF Remove) on a filter key runs each element's mutator in place and gathers
// the deltas into one (crdt/filter-operations.ts). The gathered delta must carry exactly the
// batch's change: joined into the state as it was before the batch, it gives the state after it;
// and gathering must not touch the state itself.
import { strict as assert } from "node:assert";
import { it } from "node:test";
import fc from "fast-check";
import { ObjectType, latticeFor, operationsFor, runOperation, seededRandom } from "../../services/crdt/index.ts";

const RUNS = Number(process.env.FC_RUNS ?? 60);
const TYPES = [ObjectType.GBF, ObjectType.GCF, ObjectType.ORCF, ObjectType.SCGBF, ObjectType.SCGCF, ObjectType.SCORCF];
const u = (n: number) => new TextEncoder().encode(`el-${n}`);

it("the delta of a batch, joined into the state before it, gives the state after it", () => {
  fc.assert(
    fc.property(
      fc.constantFrom(...TYPES),
      fc.array(fc.array(fc.nat(300), { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 6 }),
      fc.boolean(),
      fc.integer({ min: 1, max: 2 ** 31 }),
      (type, batches, withRemoves, seed) => {
        const ops = operationsFor(type)!;
        const L = latticeFor(type);
        const env = { replica: "r1", random: seededRandom(seed), randomId: () => 1n };
        let state: unknown = L.bottom();
        for (const [i, batch] of batches.entries()) {
          const remove = withRemoves && ops.remove !== undefined && i % 2 === 1;
          const before = L.clone(state);
          const out = remove
            ? runOperation(ops, state, { kind: "remove", elements: batch.map(u) }, env)
            : runOperation(ops, state, { kind: "add", elements: batch.map(u), params: { capacity: 400, falsePositiveRate: 0.05 } }, env);
          state = out.state;
          if (out.delta === undefined) continue;
          const after = L.encode(state);
          assert.ok(L.equals(L.join(before, out.delta), state), `batch ${i} of ${L.name}: before ⊔ delta differs from after`);
          assert.ok(L.leq(out.delta, state), "the delta is part of the state");
          // Using the delta again (as gossip would) leaves the state as it was.
          L.join(out.delta, out.delta);
          assert.deepEqual(L.encode(state), after, "gathering the deltas changed the state");
        }
      },
    ),
    { numRuns: RUNS },
  );
});
