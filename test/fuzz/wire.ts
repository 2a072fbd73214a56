// Protobuf wire-format helpers for the fuzzer: walk the top-level fields of a frame (stopping at the
// first malformed byte, as a fuzzer must read its own mutants too) and write tags, varints and
// length-delimited fields by hand, so mutators can produce encodings no generated encoder would.

export const enum Wire {
  Varint = 0,
  Fixed64 = 1,
  Len = 2,
  StartGroup = 3,
  EndGroup = 4,
  Fixed32 = 5,
}

/** One top-level field: its tag, wire type and byte spans within the frame. */
export interface FieldSpan {
  field: number;
  wire: number;
  /** Offset of the tag. */
  start: number;
  /** Offset of the value (after the length prefix for a length-delimited field). */
  valueStart: number;
  /** Offset just past the field. */
  end: number;
}

/** Read a varint at `at`; undefined when it runs past the end or past 10 bytes. */
export function readVarint(buf: Uint8Array, at: number): { value: bigint; next: number } | undefined {
  let value = 0n;
  for (let i = 0; i < 10; i++) {
    const b = buf[at + i];
    if (b === undefined) return undefined;
    value |= BigInt(b & 0x7f) << BigInt(7 * i);
    if ((b & 0x80) === 0) return { value, next: at + i + 1 };
  }
  return undefined;
}

/** The well-formed top-level fields of a frame, in order; stops at the first malformed field. */
export function fieldSpans(buf: Uint8Array): FieldSpan[] {
  const out: FieldSpan[] = [];
  let at = 0;
  while (at < buf.length) {
    const tag = readVarint(buf, at);
    if (tag === undefined) break;
    const field = Number(tag.value >> 3n);
    const wire = Number(tag.value & 7n);
    let valueStart = tag.next;
    let end: number;
    if (wire === Wire.Varint) {
      const v = readVarint(buf, tag.next);
      if (v === undefined) break;
      end = v.next;
    } else if (wire === Wire.Fixed64) end = tag.next + 8;
    else if (wire === Wire.Fixed32) end = tag.next + 4;
    else if (wire === Wire.Len) {
      const len = readVarint(buf, tag.next);
      if (len === undefined) break;
      valueStart = len.next;
      end = len.next + Number(len.value);
    } else break;
    if (field === 0 || end > buf.length) break;
    out.push({ field, wire, start: at, valueStart, end });
    at = end;
  }
  return out;
}

export function varint(value: bigint | number): Buffer {
  let v = BigInt.asUintN(64, BigInt(value));
  const bytes: number[] = [];
  while (v >= 0x80n) {
    bytes.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  bytes.push(Number(v));
  return Buffer.from(bytes);
}

export function tag(field: number, wire: number): Buffer {
  return varint((BigInt(field) << 3n) | BigInt(wire));
}

export function lenField(field: number, body: Uint8Array): Buffer {
  return Buffer.concat([tag(field, Wire.Len), varint(body.length), body]);
}
