// A store that keeps decoded whole states in memory (decoded-states.ts) answers exactly as one
// that decodes the stored body on every operation, for any sequence of adds, removes, received
// deltas (in any order, repeated) and writers that throw after changing the state half-way.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ObjectType, operationsFor } from "../../services/crdt/index.ts";
import { type Orcf, OrcfLattice } from "../../services/crdt/orcf.ts";
import { seededRandom } from "../../services/crdt/filter-common.ts";
import { Store } from "../../services/store/store.ts";

const RUNS = Number(process.env.FC_RUNS ?? 40);
const u = (s: string) => Buffer.from(s);
const orcf = operationsFor(ObjectType.ORCF)!;
const KEY = "f";

type Op =
  | { kind: "add"; element: number }
  | { kind: "remove"; element: number }
  | { kind: "receive"; delta: number }
  | { kind: "throwing"; element: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("add" as const), element: fc.nat(12) }),
  fc.record({ kind: fc.constant("remove" as const), element: fc.nat(12) }),
  fc.record({ kind: fc.constant("receive" as const), delta: fc.nat(7) }),
  fc.record({ kind: fc.constant("throwing" as const), element: fc.nat(12) }),
);

const open = (stateCacheBytes: number) => Store.open({ dir: "memory", partitions: 2, partitionOf: () => 0, sync: "buffered", stateCacheBytes, nodeId: "local", replicaId: "local~1" });

/** Deltas of another replica's adds and removes, to be received in the order the test draws. */
function remoteDeltas(): Orcf[] {
  const r = seededRandom(99);
  const s = orcf.create({ capacity: 64 }) as Orcf;
  const out: Orcf[] = [];
  for (let i = 0; i < 8; i++) {
    out.push(i % 3 === 2 ? s.removeInPlace(u(`e${i - 1}`), r) : s.addInPlace(u(`e${i}`), "remote~1", r));
  }
  return out;
}

async function apply(store: Store, op: Op, deltas: Orcf[], seed: number): Promise<void> {
  const env = { replica: store.replicaId, random: seededRandom(seed), randomId: () => 1n };
  switch (op.kind) {
    case "add":
      await store.update(KEY, ObjectType.ORCF, (current) => {
        const state = orcf.isUnset(current) ? orcf.create({ capacity: 64 }) : current;
        return { state, delta: orcf.add(state, [u(`e${op.element}`)], env), result: 0 };
      });
      return;
    case "remove":
      await store.update(KEY, ObjectType.ORCF, (current) => ({ state: current, delta: orcf.isUnset(current) ? undefined : orcf.remove!(current, [u(`e${op.element}`)], env), result: 0 }), { mustExist: true });
      return;
    case "receive":
      await store.merge(KEY, ObjectType.ORCF, OrcfLattice.clone(deltas[op.delta]!));
      return;
    case "throwing":
      await assert.rejects(
        store.update(KEY, ObjectType.ORCF, (current) => {
          if (!orcf.isUnset(current)) (current as Orcf).addInPlace(u(`half-${op.element}`), store.replicaId, env.random);
          throw new Error("refused");
        }),
        /refused/,
      );
  }
}

async function served(store: Store): Promise<Orcf | undefined> {
  return (await store.wholeState(KEY))?.state as Orcf | undefined;
}

describe("the store's decoded-state cache, against a store without one", () => {
  it("serves the same state after every operation, equal to the stored body", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
        const deltas = remoteDeltas();
        const cached = await open(32 * 1024 * 1024);
        const plain = await open(0);
        try {
          for (let i = 0; i < ops.length; i++) {
            await apply(cached, ops[i]!, deltas, i);
            await apply(plain, ops[i]!, deltas, i);
            const a = await served(cached);
            const b = await served(plain);
            if (a === undefined || b === undefined) {
              assert.equal(a, b);
              continue;
            }
            assert.ok(OrcfLattice.equals(a, b), `after op ${i} (${JSON.stringify(ops[i])})`);
            assert.ok(OrcfLattice.equals(a, (await cached.readState(KEY))!.state as Orcf), "served = stored body");
          }
          assert.equal(plain.stats().stateCache.entries, 0);
        } finally {
          await cached.close();
          await plain.close();
        }
      }),
      { numRuns: RUNS },
    );
  });
});
