// Consistency check of one stored set: the records that describe it must agree with each other.
// Element records and the dot index are two views of the same live dots, and the header counts
// the live elements, holds a context covering every live dot and, when it has one, their digest.
// A disagreement would make remote removes miss elements (index), report wrong sizes (header), or
// let a catch-up skip a set that differs (digest).
import { type CausalContext, type Dot, elementKey } from "../crdt/index.js";
import { DOT_BUCKET, decodeBucket } from "./dot-index.js";
import { SUFFIX_DOTS, SUFFIX_ELEMENT, readU64, unescapeBytes } from "./keys.js";
import { decodeDots } from "./records.js";
import { type LiveDigest, emptyLiveDigest, encodeLiveDigest, sameLiveDigest, updateLiveDigest } from "./live-digest.js";

export interface VerifyInput {
  /** Header fields. */
  size: number;
  ctx: CausalContext;
  /** The header's live digest, when it has one. */
  live?: LiveDigest;
  /** Every record of the object after its header, in key order: [suffix, key bytes after the suffix, value]. */
  records: AsyncIterable<[number, Buffer, Buffer]>;
}

/** Problems found, in words; empty when the object is consistent. */
export async function verifyObject(input: VerifyInput): Promise<string[]> {
  const problems: string[] = [];
  const live = new Map<string, string>(); // "replica counter" → element key
  const indexed = new Map<string, string>();
  let elements = 0;
  const digest = emptyLiveDigest();
  const dotId = (d: Dot) => `${d.replica} ${d.counter}`;
  for await (const [suffix, rest, value] of input.records) {
    if (suffix === SUFFIX_ELEMENT) {
      elements++;
      const bytes = unescapeBytes(rest, 0).bytes;
      const ek = elementKey(bytes);
      const dots = decodeDots(value);
      if (dots.length === 0) problems.push(`element ${JSON.stringify(ek)} has a record but no dots`);
      // Add, Merge, Import and gossip refuse one: a peer refuses a gossip frame that carries it.
      if (bytes.length === 0) problems.push("an empty element is stored (operations no longer accept one, and peers refuse gossip that carries it): Delete the key");
      for (const d of dots) {
        updateLiveDigest(digest, bytes, d, 1);
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
  if (input.live !== undefined && !sameLiveDigest(input.live, digest)) {
    problems.push(`header's live digest ${encodeLiveDigest(input.live).toString("hex")} differs from the elements' ${encodeLiveDigest(digest).toString("hex")}`);
  }
  for (const [dot, ek] of live) {
    const at = indexed.get(dot);
    if (at !== ek) problems.push(`dot ${dot} of ${JSON.stringify(ek)} is indexed to ${at === undefined ? "nothing" : JSON.stringify(at)}`);
  }
  for (const [dot, ek] of indexed) {
    if (!live.has(dot)) problems.push(`dot ${dot} is indexed to ${JSON.stringify(ek)} but is not live`);
  }
  return problems;
}
