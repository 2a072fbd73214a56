// The field check of state decoding (crdt/wire-check.ts): its schemas are types.proto's, any
// valid encoding of a state decodes (explicit defaults, fields out of order, a repeated scalar),
// and a field the schema does not have, or has with another wire type, is refused by name.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import * as protoLoader from "@grpc/proto-loader";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { AWSetLattice, CounterLattice, DecodeError, PNCounter } from "../../services/crdt/index.ts";
import { STATE_SCHEMAS } from "../../services/crdt/wire-check.ts";
import { PROTO_DIR } from "../../services/node/server.ts";

const WIRE_OF: Record<string, WireType> = { TYPE_UINT64: WireType.Varint, TYPE_FIXED64: WireType.Bit64, TYPE_STRING: WireType.LengthDelimited, TYPE_BYTES: WireType.LengthDelimited };

describe("state field check", () => {
  it("has exactly the fields of types.proto's state messages, with their wire types", () => {
    const defs = protoLoader.loadSync(["deltaset/v1/types.proto"], { includeDirs: [PROTO_DIR] });
    for (const [name, fields] of Object.entries(STATE_SCHEMAS)) {
      const desc = (defs[`deltaset.v1.${name}`] as unknown as { type: { field: Array<{ number: number; type: string; typeName: string }> } }).type;
      const fromProto = Object.fromEntries(desc.field.map((f) => [f.number, f.type === "TYPE_MESSAGE" ? f.typeName.split(".").at(-1)! : WIRE_OF[f.type]]));
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
    assert.throws(() => AWSetLattice.decode(unknown), (e: Error) => e instanceof DecodeError && /AWSetState: AWSetState has no field 9 \(a varint field was sent\)/.test(e.message));
    const entry = new BinaryWriter().tag(1, WireType.Varint).uint64(7).finish(); // element as a varint
    const wrongWire = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(entry).finish();
    assert.throws(() => AWSetLattice.decode(wrongWire), /AWSetState: AWSetState\.1 field 1 is length-delimited, not varint/);
    assert.throws(() => CounterLattice.decode(Uint8Array.from([0x0a, 0x05, 0x01])), (e: Error) => e instanceof DecodeError && /CounterState/.test(e.message));
  });
});
