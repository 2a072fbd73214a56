// The ORCF decoder refuses a tag listed twice (in two buckets) and a tag outside the history,
// whatever structure it uses to remember the tags it met.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { CausalContext } from "../../services/crdt/causal-context.ts";
import { cuckooParams } from "../../services/crdt/cuckoo-table.ts";
import { DecodeError } from "../../services/crdt/errors.ts";
import { seededRandom } from "../../services/crdt/filter-common.ts";
import { Orcf, decodeOrcf, encodeOrcf } from "../../services/crdt/orcf.ts";

const p = cuckooParams(16, 8);
const history = CausalContext.of([
  { replica: "r", counter: 1 },
  { replica: "r", counter: 2 },
]);
/** Entries of tags 1 and 2 in buckets 3 and 9; the last byte of the encoding is tag 2's timestamp. */
const bytes = () => Buffer.from(encodeOrcf(Orcf.fromParts(p, [{ bucket: 3, fp: 5, replica: "r", t: 1 }, { bucket: 9, fp: 6, replica: "r", t: 2 }], history)));

describe("ORCF decoder", () => {
  it("reads back a valid encoding", () => {
    const o = decodeOrcf(bytes());
    assert.equal(o.count, 2);
    assert.equal(o.bucketOf("r", 2), 9);
  });

  it("refuses a tag listed twice", () => {
    const b = bytes();
    assert.equal(b[b.length - 1], 2);
    b[b.length - 1] = 1;
    assert.throws(() => decodeOrcf(b), (e: Error) => e instanceof DecodeError && /tag 1@r appears twice/.test(e.message));
  });

  it("refuses a tag outside the history", () => {
    const b = bytes();
    b[b.length - 1] = 3;
    assert.throws(() => decodeOrcf(b), (e: Error) => e instanceof DecodeError && /tag 3@r is not in the history/.test(e.message));
  });
});

/** The tags a remove delta tombstones, as replica:first-last. */
const tombstone = (d: Orcf) => d.history.replicas().flatMap((r) => d.history.rangesOf(r).map(([a, b]) => `${r}:${a}-${b}`));

describe("ORCF remove after a codec round trip", () => {
  it("removes the same copy of an element from a state and from its decoding, for the same random draw", () => {
    const element = Buffer.from("x");
    const s = Orcf.empty(p);
    // Copies added by replicas in an order their tags do not sort in, so that slot order and tag order differ.
    for (const replica of ["z", "m", "a", "q"]) s.addInPlace(element, replica, seededRandom(1));
    const decoded = decodeOrcf(encodeOrcf(s));
    const removed = new Set<string>();
    for (let seed = 0; seed < 32; seed++) {
      const mine = tombstone(s.removeDelta(element, seededRandom(seed)));
      const theirs = tombstone(decoded.removeDelta(element, seededRandom(seed)));
      assert.deepEqual(theirs, mine, `seed ${seed}`);
      removed.add(JSON.stringify(mine));
    }
    assert.ok(removed.size > 1, "the draws pick different copies");
  });
});
