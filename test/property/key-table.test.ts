// KeyTable answers as a Map keyed by property name would, whatever the sequence of sets, deletes
// and walks, with integer keys and string keys (numeric-looking ones and "__proto__" among them).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { KeyTable } from "../../services/common/key-table.ts";

const key = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.constantFrom("a", "b", "7", "__proto__", "constructor", "toString", "", "01"), fc.string({ maxLength: 3 }));
const op = fc.oneof(
  fc.record({ kind: fc.constant("set" as const), key, value: fc.integer() }),
  fc.record({ kind: fc.constant("delete" as const), key }),
  fc.record({ kind: fc.constant("clear" as const) }),
);

describe("KeyTable", () => {
  it("get, has, size, delete's answer, forEach and values match a Map of the keys' property names", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        const table = new KeyTable<number>();
        const model = new Map<string, number>();
        for (const o of ops) {
          if (o.kind === "set") {
            assert.equal(table.set(o.key, o.value), table);
            model.set(String(o.key), o.value);
          } else if (o.kind === "delete") {
            assert.equal(table.delete(o.key), model.delete(String(o.key)));
          } else {
            table.clear();
            model.clear();
          }
          assert.equal(table.size, model.size);
        }
        for (const k of [...model.keys(), "absent", 999]) {
          assert.equal(table.get(k), model.get(String(k)));
          assert.equal(table.has(k), model.has(String(k)));
        }
        const walked = new Map<string, number>();
        table.forEach((v, k, t) => {
          assert.equal(t, table);
          walked.set(k, v);
        });
        assert.deepEqual(walked, model);
        assert.deepEqual(table.values().sort(), [...model.values()].sort());
      }),
    );
  });

  it("a walk that deletes entries it has not reached yet skips them, and one that deletes each entry it visits empties the table", () => {
    const table = new KeyTable<string>();
    for (const k of [1, 2, 3, 4, "x", "y"]) table.set(k, `v${k}`);
    const seen: string[] = [];
    table.forEach((v, k) => {
      seen.push(k);
      if (k === "1") table.delete(3);
    });
    assert.deepEqual(seen, ["1", "2", "4", "x", "y"]);
    table.forEach((_v, k) => table.delete(k));
    assert.equal(table.size, 0);
    assert.equal(table.get(1), undefined);
    table.set(5, "again");
    assert.equal(table.get(5), "again");
    assert.equal(table.size, 1);
  });
});
