// The field check that lets any valid encoding of a state through and stops bytes that are not
// one: every field of the message, at every depth, must be a field its schema knows, with the wire
// type the schema gives it. Protobuf decoders skip fields they do not know, so without this most
// random byte strings would decode as an empty state; with it, an encoder may still write default
// values explicitly, write fields in any order, or repeat a scalar (the last one counts), as
// protobuf allows. Two encodings protobuf allows are refused because the generated decoder would
// change their meaning: a singular message field given twice (protobuf merges the parts; the
// decoder keeps the last, so a context split in two would lose the removes of its first part), and
// a string that is not UTF-8 (the decoder maps each bad byte to U+FFFD, so distinct replica ids
// would become one and their dots collide). The schemas mirror types.proto
// (test/unit/wire-check.test.ts holds them to it).
import { isUtf8 } from "node:buffer";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { DecodeError } from "./errors.js";

/** A field's name and wire shape: a scalar, or a message field (repeated or singular) naming its message. */
export type FieldShape =
  | { readonly name: string; readonly kind: "varint" | "fixed64" | "bytes" | "string" }
  | { readonly name: string; readonly kind: "message"; readonly message: string; readonly repeated: boolean };

const scalar = (name: string, kind: "varint" | "fixed64" | "bytes" | "string"): FieldShape => ({ name, kind });
const many = (name: string, message: string): FieldShape => ({ name, kind: "message", message, repeated: true });
const one = (name: string, message: string): FieldShape => ({ name, kind: "message", message, repeated: false });

export const STATE_SCHEMAS: Readonly<Record<string, Readonly<Record<number, FieldShape>>>> = {
  Dot: { 1: scalar("replica", "string"), 2: scalar("counter", "varint"), 3: scalar("ttlMs", "fixed64") },
  VersionEntry: { 1: scalar("replica", "string"), 2: scalar("counter", "varint") },
  DotRange: { 1: scalar("first", "varint"), 2: scalar("last", "varint") },
  CloudEntry: { 1: scalar("replica", "string"), 2: many("ranges", "DotRange") },
  CausalContext: { 1: many("vv", "VersionEntry"), 2: many("cloud", "CloudEntry") },
  AWSetEntry: { 1: scalar("element", "bytes"), 2: many("dots", "Dot") },
  AWSetState: { 1: many("entries", "AWSetEntry"), 2: one("context", "CausalContext") },
  CounterEntry: { 1: one("dot", "Dot"), 2: scalar("positive", "varint"), 3: scalar("negative", "varint") },
  CounterState: { 1: many("entries", "CounterEntry"), 2: one("context", "CausalContext"), 3: scalar("retryFilter", "bytes") },
};

/** A message STATE_SCHEMAS describes. */
export type StateMessage = "AWSetState" | "CounterState";

const WIRE_OF_KIND: Record<FieldShape["kind"], WireType> = {
  varint: WireType.Varint,
  fixed64: WireType.Bit64,
  bytes: WireType.LengthDelimited,
  string: WireType.LengthDelimited,
  message: WireType.LengthDelimited,
};

const WIRE_NAMES: Record<number, string> = { 0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group start", 4: "group end", 5: "32-bit" };

/** Throws DecodeError naming the first field `message` does not have, has with another wire type, repeats though singular, or holds as a string that is not UTF-8. */
export function checkStateFields(what: string, message: StateMessage, bytes: Uint8Array): void {
  try {
    walk(message, bytes, message);
  } catch (err) {
    // The path starts with the message's name; `what` is said only when it adds to that.
    if (err instanceof DecodeError) throw new DecodeError(what === message ? err.message : `${what}: ${err.message}`);
    throw new DecodeError(`${what}: not a valid protobuf message (${(err as Error).message})`);
  }
}

function walk(message: string, bytes: Uint8Array, path: string): void {
  const fields: Readonly<Record<number, FieldShape | undefined>> = STATE_SCHEMAS[message]!;
  const reader = new BinaryReader(bytes);
  let counts: Map<number, number> | undefined; // occurrences of each message field so far
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    const shape = fields[no];
    if (shape === undefined) throw new DecodeError(`${path} has no field ${no} (a ${WIRE_NAMES[wireType] ?? wireType} field was sent)`);
    const expected = WIRE_OF_KIND[shape.kind];
    if (wireType !== expected) throw new DecodeError(`${path}.${shape.name} (field ${no}) is ${WIRE_NAMES[expected]}, not ${WIRE_NAMES[wireType] ?? wireType}`);
    if (shape.kind === "message") {
      counts ??= new Map();
      const index = counts.get(no) ?? 0;
      counts.set(no, index + 1);
      const at = `${path}.${shape.name}`;
      if (!shape.repeated && index > 0) throw new DecodeError(`${at} is a single ${shape.message} but was sent ${index + 1} times; send it once`);
      walk(shape.message, reader.bytes(), shape.repeated ? `${at}[${index}]` : at);
    } else if (shape.kind === "string") {
      if (!isUtf8(reader.bytes())) throw new DecodeError(`${path}.${shape.name} is not valid UTF-8`);
    } else reader.skip(wireType, no);
  }
}
