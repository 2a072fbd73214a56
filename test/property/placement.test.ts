// Property tests of partition placement (gossip/placement.ts): owners are R distinct live members
// whatever the order of the view, a join moves only the copies the newcomer takes, and a leave
// only the copies the leaver held.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { copiesToMove, ownedBy, ownersOf, placement } from "../../services/gossip/placement.js";

const PARTITIONS = 64;
const ids = fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,8}$/), { minLength: 1, maxLength: 12 });
const factor = fc.integer({ min: 1, max: 5 });

describe("placement by rendezvous hashing", () => {
  it("gives every partition min(R, N) distinct members, the same for any order of the view", () =>
    fc.assert(
      fc.property(ids, factor, fc.integer(), (members, r, seed) => {
        const shuffled = [...members].sort((a, b) => ((a.charCodeAt(0) * seed) % 7) - ((b.charCodeAt(0) * seed) % 7) || (a < b ? -1 : 1));
        const t = placement(members, PARTITIONS, r);
        assert.deepEqual(placement(shuffled, PARTITIONS, r), t);
        for (const owners of t) {
          assert.equal(owners.length, Math.min(r, members.length));
          assert.equal(new Set(owners).size, owners.length);
          for (const o of owners) assert.ok(members.includes(o));
        }
        assert.deepEqual(placement(members, PARTITIONS, "all")[0]!.slice().sort(), [...members].sort());
      }),
    ));

  it("on a join, moves only the copies the newcomer takes, each replacing one owner", () =>
    fc.assert(
      fc.property(ids, factor, fc.stringMatching(/^[A-Z]{1,6}$/), (members, r, joiner) => {
        const before = placement(members, PARTITIONS, r);
        const after = placement([...members, joiner], PARTITIONS, r);
        const taken = ownedBy(joiner, after).length;
        assert.equal(copiesToMove(before, after), taken, "only the newcomer gains copies");
        for (let p = 0; p < PARTITIONS; p++) {
          const kept = after[p]!.filter((o) => o !== joiner);
          assert.ok(kept.every((o) => before[p]!.includes(o)), `partition ${p}: an old owner stays or leaves, none arrives`);
          if (!after[p]!.includes(joiner)) assert.deepEqual(after[p], before[p]);
        }
      }),
    ));

  it("on a leave, only the leaver's partitions change, each gaining the next member in its order", () =>
    fc.assert(
      fc.property(ids.filter((m) => m.length >= 2), factor, fc.nat(), (members, r, k) => {
        const leaver = members[k % members.length]!;
        const rest = members.filter((m) => m !== leaver);
        const before = placement(members, PARTITIONS, r);
        const after = placement(rest, PARTITIONS, r);
        for (let p = 0; p < PARTITIONS; p++) {
          if (!before[p]!.includes(leaver)) {
            assert.deepEqual(after[p], before[p]);
            continue;
          }
          const stayed = before[p]!.filter((o) => o !== leaver);
          assert.deepEqual(after[p]!.slice(0, stayed.length), stayed, `partition ${p}: the others keep their rank`);
          assert.equal(after[p]!.length - stayed.length, rest.length >= r ? 1 : 0);
          assert.deepEqual(after[p], ownersOf(p, rest, r));
        }
      }),
    ));
});
