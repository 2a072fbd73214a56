// Mutators of protobuf frames for the fuzzer: each takes a valid (or already mutated) frame and a
// seeded Random and returns new bytes. Kinds: bit flips, truncation, duplicated fields, unknown
// fields, wrong wire types, huge length prefixes, boundary varints, byte insertion/deletion,
// mutation inside a nested message (length prefix fixed up, so the damage reaches inner decoders)
// and plain random bytes. Deterministic for a given Random.
import { type Random, randomInt, pick } from "../../services/common/prng.ts";
import { Wire, fieldSpans, lenField, tag, varint } from "./wire.ts";

export type Mutator = (frame: Buffer, random: Random) => Buffer;

export function randomBytes(random: Random, n: number): Buffer {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = randomInt(random, 256);
  return out;
}

/** Varints a decoder must survive: 0, edges of 31/32/63/64 bits, and the largest 10-byte ones. */
const EDGE_VALUES: bigint[] = [0n, 1n, 127n, 128n, 0x7fffffffn, 0x80000000n, 0xffffffffn, 0x100000000n, (1n << 53n) + 1n, (1n << 63n) - 1n, 1n << 63n, (1n << 64n) - 1n];

/** Length prefixes far beyond any frame: a decoder must refuse them, not allocate them. */
const HUGE_LENGTHS: bigint[] = [0x7fffffffn, 0x80000000n, 0xffffffffn, 1n << 40n, (1n << 63n) - 1n, (1n << 64n) - 1n, 16n * 1024n * 1024n + 1n];

export const bitFlip: Mutator = (frame, random) => {
  if (frame.length === 0) return randomBytes(random, 1);
  const out = Buffer.from(frame);
  const flips = 1 + randomInt(random, 8);
  for (let i = 0; i < flips; i++) {
    const at = randomInt(random, out.length);
    out[at]! ^= 1 << randomInt(random, 8);
  }
  return out;
};

export const truncate: Mutator = (frame, random) => frame.subarray(0, randomInt(random, Math.max(1, frame.length)));

export const duplicateField: Mutator = (frame, random) => {
  const spans = fieldSpans(frame);
  if (spans.length === 0) return bitFlip(frame, random);
  const s = pick(random, spans);
  const copy = frame.subarray(s.start, s.end);
  const times = 1 + randomInt(random, 3);
  const where = pick(random, [0, s.end, frame.length]);
  return Buffer.concat([frame.subarray(0, where), ...Array.from({ length: times }, () => copy), frame.subarray(where)]);
};

export const unknownField: Mutator = (frame, random) => {
  const field = pick(random, [16 + randomInt(random, 100), 1000 + randomInt(random, 100_000), (1 << 29) - 1, 19000 + randomInt(random, 1000)]);
  const wire = pick(random, [Wire.Varint, Wire.Fixed64, Wire.Len, Wire.Fixed32]);
  let body: Buffer;
  if (wire === Wire.Varint) body = varint(pick(random, EDGE_VALUES));
  else if (wire === Wire.Fixed64) body = randomBytes(random, 8);
  else if (wire === Wire.Fixed32) body = randomBytes(random, 4);
  else {
    const inner = randomBytes(random, randomInt(random, 64));
    body = Buffer.concat([varint(inner.length), inner]);
  }
  const extra = Buffer.concat([tag(field, wire), body]);
  const spans = fieldSpans(frame);
  const where = spans.length === 0 ? frame.length : pick(random, [0, frame.length, pick(random, spans).end]);
  return Buffer.concat([frame.subarray(0, where), extra, frame.subarray(where)]);
};

export const wrongWireType: Mutator = (frame, random) => {
  const spans = fieldSpans(frame);
  if (spans.length === 0) return bitFlip(frame, random);
  const s = pick(random, spans);
  const wires = [0, 1, 2, 3, 4, 5, 6, 7].filter((w) => w !== s.wire);
  const t = tag(s.field, pick(random, wires));
  // Keep the old value bytes (with the length prefix if there was one): they now mean something else.
  const tagEnd = s.start + varint((BigInt(s.field) << 3n) | BigInt(s.wire)).length;
  return Buffer.concat([frame.subarray(0, s.start), t, frame.subarray(tagEnd)]);
};

export const hugeLength: Mutator = (frame, random) => {
  const spans = fieldSpans(frame).filter((s) => s.wire === Wire.Len);
  const len = varint(pick(random, HUGE_LENGTHS));
  if (spans.length === 0) {
    const field = 1 + randomInt(random, 16);
    return Buffer.concat([frame, tag(field, Wire.Len), len, randomBytes(random, randomInt(random, 16))]);
  }
  const s = pick(random, spans);
  const tagLen = varint((BigInt(s.field) << 3n) | 2n).length;
  return Buffer.concat([frame.subarray(0, s.start + tagLen), len, frame.subarray(s.valueStart)]);
};

export const edgeVarint: Mutator = (frame, random) => {
  const spans = fieldSpans(frame).filter((s) => s.wire === Wire.Varint);
  const v = varint(pick(random, EDGE_VALUES));
  if (spans.length === 0) return Buffer.concat([frame, tag(1 + randomInt(random, 16), Wire.Varint), v]);
  const s = pick(random, spans);
  const tagLen = s.valueStart - s.start;
  // Sometimes an over-long (non-minimal) or unterminated varint instead of an edge value.
  const value = random() < 0.2 ? Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]) : v;
  return Buffer.concat([frame.subarray(0, s.start + tagLen), value, frame.subarray(s.end)]);
};

export const insertBytes: Mutator = (frame, random) => {
  const at = randomInt(random, frame.length + 1);
  return Buffer.concat([frame.subarray(0, at), randomBytes(random, 1 + randomInt(random, 8)), frame.subarray(at)]);
};

export const deleteBytes: Mutator = (frame, random) => {
  if (frame.length === 0) return frame;
  const at = randomInt(random, frame.length);
  return Buffer.concat([frame.subarray(0, at), frame.subarray(at + 1 + randomInt(random, 8))]);
};

export const randomFrame: Mutator = (_frame, random) => randomBytes(random, pick(random, [0, 1, 2, 5, 16, 64, 256, 1024]) + randomInt(random, 8));

/** Mutate the body of one length-delimited field (recursively, so several levels deep) and fix its length. */
export const nested: Mutator = (frame, random) => {
  const spans = fieldSpans(frame).filter((s) => s.wire === Wire.Len && s.end > s.valueStart);
  if (spans.length === 0) return bitFlip(frame, random);
  const s = pick(random, spans);
  const inner = mutateOnce(frame.subarray(s.valueStart, s.end), random);
  return Buffer.concat([frame.subarray(0, s.start), lenField(s.field, inner), frame.subarray(s.end)]);
};

export const MUTATORS: Record<string, Mutator> = {
  bitFlip,
  truncate,
  duplicateField,
  unknownField,
  wrongWireType,
  hugeLength,
  edgeVarint,
  insertBytes,
  deleteBytes,
  nested,
};
const NAMES = Object.keys(MUTATORS);

function mutateOnce(frame: Buffer, random: Random): Buffer {
  return MUTATORS[pick(random, NAMES)]!(frame, random);
}

/** One to three stacked mutations of a valid frame; the names of the mutators used, for stats. */
export function mutate(frame: Buffer, random: Random): { bytes: Buffer; kind: string } {
  const n = 1 + (random() < 0.3 ? randomInt(random, 3) : 0);
  let out = frame;
  let kind = "";
  for (let i = 0; i < n; i++) {
    const name = pick(random, NAMES);
    out = MUTATORS[name]!(out, random);
    kind = kind === "" ? name : `${kind}+${name}`;
  }
  return { bytes: out, kind: n === 1 ? kind : "stacked" };
}
