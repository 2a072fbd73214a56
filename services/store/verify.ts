// Consistency check of one stored set: the records that describe it must agree with each other.
// Element records and the dot index are two views of the same live dots, and the header counts
// the live elements and holds a context covering every live dot. A disagreement would make
// remote removes miss elements (index) or report wrong sizes (header).
import { type CausalContext, type Dot, elementKey } from "../crdt/index.js";
import { DOT_BUCKET, decodeBucket } from "./dot-index.js";
import { SUFFIX_DOTS, SUFFIX_ELEMENT, readU64, unescapeBytes } from "./keys.js";
import { decodeDots } from "./records.js";

export interface VerifyInput {
  /** Header fields. */
  size: number;
  ctx: CausalContext;
  /** Every record of the object after its header, in key order: [suffix, key bytes after the suffix, value]. */
  records: AsyncIterable<[number, Buffer, Buffer]>;
}

/** Problems found, in words; empty when the object is consistent. */
export async function verifyObject(input: VerifyInput): Promise<string[]> {
  const problems: string[] = [];
  const live = new Map<string, string>(); // "replica counter" → element key
  const indexed = new Map<string, string>();
  let elements = 0;
  const dotId = (d: Dot) => `${d.replica} ${d.counter}`;
  for await (const [suffix, rest, value] of input.records) {
    if (suffix === SUFFIX_ELEMENT) {
      elements++;
      const ek = elementKey(unescapeBytes(rest, 0).bytes);
      const dots = decodeDots(value);
      if (dots.length === 0) problems.push(`element ${JSON.stringify(ek)} has a record but no dots`);
      for (const d of dots) {
        if (!input.ctx.containsDot(d)) problems.push(`dot ${dotId(d)} of ${JSON.stringify(ek)} is outside the context`);
        if (live.has(dotId(d))) problems.push(`dot ${dotId(d)} is held by two elements`);
        live.set(dotId(d), ek);
      }
    } else if (suffix === SUFFIX_DOTS) {
      const { bytes: replica, next } = unescapeBytes(rest, 0);
      const bucket = readU64(rest, next);
      const entries = decodeBucket(value);
      if (entries.size === 0) problems.push(`empty dot-index bucket ${bucket} of ${replica.toString("utf8")} left behind`);
      for (const [offset, el] of entries) {
        indexed.set(`${replica.toString("utf8")} ${bucket * DOT_BUCKET + offset}`, elementKey(el));
      }
    } else {
      problems.push(`unknown record suffix ${suffix}`);
    }
  }
  if (elements !== input.size) problems.push(`header counts ${input.size} elements, ${elements} are stored`);
  for (const [dot, ek] of live) {
    const at = indexed.get(dot);
    if (at !== ek) problems.push(`dot ${dot} of ${JSON.stringify(ek)} is indexed to ${at === undefined ? "nothing" : JSON.stringify(at)}`);
  }
  for (const [dot, ek] of indexed) {
    if (!live.has(dot)) problems.push(`dot ${dot} is indexed to ${JSON.stringify(ek)} but is not live`);
  }
  return problems;
}
