// A store that keeps decoded whole states in memory (decoded-states.ts) and large ones as a base
// and a log of deltas (whole-state-layout.ts) answers exactly as one that decodes the one stored
// body on every operation, for any sequence of adds, removes, received deltas (in any order,
// repeated) and writers that throw after changing the state half-way; and reads the same after
// it is reopened from its directory. A third store logs without the cache, so every operation
// reads its state back from the base and the log.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { ObjectType, operationsFor } from "../../services/crdt/index.ts";
import { FilterSiblings, OrcfKeyLattice } from "../../services/crdt/index.ts";
import type { Orcf as OrcfFilter } from "../../services/crdt/orcf.ts";

/** An ORCF key's state: its filter (siblings of one, here). */
type Orcf = FilterSiblings<OrcfFilter>;
import { seededRandom } from "../../services/crdt/filter-common.ts";
import type { Store } from "../../services/store/store.ts";
import { closeStateLogStores, finishStateLogRun, replayable, stateLogStores } from "../helpers/state-log-stores.ts";

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

const root = mkdtempSync(join(tmpdir(), "deltaset-state-cache-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;

/** Deltas of another replica's adds and removes, to be received in the order the test draws. */
function remoteDeltas(): Orcf[] {
  const r = seededRandom(99);
  const s = orcf.create({ capacity: 512 }) as Orcf;
  const out: Orcf[] = [];
  for (let i = 0; i < 8; i++) {
    const f = s.main!;
    out.push(new FilterSiblings([i % 3 === 2 ? f.removeInPlace(u(`e${i - 1}`), r) : f.addInPlace(u(`e${i}`), "remote~1", r)]));
  }
  return out;
}

async function apply(store: Store, op: Op, deltas: Orcf[], seed: number): Promise<void> {
  const env = { replica: store.replicaId, random: seededRandom(seed), randomId: () => 1n };
  switch (op.kind) {
    case "add":
      await store.update(KEY, ObjectType.ORCF, (current) => {
        const state = orcf.isUnset(current) ? orcf.create({ capacity: 512 }) : current;
        return { state, delta: orcf.add(state, [u(`e${op.element}`)], env), result: 0 };
      });
      return;
    case "remove":
      await store.update(KEY, ObjectType.ORCF, (current) => ({ state: current, delta: orcf.isUnset(current) ? undefined : orcf.remove!(current, [u(`e${op.element}`)], env), result: 0 }), { mustExist: true });
      return;
    case "receive":
      await store.merge(KEY, ObjectType.ORCF, OrcfKeyLattice.clone(deltas[op.delta]!));
      return;
    case "throwing":
      await assert.rejects(
        store.update(KEY, ObjectType.ORCF, (current) => {
          if (!orcf.isUnset(current)) (current as Orcf).main!.addInPlace(u(`half-${op.element}`), store.replicaId, env.random);
          throw new Error("refused");
        }),
        /refused/,
      );
  }
}

/** 150 elements in one update: a base of about a kilobyte. */
async function seed(store: Store): Promise<void> {
  await store.update(KEY, ObjectType.ORCF, (current) => {
    const state = orcf.isUnset(current) ? orcf.create({ capacity: 512 }) : current;
    const env = { replica: store.replicaId, random: seededRandom(5), randomId: () => 1n };
    return { state, delta: orcf.add(state, Array.from({ length: 150 }, (_, i) => u(`seed-${i}`)), env), result: 0 };
  });
}

const counts = { appends: 0, compactions: 0 };

async function served(store: Store): Promise<Orcf | undefined> {
  return (await store.wholeState(KEY))?.state as Orcf | undefined;
}

describe("the store's decoded-state cache, against a store without one", () => {
  it("serves the same state after every operation, equal to the stored body", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
        const deltas = remoteDeltas();
        const dir = join(root, `d${dirs++}`);
        const trio = await stateLogStores(dir);
        const { logged, plain, replayed } = trio;
        const stores = [logged, plain, replayed];
        try {
          // A base of some size first, so that deltas are appended to the log before it is folded.
          for (const s of stores) await seed(s);
          for (let i = 0; i < ops.length; i++) {
            for (const s of stores) await apply(s, ops[i]!, deltas, i);
            const [a, b, c] = await Promise.all(stores.map(served));
            if (a === undefined || b === undefined || c === undefined) {
              assert.ok(a === undefined && b === undefined && c === undefined);
              continue;
            }
            assert.ok(OrcfKeyLattice.equals(a, b), `cached and logged = plain, after op ${i} (${JSON.stringify(ops[i])})`);
            assert.ok(OrcfKeyLattice.equals(c, b), `logged and read back = plain, after op ${i}`);
            assert.ok(OrcfKeyLattice.equals(a, (await logged.readState(KEY))!.state as Orcf), "served = stored");
          }
          assert.equal(plain.stats().stateCache.entries, 0);
          await finishStateLogRun<Orcf>(trio, dir, KEY, (a, b) => OrcfKeyLattice.equals(a, b), counts);
        } finally {
          await closeStateLogStores(trio);
        }
      }),
      replayable(RUNS),
    );
    assert.ok(counts.appends > 0 && counts.compactions > 0, `the runs appended deltas to logs (${counts.appends}) and folded logs into new bases (${counts.compactions})`);
    console.log(`state logs: ${counts.appends} appends, ${counts.compactions} compactions`);
  });
});
