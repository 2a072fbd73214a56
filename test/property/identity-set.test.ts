// IdentitySet answers as a Set of the same objects would, whatever the sequence of adds, deletes
// and walks, and a walk skips members deleted before it reaches them.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { IdentitySet } from "../../services/common/identity-set.ts";

const op = fc.oneof(
  fc.record({ kind: fc.constant("add" as const), i: fc.nat({ max: 9 }) }),
  fc.record({ kind: fc.constant("delete" as const), i: fc.nat({ max: 9 }) }),
  fc.record({ kind: fc.constant("clear" as const) }),
);

describe("IdentitySet", () => {
  it("has, size, add and delete's answers and the walk match a Set; an object may be in two sets", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 100 }), (ops) => {
        const objects = Array.from({ length: 10 }, (_, i) => ({ i }));
        const set = new IdentitySet<{ i: number }>();
        const other = new IdentitySet<{ i: number }>();
        const model = new Set<{ i: number }>();
        for (const o of ops) {
          if (o.kind === "add") {
            assert.equal(set.add(objects[o.i]!), set);
            model.add(objects[o.i]!);
            other.add(objects[o.i]!);
          } else if (o.kind === "delete") {
            assert.equal(set.delete(objects[o.i]!), model.delete(objects[o.i]!));
          } else {
            set.clear();
            model.clear();
          }
          assert.equal(set.size, model.size);
        }
        for (const obj of objects) assert.equal(set.has(obj), model.has(obj));
        assert.deepEqual(new Set(set), model);
        const walked: Array<{ i: number }> = [];
        set.forEach((v, same, s) => {
          assert.equal(v, same);
          assert.equal(s, set);
          walked.push(v);
        });
        assert.equal(walked.length, model.size);
        // The other set is untouched by this one's deletes.
        for (const obj of objects) if (ops.some((o) => o.kind === "add" && objects[o.i] === obj)) assert.ok(other.has(obj));
      }),
    );
  });

  it("a walk visits members deleted as it goes once, skips those deleted before it reaches them, and not those added meanwhile", () => {
    const objs = Array.from({ length: 5 }, (_, i) => ({ i }));
    const set = new IdentitySet<{ i: number }>();
    for (const o of objs) set.add(o);
    const seen: number[] = [];
    for (const o of set) {
      seen.push(o.i);
      set.delete(o);
      if (o.i === 4) set.delete(objs[2]!);
      set.add({ i: 100 + o.i });
    }
    assert.deepEqual(seen, [4, 3, 1, 0]);
    assert.equal(set.size, 4);
  });
});
