// Codecs between kernel values and the proto messages of types.proto.
// Decoding validates everything and throws DecodeError; it never trusts its input.
import { type StateMessage, checkStateFields } from "./wire-check.js";
import { CausalContext } from "./causal-context.js";
import { type Dot, compareDots } from "./dot.js";
import { DecodeError } from "./errors.js";
import { lengthDelimitedSize, varintSize, writeVarint } from "../common/varint.js";
import {
  AWSetState,
  CausalContext as CausalContextMsg,
  type Dot as DotMsg,
} from "../gen/deltaset/v1/types.js";

/** Replica ids longer than this are refused (they are node ids, short by design). */
export const MAX_REPLICA_ID_LENGTH = 256;

/** A dot on the wire; a dot that expires needs the time (nowMs) to write its remaining TTL. */
export function dotToProto(d: Dot, nowMs?: number): DotMsg {
  return { replica: d.replica, counter: BigInt(d.counter), ttlMs: BigInt(remainingTtl(d, nowMs)) };
}

/** The ms a dot has left at nowMs (at least 1), or 0 when it does not expire. */
export function remainingTtl(d: Dot, nowMs: number | undefined): number {
  if (d.expiresAt === undefined) return 0;
  if (nowMs === undefined) throw new TtlClockError();
  return Math.max(1, d.expiresAt - nowMs);
}

/** Encoding or decoding a state whose elements expire was asked without the time. */
export class TtlClockError extends Error {
  override readonly name = "TtlClockError";
  constructor() {
    super("a set whose elements expire is encoded and decoded with the local time (nowMs)");
  }
}

export function counterFromProto(v: bigint, what: string): number {
  if (v < 1n || v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new DecodeError(`${what}: counter ${v} is outside 1..${Number.MAX_SAFE_INTEGER}`);
  }
  return Number(v);
}

export function replicaFromProto(r: string, what: string): string {
  if (r.length === 0) throw new DecodeError(`${what}: empty replica id`);
  if (r.length > MAX_REPLICA_ID_LENGTH) {
    throw new DecodeError(`${what}: replica id longer than ${MAX_REPLICA_ID_LENGTH} characters`);
  }
  return r;
}

export function dotFromProto(d: DotMsg | undefined, what: string, nowMs?: number): Dot {
  if (d === undefined) throw new DecodeError(`${what}: missing dot`);
  const dot = { replica: replicaFromProto(d.replica, what), counter: counterFromProto(d.counter, what) };
  if (d.ttlMs === 0n) return dot;
  if (d.ttlMs > BigInt(MAX_TTL_MS)) throw new DecodeError(`${what}: ttl ${d.ttlMs} ms is above ${MAX_TTL_MS}`);
  if (nowMs === undefined) throw new TtlClockError();
  return { ...dot, expiresAt: nowMs + Number(d.ttlMs) };
}

/** The longest time to live a dot may carry: 100 years, far below where ms lose precision. */
export const MAX_TTL_MS = 100 * 365 * 24 * 3600 * 1000;

export function contextToProto(c: CausalContext): CausalContextMsg {
  const msg: CausalContextMsg = { vv: [], cloud: [] };
  for (const r of c.replicas()) {
    let ranges = c.rangesOf(r);
    if (ranges[0]![0] === 1) {
      msg.vv.push({ replica: r, counter: BigInt(ranges[0]![1]) });
      ranges = ranges.slice(1);
    }
    if (ranges.length > 0) {
      msg.cloud.push({
        replica: r,
        ranges: ranges.map(([first, last]) => ({ first: BigInt(first), last: BigInt(last) })),
      });
    }
  }
  return msg;
}

/**
 * How contextToProto lays out one replica of a context: its ranges, its id's UTF-8 length, the
 * first range in its cloud entry (1 when the first range is its version-vector prefix), and the
 * body sizes of its version-vector and cloud entries (-1: no such entry).
 */
interface ReplicaLayout {
  replica: string;
  ranges: Array<[number, number]>;
  idBytes: number;
  cloudFrom: number;
  vv: number;
  cloud: number;
}

function replicaLayouts(c: CausalContext): ReplicaLayout[] {
  return c.replicas().map((replica) => {
    const ranges = c.rangesOf(replica);
    const idBytes = Buffer.byteLength(replica, "utf8");
    const idField = idBytes === 0 ? 0 : lengthDelimitedSize(idBytes);
    const cloudFrom = ranges[0]![0] === 1 ? 1 : 0;
    const vv = cloudFrom === 1 ? idField + uint64FieldSize(ranges[0]![1]) : -1;
    let cloud = cloudFrom < ranges.length ? idField : -1;
    for (let i = cloudFrom; i < ranges.length; i++) cloud += lengthDelimitedSize(rangeSize(ranges[i]!));
    return { replica, ranges, idBytes, cloudFrom, vv, cloud };
  });
}

const rangeSize = ([first, last]: [number, number]) => uint64FieldSize(first) + uint64FieldSize(last);
const entrySize = (body: number) => (body < 0 ? 0 : lengthDelimitedSize(body));

function layoutSize(layouts: readonly ReplicaLayout[]): number {
  let size = 0;
  for (const l of layouts) size += entrySize(l.vv) + entrySize(l.cloud);
  return size;
}

/**
 * Bytes of the encoded CausalContext message, counted from the context as contextToProto lays it
 * out, without encoding it (every local delta's size is taken when it is buffered for gossip).
 */
export function contextEncodedSize(c: CausalContext): number {
  return layoutSize(replicaLayouts(c));
}

/**
 * The encoded CausalContext message, written directly: the same bytes as encoding contextToProto(c)
 * with the generated codec (every version-vector entry, then every cloud entry, replicas sorted),
 * without the intermediate message (every stored set's header holds one, rewritten on each change).
 */
export function encodeContext(c: CausalContext): Buffer {
  const layouts = replicaLayouts(c);
  const out = Buffer.allocUnsafe(layoutSize(layouts));
  let at = 0;
  const field = (tag: number, n: number) => {
    out[at++] = tag;
    at = writeVarint(out, at, n);
  };
  const idField = (l: ReplicaLayout) => {
    if (l.idBytes === 0) return;
    field(0x0a, l.idBytes);
    at += out.write(l.replica, at, "utf8");
  };
  const uint64Field = (tag: number, n: number) => {
    if (n !== 0) field(tag, n);
  };
  for (const l of layouts) {
    if (l.vv < 0) continue;
    field(0x0a, l.vv);
    idField(l);
    uint64Field(0x10, l.ranges[0]![1]);
  }
  for (const l of layouts) {
    if (l.cloud < 0) continue;
    field(0x12, l.cloud);
    idField(l);
    for (let i = l.cloudFrom; i < l.ranges.length; i++) {
      field(0x12, rangeSize(l.ranges[i]!));
      uint64Field(0x08, l.ranges[i]![0]);
      uint64Field(0x10, l.ranges[i]![1]);
    }
  }
  return out;
}

/** A uint64 field of a small field number (one-byte tag); 0 is not written. */
function uint64FieldSize(n: number): number {
  return n === 0 ? 0 : 1 + varintSize(n);
}

/** Decode a context, requiring the canonical form the encoder writes. */
export function contextFromProto(msg: CausalContextMsg | undefined): CausalContext {
  const c = new CausalContext();
  if (msg === undefined) return c;
  let prev = "";
  const prefix = new Map<string, number>();
  for (const [i, e] of msg.vv.entries()) {
    const r = replicaFromProto(e.replica, `context vv[${i}]`);
    if (i > 0 && r <= prev) throw new DecodeError(`context vv: replica ids not sorted and unique at ${i}`);
    prev = r;
    const n = counterFromProto(e.counter, `context vv[${i}]`);
    prefix.set(r, n);
    c.addRange(r, 1, n);
  }
  prev = "";
  for (const [i, e] of msg.cloud.entries()) {
    const r = replicaFromProto(e.replica, `context cloud[${i}]`);
    if (i > 0 && r <= prev) throw new DecodeError(`context cloud: replica ids not sorted and unique at ${i}`);
    prev = r;
    if (e.ranges.length === 0) throw new DecodeError(`context cloud[${i}]: no ranges`);
    // Each range starts above the previous range (or the prefix) + 1: disjoint, non-adjacent.
    let floor = (prefix.get(r) ?? -1) + 1;
    for (const [j, range] of e.ranges.entries()) {
      const first = counterFromProto(range.first, `context cloud[${i}].ranges[${j}]`);
      const last = counterFromProto(range.last, `context cloud[${i}].ranges[${j}]`);
      if (last < first) throw new DecodeError(`context cloud[${i}].ranges[${j}]: last < first`);
      if (first <= floor) {
        throw new DecodeError(`context cloud[${i}].ranges[${j}]: overlaps or touches the range before it`);
      }
      c.addRange(r, first, last);
      floor = last + 1;
    }
  }
  return c;
}

// ---------------------------------------------------------------- bytes helpers

/** Compare two byte strings in unsigned lexicographic order. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(
    Buffer.from(a.buffer, a.byteOffset, a.byteLength),
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

/** Run a proto decoder, turning any failure into DecodeError. */
export function decodeMessage<T>(what: string, decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    throw new DecodeError(`${what}: not a valid protobuf message (${(err as Error).message})`);
  }
}

/**
 * Decode a state message after checking that every field in it is one its schema has, with the
 * schema's wire type (wire-check.ts): any valid encoding is taken (defaults written explicitly,
 * fields in any order) but the two the decoder would misread (a string not UTF-8, a single message
 * sent twice), while bytes that are not one are refused rather than decoded as a
 * mostly empty state, which is what a protobuf decoder skipping unknown fields would make of them.
 */
export function decodeState<T>(what: string, message: StateMessage, bytes: Uint8Array, codec: { decode(b: Uint8Array): T }): T {
  checkStateFields(what, message, bytes);
  return decodeMessage(what, () => codec.decode(bytes));
}

/** Validate a list of dots: sorted, unique, and each covered by the context. */
export function validateDots(dots: Dot[], ctx: CausalContext, what: string): void {
  for (let i = 0; i < dots.length; i++) {
    if (i > 0 && compareDots(dots[i - 1]!, dots[i]!) >= 0) {
      throw new DecodeError(`${what}: dots not sorted and unique`);
    }
    if (!ctx.containsDot(dots[i]!)) {
      throw new DecodeError(`${what}: dot (${dots[i]!.replica},${dots[i]!.counter}) is not covered by the context`);
    }
  }
}

export { AWSetState };
