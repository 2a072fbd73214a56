// The field check of state decoding (crdt/wire-check.ts): its schemas are types.proto's, any
// valid encoding of a state decodes (explicit defaults, fields out of order, a repeated scalar),
// and a field the schema does not have, or has with another wire type, is refused by name, as are
// the two encodings the generated decoder would change the meaning of: a singular message sent
// twice and a string that is not UTF-8.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as protoLoader from "@grpc/proto-loader";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { AWSetLattice, CounterLattice, DecodeError, PNCounter } from "../../services/crdt/index.ts";
import { STATE_SCHEMAS } from "../../services/crdt/wire-check.ts";
import { PROTO_DIR } from "../../services/node/server.ts";

const KIND_OF: Record<string, string> = { TYPE_UINT64: "varint", TYPE_FIXED64: "fixed64", TYPE_STRING: "string", TYPE_BYTES: "bytes" };

const lenField = (w: BinaryWriter, no: number, bytes: Uint8Array) => w.tag(no, WireType.LengthDelimited).bytes(bytes);
const vvEntry = (replica: Uint8Array, counter: number) => lenField(new BinaryWriter(), 1, replica).tag(2, WireType.Varint).uint64(counter).finish();
const utf8 = (s: string) => new TextEncoder().encode(s);

describe("state field check", () => {
  it("has exactly the fields of types.proto's state messages, with their wire types", () => {
    const defs = protoLoader.loadSync(["deltaset/v1/types.proto"], { includeDirs: [PROTO_DIR] });
    for (const [name, fields] of Object.entries(STATE_SCHEMAS)) {
      const desc = (defs[`deltaset.v1.${name}`] as unknown as { type: { field: Array<{ name: string; number: number; label: string; type: string; typeName: string }> } }).type;
      const fromProto = Object.fromEntries(
        desc.field.map((f) => [
          f.number,
          f.type === "TYPE_MESSAGE"
            ? { name: f.name, kind: "message", message: f.typeName.split(".").at(-1)!, repeated: f.label === "LABEL_REPEATED" }
            : { name: f.name, kind: KIND_OF[f.type] },
        ]),
      );
      assert.deepEqual(Object.fromEntries(Object.entries(fields)), fromProto, name);
    }
  });

  it("decodes a counter state whose encoder writes defaults explicitly and fields out of order", () => {
    const dot = new BinaryWriter().tag(1, WireType.LengthDelimited).string("r1").tag(2, WireType.Varint).uint64(2).tag(3, WireType.Bit64).fixed64(0).finish();
    const entry = new BinaryWriter()
      .tag(3, WireType.Varint).uint64(0) // negative: 0, written explicitly
      .tag(2, WireType.Varint).uint64(1) // positive before dot: out of order
      .tag(2, WireType.Varint).uint64(5) // positive again: the last one counts
      .tag(1, WireType.LengthDelimited).bytes(dot)
      .finish();
    const vv = new BinaryWriter().tag(1, WireType.LengthDelimited).string("r1").tag(2, WireType.Varint).uint64(2).finish();
    const ctx = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(vv).finish();
    const state = new BinaryWriter().tag(2, WireType.LengthDelimited).bytes(ctx).tag(1, WireType.LengthDelimited).bytes(entry).finish();
    const decoded = CounterLattice.decode(state) as PNCounter;
    assert.equal(decoded.value(), 5n);
    // The same state as this project encodes it decodes equal.
    assert.ok(CounterLattice.equals(decoded, CounterLattice.decode(CounterLattice.encode(decoded))));
  });

  it("refuses a field the schema does not have, or with another wire type, naming where", () => {
    const unknown = new BinaryWriter().tag(9, WireType.Varint).uint64(1).finish();
    assert.throws(() => AWSetLattice.decode(unknown), (e: Error) => e instanceof DecodeError && /^AWSetState has no field 9 \(a varint field was sent\)/.test(e.message));
    const entry = new BinaryWriter().tag(1, WireType.Varint).uint64(7).finish(); // element as a varint
    const wrongWire = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(entry).finish();
    assert.throws(() => AWSetLattice.decode(wrongWire), /AWSetState\.entries\[0\]\.element \(field 1\) is length-delimited, not varint/);
    assert.throws(() => CounterLattice.decode(Uint8Array.from([0x0a, 0x05, 0x01])), (e: Error) => e instanceof DecodeError && /CounterState/.test(e.message));
  });

  it("refuses a context sent in two parts, which would lose the removes of the first", () => {
    // Protobuf would merge the two parts into {ext-x:1, ext-a:1}; the decoder keeps only the last,
    // so the remove of x (covered by the first part) would be dropped without a word.
    const entry = lenField(new BinaryWriter(), 1, utf8("a")).tag(2, WireType.LengthDelimited).bytes(vvEntry(utf8("ext-a"), 1)).finish();
    const part = (replica: string) => lenField(new BinaryWriter(), 1, vvEntry(utf8(replica), 1)).finish();
    const split = lenField(lenField(lenField(new BinaryWriter(), 1, entry), 2, part("ext-x")), 2, part("ext-a")).finish();
    assert.throws(() => AWSetLattice.decode(split), (e: Error) => e instanceof DecodeError && /AWSetState\.context is a single CausalContext but was sent 2 times/.test(e.message));
    // Once is fine, and a counter entry's dot sent twice is refused the same way.
    const once = lenField(lenField(new BinaryWriter(), 1, entry), 2, part("ext-a")).finish();
    assert.deepEqual([...(AWSetLattice.decode(once) as { elements(): Iterable<string> }).elements()].length, 1);
    const dot = new BinaryWriter().tag(1, WireType.LengthDelimited).string("r1").tag(2, WireType.Varint).uint64(1).finish();
    const twoDots = lenField(lenField(new BinaryWriter(), 1, dot), 1, dot).tag(2, WireType.Varint).uint64(3).finish();
    assert.throws(() => CounterLattice.decode(lenField(new BinaryWriter(), 1, twoDots).finish()), /CounterState\.entries\[0\]\.dot is a single Dot but was sent 2 times/);
  });

  it("refuses a replica id that is not UTF-8, which the decoder would fold into another", () => {
    // 0xff and 0xfe both decode to U+FFFD: two replicas would share one id and their dots collide.
    for (const replica of [Uint8Array.of(0xff), Uint8Array.of(0x61, 0xfe)]) {
      const dot = lenField(new BinaryWriter(), 1, replica).tag(2, WireType.Varint).uint64(1).finish();
      const entry = lenField(new BinaryWriter(), 1, utf8("u1")).tag(2, WireType.LengthDelimited).bytes(dot).finish();
      const ctx = lenField(new BinaryWriter(), 1, vvEntry(replica, 1)).finish();
      assert.throws(() => AWSetLattice.decode(lenField(lenField(new BinaryWriter(), 1, entry), 2, ctx).finish()), /AWSetState\.entries\[0\]\.dots\[0\]\.replica is not valid UTF-8/);
      assert.throws(() => AWSetLattice.decode(lenField(new BinaryWriter(), 2, ctx).finish()), /AWSetState\.context\.vv\[0\]\.replica is not valid UTF-8/);
      const cloud = lenField(new BinaryWriter(), 1, replica).tag(2, WireType.LengthDelimited).bytes(new BinaryWriter().tag(1, WireType.Varint).uint64(3).tag(2, WireType.Varint).uint64(4).finish()).finish();
      const cloudCtx = lenField(new BinaryWriter(), 2, cloud).finish();
      assert.throws(() => CounterLattice.decode(lenField(new BinaryWriter(), 2, cloudCtx).finish()), /CounterState\.context\.cloud\[0\]\.replica is not valid UTF-8/);
    }
    // Any valid UTF-8 is taken, a leading U+FEFF included (it is text, not a byte-order mark).
    const bomId = utf8("\ufeffr1");
    const ctx = lenField(new BinaryWriter(), 1, vvEntry(bomId, 2)).finish();
    const decoded = AWSetLattice.decode(lenField(new BinaryWriter(), 2, ctx).finish());
    assert.ok(AWSetLattice.equals(decoded, AWSetLattice.decode(AWSetLattice.encode(decoded))));
  });
});
