// The field check that lets any valid encoding of a state through and stops bytes that are not
// one: every field of the message, at every depth, must be a field its schema knows, with the wire
// type the schema gives it. Protobuf decoders skip fields they do not know, so without this most
// random byte strings would decode as an empty state; with it, an encoder may still write default
// values explicitly, write fields in any order, or repeat a scalar (the last one counts), as
// protobuf allows. The schemas mirror types.proto (test/unit/wire-check.test.ts holds them to it).
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { DecodeError } from "./errors.js";

/** A field's wire shape: a scalar's wire type, or the name of the message it holds. */
type FieldShape = WireType.Varint | WireType.Bit64 | WireType.LengthDelimited | string;

export const STATE_SCHEMAS: Readonly<Record<string, Readonly<Record<number, FieldShape>>>> = {
  Dot: { 1: WireType.LengthDelimited, 2: WireType.Varint, 3: WireType.Bit64 },
  VersionEntry: { 1: WireType.LengthDelimited, 2: WireType.Varint },
  DotRange: { 1: WireType.Varint, 2: WireType.Varint },
  CloudEntry: { 1: WireType.LengthDelimited, 2: "DotRange" },
  CausalContext: { 1: "VersionEntry", 2: "CloudEntry" },
  AWSetEntry: { 1: WireType.LengthDelimited, 2: "Dot" },
  AWSetState: { 1: "AWSetEntry", 2: "CausalContext" },
  CounterEntry: { 1: "Dot", 2: WireType.Varint, 3: WireType.Varint },
  CounterState: { 1: "CounterEntry", 2: "CausalContext", 3: WireType.LengthDelimited },
};

/** A message STATE_SCHEMAS describes. */
export type StateMessage = "AWSetState" | "CounterState";

const WIRE_NAMES: Record<number, string> = { 0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group start", 4: "group end", 5: "32-bit" };

/** Throws DecodeError naming the first field `message` does not have, or has with another wire type. */
export function checkStateFields(what: string, message: StateMessage, bytes: Uint8Array): void {
  try {
    walk(message, bytes, message);
  } catch (err) {
    if (err instanceof DecodeError) throw new DecodeError(`${what}: ${err.message}`);
    throw new DecodeError(`${what}: not a valid protobuf message (${(err as Error).message})`);
  }
}

function walk(message: string, bytes: Uint8Array, path: string): void {
  const fields: Readonly<Record<number, FieldShape | undefined>> = STATE_SCHEMAS[message]!;
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    const shape = fields[no];
    if (shape === undefined) throw new DecodeError(`${path} has no field ${no} (a ${WIRE_NAMES[wireType] ?? wireType} field was sent)`);
    const expected = typeof shape === "string" ? WireType.LengthDelimited : shape;
    if (wireType !== expected) throw new DecodeError(`${path} field ${no} is ${WIRE_NAMES[expected]}, not ${WIRE_NAMES[wireType] ?? wireType}`);
    if (typeof shape === "string") walk(shape, reader.bytes(), `${path}.${no}`);
    else reader.skip(wireType, no);
  }
}
