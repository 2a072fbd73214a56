// The request checks every client call runs before decoding (node/raw-fields.ts): the allocation-
// free scan of misreadField must agree with the field-naming walk on any bytes, well formed or
// not, and the entry count repeatedEntriesAbove skips for messages no longer than its limit can
// never exceed the message's length.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as protoLoader from "@grpc/proto-loader";
import fc from "fast-check";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type MessageSchemas, countRepeatedEntries, messageSchemas, misreadField, misreadFieldByWalk, repeatedEntriesAbove } from "../../services/node/raw-fields.ts";
import { PROTO_DIR, PROTO_FILES } from "../../services/node/server.ts";

const schemas: MessageSchemas = messageSchemas(protoLoader.loadSync(PROTO_FILES, { includeDirs: [PROTO_DIR], keepCase: true }));
const TYPES = ["deltaset.v1.AddRequest", "deltaset.v1.RemoveRequest", "deltaset.v1.MergeRequest", "deltaset.v1.IncrementRequest", "deltaset.v1.QueryRequest", "deltaset.v1.ExportRequest"];

const INVALID_UTF8 = [Uint8Array.of(0xff), Uint8Array.of(0xc3), Uint8Array.of(0xe2, 0x82), Uint8Array.of(0xed, 0xa0, 0x80), Uint8Array.of(0xf8, 0x88, 0x80, 0x80, 0x80)];

/** A string field's bytes: valid UTF-8 (ASCII or not), or valid text around an invalid sequence. */
const stringBytes = fc.oneof(
  fc.string({ maxLength: 12 }).map((s) => new TextEncoder().encode(s)),
  fc.string({ unit: "grapheme", maxLength: 6 }).map((s) => new TextEncoder().encode(s)),
  fc.tuple(fc.string({ maxLength: 4 }), fc.constantFrom(...INVALID_UTF8), fc.string({ maxLength: 4 })).map(([a, bad, b]) => {
    const enc = new TextEncoder();
    return Uint8Array.from([...enc.encode(a), ...bad, ...enc.encode(b)]);
  }),
);

/** One field of a message of type t, as (writer) => void: schema fields with any value, unknown fields, wrong wire types. */
function fieldOf(t: string, depth: number): fc.Arbitrary<(w: BinaryWriter) => void> {
  const fields = [...(schemas.get(t) ?? new Map()).entries()];
  const options: Array<fc.Arbitrary<(w: BinaryWriter) => void>> = [
    fc.tuple(fc.integer({ min: 1, max: 40 }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })).map(([no, v]) => (w: BinaryWriter) => void w.tag(no, WireType.Varint).uint64(v)),
    fc.tuple(fc.integer({ min: 1, max: 40 }), fc.uint8Array({ maxLength: 8 })).map(([no, b]) => (w: BinaryWriter) => void w.tag(no, WireType.LengthDelimited).bytes(b)),
    fc.tuple(fc.integer({ min: 1, max: 40 }), fc.integer()).map(([no, v]) => (w: BinaryWriter) => void w.tag(no, WireType.Bit32).fixed32(v >>> 0)),
    fc.tuple(fc.integer({ min: 1, max: 40 }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })).map(([no, v]) => (w: BinaryWriter) => void w.tag(no, WireType.Bit64).fixed64(v)),
  ];
  for (const [no, f] of fields) {
    if (f.string) options.push(stringBytes.map((b) => (w: BinaryWriter) => void w.tag(no, WireType.LengthDelimited).bytes(b)));
    if (f.message !== undefined && depth < 3) {
      options.push(messageOf(f.message, depth + 1).map((b) => (w: BinaryWriter) => void w.tag(no, WireType.LengthDelimited).bytes(b)));
    }
  }
  return fc.oneof(...options);
}

function messageOf(t: string, depth: number): fc.Arbitrary<Uint8Array> {
  return fc.array(fieldOf(t, depth), { maxLength: depth === 0 ? 10 : 5 }).map((fs) => {
    const w = new BinaryWriter();
    for (const f of fs) f(w);
    return w.finish();
  });
}

/** A message of one of the request types, sometimes cut short or with bytes appended (malformed). */
const request = fc.constantFrom(...TYPES).chain((t) =>
  fc.tuple(
    fc.constant(t),
    messageOf(t, 0),
    fc.oneof({ weight: 4, arbitrary: fc.constant<"whole">("whole") }, fc.constant<"cut">("cut"), fc.constant<"tail">("tail")),
    fc.uint8Array({ minLength: 1, maxLength: 6 }),
    fc.nat(),
  ).map(([type, bytes, how, tail, at]) => ({
    type,
    bytes: how === "whole" ? bytes : how === "cut" ? bytes.subarray(0, bytes.length === 0 ? 0 : at % bytes.length) : Uint8Array.from([...bytes, ...tail]),
  })),
);

describe("client request checks before decoding (raw-fields.ts)", () => {
  it("the scan and the walk name the same misread field, or none, on any bytes", () => {
    let found = 0;
    fc.assert(
      fc.property(request, ({ type, bytes }) => {
        const fast = misreadField(schemas, type, bytes);
        assert.deepEqual(fast, misreadFieldByWalk(schemas, type, bytes));
        if (fast !== undefined) found++;
      }),
      { numRuns: 3000 },
    );
    // The generator reaches both answers (else the agreement above says little).
    assert.ok(found > 100, `only ${found} messages with a misread field`);
  });

  it("the scan agrees on arbitrary bytes too", () => {
    fc.assert(
      fc.property(fc.constantFrom(...TYPES), fc.uint8Array({ maxLength: 64 }), (type, bytes) => {
        assert.deepEqual(misreadField(schemas, type, bytes), misreadFieldByWalk(schemas, type, bytes));
      }),
      { numRuns: 3000 },
    );
  });

  it("a message never holds more repeated entries than bytes, so a message within the limit is not counted", () => {
    fc.assert(
      fc.property(fc.oneof(request, fc.record({ type: fc.constantFrom(...TYPES), bytes: fc.uint8Array({ maxLength: 64 }) })), ({ type, bytes }) => {
        const n = countRepeatedEntries(schemas, type, bytes, Infinity);
        assert.ok(n <= bytes.length, `${n} entries in ${bytes.length} bytes`);
        assert.equal(repeatedEntriesAbove(schemas, type, bytes, bytes.length), false);
      }),
      { numRuns: 3000 },
    );
  });

  it("a message past the limit is still counted and refused", () => {
    const w = new BinaryWriter();
    for (let i = 0; i < 50; i++) w.tag(3, WireType.LengthDelimited).bytes(new Uint8Array(0));
    const bytes = w.finish();
    assert.equal(repeatedEntriesAbove(schemas, "deltaset.v1.AddRequest", bytes, 49), true);
    assert.equal(repeatedEntriesAbove(schemas, "deltaset.v1.AddRequest", bytes, 50), false);
    // The densest encoding: packed one-byte varints, an entry per byte after the field's tag and
    // length. Three bytes past the limit hold one entry past it.
    const packed: MessageSchemas = new Map([["t.P", new Map([[1, { name: "xs", repeated: true, string: false, bytes: false }]])]]);
    const limit = 40;
    const dense = Uint8Array.from([0x0a, limit + 1, ...new Array(limit + 1).fill(1)]);
    assert.equal(dense.length, limit + 3);
    assert.equal(repeatedEntriesAbove(packed, "t.P", dense, limit), true);
  });
});
