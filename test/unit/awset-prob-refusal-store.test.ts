// A store joining a probabilistic set's state answers the dots its filter refuses with a remove of
// its own (JoinResult.settled, spread by gossip and Merge as a local delta), joined into its state
// first; the replicas holding such a dot drop it when that delta reaches them, so a false positive
// at one replica does not keep the replicas apart.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { AWSetProb, DEFAULT_AWSET_PROB_PARAMS } from "../../services/crdt/awset-prob.ts";
import { ObjectType } from "../../services/crdt/index.ts";
import { partitionOf } from "../../services/gossip/index.ts";
import { Store } from "../../services/store/store.ts";

const el = (n: number) => Uint8Array.of(n);
let opened = 0;
const open = () => Store.open({ dir: "memory", nodeId: `r${opened++}`, partitions: 1, partitionOf, sync: "buffered" });
const members = async (s: Store) => ((await s.readState("k"))?.state as AWSetProb).elements().map((e) => e[0]);

describe("AWSET_PROB refusals through the store", () => {
  it("a merge whose dot the filter reports returns a remove that the other replicas join", async () => {
    const [a, b, c] = [await open(), await open(), await open()];
    try {
      const added = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
      added.joinInPlace(added.addDelta(el(1), 10n));
      await a.merge("k", ObjectType.AWSET_PROB, added.clone());
      await b.merge("k", ObjectType.AWSET_PROB, added.clone());
      // c's filter reports dot 10 (another element's remove with that dot: a false positive).
      const fp = AWSetProb.bottom(DEFAULT_AWSET_PROB_PARAMS);
      fp.joinInPlace(fp.addDelta(el(9), 10n));
      fp.joinInPlace(fp.removeDelta(el(9)));
      await c.merge("k", ObjectType.AWSET_PROB, fp);

      const r = await c.merge("k", ObjectType.AWSET_PROB, added.clone());
      assert.equal(r.settled?.type, ObjectType.AWSET_PROB);
      assert.deepEqual(await members(c), []);
      const again = await c.merge("k", ObjectType.AWSET_PROB, added.clone());
      assert.ok(again.settled !== undefined, "each state carrying the dot is answered");
      for (const s of [a, b]) await s.merge("k", ObjectType.AWSET_PROB, (r.settled!.delta as AWSetProb).clone());
      assert.deepEqual([await members(a), await members(b), await members(c)], [[], [], []]);
      // a now refuses the stale add too (a true tombstone this time), and answers it the same way.
      assert.ok((await a.merge("k", ObjectType.AWSET_PROB, added.clone())).settled !== undefined);
      // Nothing refused, nothing answered: a store that holds the dot, or has no tombstone for it.
      const d = await open();
      try {
        assert.equal((await d.merge("k", ObjectType.AWSET_PROB, added.clone())).settled, undefined);
        assert.equal((await d.merge("k", ObjectType.AWSET_PROB, added.clone())).settled, undefined);
      } finally {
        await d.close();
      }
      assert.deepEqual(await c.verify("k"), []);
    } finally {
      for (const s of [a, b, c]) await s.close();
    }
  });
});
