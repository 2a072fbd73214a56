// Stored headers (store/records.ts): encodeHeader writes its bytes directly, and they must be the
// bytes of the layout it documents (protobuf wire primitives in a fixed order), for every kind of
// header, and decode back to the same header.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { CausalContext, ObjectType, contextToProto } from "../../services/crdt/index.ts";
import { CausalContext as CausalContextMsg } from "../../services/gen/deltaset/v1/types.ts";
import { type Header, decodeHeader, encodeHeader } from "../../services/store/records.ts";

/** The layout, written with the generated codec and a BinaryWriter. */
function reference(h: Header): Buffer {
  const version = h.log !== undefined ? 2 : h.live !== undefined ? 3 : 1;
  const w = new BinaryWriter();
  w.uint32(version).uint32(h.type).uint64(h.size).bytes(CausalContextMsg.encode(contextToProto(h.ctx)).finish()).bytes(h.body);
  if (h.log !== undefined) w.uint64(h.log.first).uint64(h.log.next).uint64(h.log.logBytes).uint64(h.log.baseBytes);
  if (h.live !== undefined) w.fixed32(h.live.a).fixed32(h.live.b);
  return Buffer.from(w.finish());
}

const safe = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const headerArb: fc.Arbitrary<Header> = fc
  .record({
    type: fc.constantFrom(ObjectType.AWSET, ObjectType.COUNTER, ObjectType.GBF, ObjectType.ORCF, ObjectType.AWSET_PROB),
    dots: fc.array(fc.record({ replica: fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 }), counter: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }) }), { maxLength: 12 }),
    dense: fc.array(fc.record({ replica: fc.constantFrom("n1", "n2"), counter: fc.integer({ min: 1, max: 30 }) }), { maxLength: 30 }),
    size: safe,
    body: fc.uint8Array({ maxLength: 200 }),
    extra: fc.oneof(
      fc.constant(undefined),
      fc.record({ first: safe, next: safe, logBytes: safe, baseBytes: safe }).map((log) => ({ log: { ...log } })),
      fc.record({ a: fc.integer({ min: 0, max: 2 ** 32 - 1 }), b: fc.integer({ min: 0, max: 2 ** 32 - 1 }) }).map((live) => ({ live: { ...live } })),
    ),
  })
  .map(({ type, dots, dense, size, body, extra }) => {
    const ctx = new CausalContext();
    for (const d of [...dots, ...dense]) ctx.addDot(d);
    return { type, ctx, size, body, ...extra };
  });

describe("stored headers", () => {
  it("encodeHeader writes the documented layout (plain, with a state log, with a live digest) and decodes back", () => {
    fc.assert(
      fc.property(headerArb, (h) => {
        const bytes = encodeHeader(h);
        assert.deepEqual(bytes, reference(h));
        const back = decodeHeader(bytes);
        assert.ok(back.ctx.equals(h.ctx));
        assert.deepEqual({ ...back, ctx: undefined, body: Buffer.from(back.body) }, { ...h, ctx: undefined, body: Buffer.from(h.body) });
      }),
      { numRuns: 300 },
    );
  });

  it("refuses a header with both a state log and a live digest", () => {
    const h = { type: ObjectType.AWSET, ctx: new CausalContext(), size: 0, body: new Uint8Array(), log: { first: 0, next: 0, logBytes: 0, baseBytes: 0 }, live: { a: 0, b: 0 } };
    assert.throws(() => encodeHeader(h), /state log or a live digest, not both/);
  });
});
