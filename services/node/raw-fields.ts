// Finds the first field of an encoded protobuf message that the generated decoder would misread,
// by walking the raw bytes with the message's schema (from the .proto files), and names it (e.g.
// "context.vv[0].replica"):
// - a string holding invalid UTF-8: decoders replace such bytes with U+FFFD, so distinct inputs
//   would silently become one key or element;
// - a singular message field sent more than once: protobuf merges the occurrences, the decoder
//   keeps the last, so a Remove's context sent in two parts would remove only the last part's adds.
import { isUtf8 } from "node:buffer";
import type { PackageDefinition } from "@grpc/proto-loader";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

interface FieldSchema {
  name: string;
  repeated: boolean;
  /** Full name of the message type, for message fields. */
  message?: string;
  string: boolean;
  bytes: boolean;
}

/** Message types by full name (package.Name), each a map from field number to field. */
export type MessageSchemas = Map<string, Map<number, FieldSchema>>;

interface DescriptorField {
  name: string;
  number: number;
  label: string;
  type: string;
  typeName: string;
}

/** The message schemas of a proto-loader package definition (its descriptor protos). */
export function messageSchemas(defs: PackageDefinition): MessageSchemas {
  const out: MessageSchemas = new Map();
  for (const [fullName, def] of Object.entries(defs)) {
    const descriptor = (def as { format?: string; type?: { field?: DescriptorField[] } }).type;
    if ((def as { format?: string }).format === undefined || descriptor?.field === undefined) continue;
    const pkg = fullName.slice(0, fullName.lastIndexOf(".") + 1);
    const fields = new Map<number, FieldSchema>();
    for (const f of descriptor.field) {
      fields.set(f.number, {
        name: f.name,
        repeated: f.label === "LABEL_REPEATED",
        string: f.type === "TYPE_STRING",
        bytes: f.type === "TYPE_BYTES",
        // Type names in the descriptor are relative to the package unless fully qualified.
        message: f.type === "TYPE_MESSAGE" ? (f.typeName.startsWith(".") ? f.typeName.slice(1) : f.typeName.includes(".") ? f.typeName : pkg + f.typeName) : undefined,
      });
    }
    out.set(fullName, fields);
  }
  return out;
}

/** Nesting deeper than this is not followed (no deltaset message nests anywhere near it). */
const MAX_DEPTH = 32;

/** A field the decoder would misread: its path, and why. */
export interface MisreadField {
  path: string;
  /** "utf8": a string that is not UTF-8; "repeated": a singular message sent `times` times. */
  problem: "utf8" | "repeated";
  times?: number;
}

/** The refusal's text for a misread field. */
export function describeMisread(f: MisreadField): string {
  return f.problem === "utf8"
    ? `${f.path} is not valid UTF-8; string fields must be UTF-8 (send arbitrary bytes in a bytes field such as elements)`
    : `${f.path} is a single message but was sent ${f.times} times; send it once (its parts would not be merged)`;
}

/**
 * The first field of `bytes` (a `typeName` message) the decoder would misread, or undefined when
 * there is none, or when the bytes are malformed (the decoder reports those itself).
 */
export function misreadField(schemas: MessageSchemas, typeName: string, bytes: Uint8Array): MisreadField | undefined {
  // Every client request passes here: the scan below settles the usual clean message without
  // allocating; only a message it cannot clear is walked again to name the field.
  if (cleanScan(schemas, typeName, bytes, 0, bytes.length, 0)) return undefined;
  return misreadFieldByWalk(schemas, typeName, bytes);
}

/** misreadField without its scan: the field-naming walk alone (what the scan must agree with). */
export function misreadFieldByWalk(schemas: MessageSchemas, typeName: string, bytes: Uint8Array): MisreadField | undefined {
  try {
    return walk(schemas, typeName, bytes, "", 0);
  } catch {
    return undefined;
  }
}

/**
 * True when the message in bytes[from, to) holds no field the decoder would misread, found without
 * building paths or readers. False means "walk it": a misread field, malformed bytes, a group, or
 * nesting past MAX_DEPTH (walk then decides as before).
 */
function cleanScan(schemas: MessageSchemas, typeName: string, bytes: Uint8Array, from: number, to: number, depth: number): boolean {
  const fields = schemas.get(typeName);
  if (fields === undefined) return true;
  if (depth > MAX_DEPTH) return false;
  /** Singular message fields met so far (field numbers), made only for a message that has one. */
  let singles: number[] | undefined;
  let at = from;
  while (at < to) {
    // The tag: a varint of at most 5 bytes (field numbers fit in 29 bits).
    let tag = 0;
    let shift = 0;
    for (;;) {
      if (at >= to || shift > 28) return false;
      const b = bytes[at++]!;
      tag += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
      shift += 7;
    }
    const wireType = tag % 8;
    const no = Math.floor(tag / 8);
    if (wireType === 0) {
      for (;;) {
        if (at >= to) return false;
        if (bytes[at++]! < 0x80) break;
      }
      continue;
    }
    if (wireType === 1 || wireType === 5) {
      at += wireType === 1 ? 8 : 4;
      if (at > to) return false;
      continue;
    }
    if (wireType !== 2) return false;
    let len = 0;
    shift = 0;
    for (;;) {
      if (at >= to || shift > 28) return false;
      const b = bytes[at++]!;
      len += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
      shift += 7;
    }
    const end = at + len;
    if (end > to) return false;
    const f = fields.get(no);
    if (f !== undefined && f.string) {
      // ASCII is UTF-8; anything else goes to the full check.
      let i = at;
      while (i < end && bytes[i]! < 0x80) i++;
      if (i < end && !isUtf8(bytes.subarray(i, end))) return false;
    } else if (f !== undefined && f.message !== undefined) {
      if (!f.repeated) {
        singles ??= [];
        if (singles.includes(no)) return false;
        singles.push(no);
      }
      if (!cleanScan(schemas, f.message, bytes, at, end, depth + 1)) return false;
    }
    at = end;
  }
  return true;
}

function walk(schemas: MessageSchemas, typeName: string, bytes: Uint8Array, prefix: string, depth: number): MisreadField | undefined {
  const fields = schemas.get(typeName);
  if (fields === undefined || depth > MAX_DEPTH) return undefined;
  const reader = new BinaryReader(bytes);
  const seen = new Map<number, number>();
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    const f = fields.get(no);
    if (f === undefined || wireType !== WireType.LengthDelimited || (!f.string && f.message === undefined)) {
      reader.skip(wireType, no);
      continue;
    }
    const index = seen.get(no) ?? 0;
    seen.set(no, index + 1);
    const path = `${prefix}${f.name}${f.repeated ? `[${index}]` : ""}`;
    const value = reader.bytes();
    if (f.string) {
      if (!isUtf8(value)) return { path, problem: "utf8" };
    } else {
      if (!f.repeated && index > 0) return { path, problem: "repeated", times: index + 1 };
      const inner = walk(schemas, f.message!, value, `${path}.`, depth + 1);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

/**
 * Whether `bytes` (a `typeName` message) holds more than `limit` entries of repeated fields, at
 * every depth, counted on the raw bytes and stopping once past the limit. Decoding builds an object
 * per entry (a 16 MiB message of empty elements is some 8 million of them), so a request is counted
 * before it is decoded. A packed scalar field counts its varints. Malformed bytes count as far as
 * they read (the decoder refuses them).
 */
export function repeatedEntriesAbove(schemas: MessageSchemas, typeName: string, bytes: Uint8Array, limit: number): boolean {
  // Each entry counted owns a byte of its own (an unpacked entry its tag's first byte, a packed
  // one its varint's last byte, nested entries bytes inside their parent's value): a message no
  // longer than the limit cannot hold more entries, and most requests are far shorter.
  if (bytes.length <= limit) return false;
  return countRepeatedEntries(schemas, typeName, bytes, limit) > limit;
}

/** The entries repeatedEntriesAbove counts, stopping once past stopAbove (as far as malformed bytes read). */
export function countRepeatedEntries(schemas: MessageSchemas, typeName: string, bytes: Uint8Array, stopAbove: number): number {
  try {
    return countEntries(schemas, typeName, bytes, stopAbove, 0);
  } catch {
    return 0;
  }
}

function countEntries(schemas: MessageSchemas, typeName: string, bytes: Uint8Array, left: number, depth: number): number {
  const fields = schemas.get(typeName);
  if (fields === undefined || depth > MAX_DEPTH) return 0;
  const reader = new BinaryReader(bytes);
  let n = 0;
  while (reader.pos < reader.len && n <= left) {
    const [no, wireType] = reader.tag();
    const f = fields.get(no);
    if (f === undefined || (!f.repeated && f.message === undefined)) {
      reader.skip(wireType, no);
      continue;
    }
    if (wireType !== WireType.LengthDelimited) {
      reader.skip(wireType, no);
      if (f.repeated) n++;
      continue;
    }
    const value = reader.bytes();
    if (f.repeated && f.message === undefined && !f.string && !f.bytes) {
      // Packed scalars: one entry per varint (bytes without the continuation bit).
      for (let i = 0; i < value.length && n <= left; i++) if (value[i]! < 0x80) n++;
      continue;
    }
    if (f.repeated) n++;
    if (f.message !== undefined) n += countEntries(schemas, f.message, value, left - n, depth + 1);
  }
  return n;
}
