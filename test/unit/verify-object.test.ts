// verifyObject on hand-built records: a consistent set has no problems; an empty element (which no
// operation accepts now, and which peers refuse in gossip) is reported with what to do.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { CausalContext, makeDot } from "../../services/crdt/index.ts";
import { SUFFIX_ELEMENT, escapeBytes } from "../../services/store/keys.ts";
import { encodeDots } from "../../services/store/records.ts";
import { verifyObject } from "../../services/store/verify.ts";

async function* recordsOf(list: Array<[number, Buffer, Buffer]>) {
  yield* list;
}

describe("verifyObject", () => {
  it("reports an empty element", async () => {
    const ctx = CausalContext.of([makeDot("r", 1)]);
    const records = (element: Buffer): Array<[number, Buffer, Buffer]> => [[SUFFIX_ELEMENT, escapeBytes(element), encodeDots([makeDot("r", 1)])]];
    const plain = await verifyObject({ size: 1, ctx, records: recordsOf(records(Buffer.from("a"))) });
    const empty = await verifyObject({ size: 1, ctx, records: recordsOf(records(Buffer.alloc(0))) });
    assert.ok(empty.some((p) => /an empty element is stored .*Delete the key/.test(p)), empty.join("; "));
    assert.ok(!plain.some((p) => /empty element/.test(p)), plain.join("; "));
  });
});
