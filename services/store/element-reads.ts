// Reads of a stored set that need no lock: membership by point lookups, and members in element
// order from one snapshot (pages for Query, chunks for Scan). Adds that expired by now are not
// seen, before the sweep (expiry.ts) removes them.
import type { Dot } from "../crdt/index.js";
import type { DbSnapshot, StoreDb } from "./db.js";
import type { GroupCommit } from "./group-commit.js";
import { elementRange, elementRecordKey, unescapeBytes } from "./keys.js";
import { decodeDots } from "./records.js";
import { liveDots } from "./expiry.js";
import { memberSize, membersThatFit } from "../common/member-bytes.js";

/** The live dots of a record (records with an expiring dot start with a 0: the others need no decoding to be live). */
function live(v: Uint8Array, now: number): Dot[] {
  return liveDots(decodeDots(v), now);
}

/**
 * The records of elements, in one batched read (queued writes included). mayHold: the set's
 * presence filter (element-presence.ts), when it has a trusted one; an element it rules out has
 * no record and is not read. A writer adds to the filter before its write is queued, so no record
 * a read could see is ruled out.
 */
async function records(commit: GroupCommit, prefix: Buffer, elements: Uint8Array[], mayHold?: (el: Uint8Array) => boolean): Promise<Array<Buffer | undefined>> {
  if (mayHold === undefined) return commit.getMany(elements.map((el) => elementRecordKey(prefix, el)));
  const out: Array<Buffer | undefined> = new Array(elements.length).fill(undefined);
  const read: number[] = [];
  elements.forEach((el, i) => {
    if (mayHold(el)) read.push(i);
  });
  if (read.length === 0) return out;
  const found = await commit.getMany(read.map((i) => elementRecordKey(prefix, elements[i]!)));
  read.forEach((i, j) => (out[i] = found[j]));
  return out;
}

/** Which elements are members: one batched read (queued writes included). */
export async function contains(commit: GroupCommit, prefix: Buffer, elements: Uint8Array[], now: number, mayHold?: (el: Uint8Array) => boolean): Promise<boolean[]> {
  const found = await records(commit, prefix, elements, mayHold);
  return found.map((v) => v !== undefined && (v[0] !== 0 || live(v, now).length > 0));
}

/** The dots of each element (empty for a non-member): one batched read (queued writes included). */
export async function elementDots(commit: GroupCommit, prefix: Buffer, elements: Uint8Array[], now: number, mayHold?: (el: Uint8Array) => boolean): Promise<Dot[][]> {
  const found = await records(commit, prefix, elements, mayHold);
  return found.map((v) => (v === undefined ? [] : live(v, now)));
}

/** The live dots of each element as a snapshot of the database holds them (no queued writes). */
export async function elementDotsAt(db: StoreDb, snapshot: DbSnapshot, prefix: Buffer, elements: Uint8Array[], now: number): Promise<Dot[][]> {
  const found = await db.getMany(elements.map((el) => elementRecordKey(prefix, el)), { snapshot });
  return found.map((v) => (v === undefined ? [] : live(v, now)));
}

/**
 * One page of members (with their dots) after startAfter (exclusive), in element order: at most
 * limit members, and at most maxBytes of them (common/member-bytes.ts; at least one member).
 */
export async function page(
  db: StoreDb,
  prefix: Buffer,
  startAfter: Uint8Array | undefined,
  limit: number,
  now: number,
  maxBytes = Number.MAX_SAFE_INTEGER,
  snapshot?: DbSnapshot,
): Promise<{ members: Buffer[]; dots: Dot[][]; next: Buffer | undefined }> {
  const out: Array<{ element: Buffer; dots: Dot[] }> = [];
  for await (const chunk of members(db, prefix, { startAfter, chunkSize: limit + 1, now, snapshot })) {
    out.push(...chunk);
    if (out.length > limit) break;
  }
  const n = membersThatFit(out.map((e) => e.element), limit, maxBytes);
  const first = out.slice(0, n);
  return { members: first.map((e) => e.element), dots: first.map((e) => e.dots), next: out.length > n ? first[n - 1]!.element : undefined };
}

/**
 * The members of a set in element order, in chunks of at most chunkSize members and maxBytes of
 * them (common/member-bytes.ts; at least one member), from one consistent snapshot (committed
 * writes only). The consumer pulls: nothing is read ahead of demand.
 */
export async function* members(
  db: StoreDb,
  prefix: Buffer,
  opts: { startAfter?: Uint8Array; chunkSize: number; maxBytes?: number; now: number; snapshot?: DbSnapshot },
): AsyncGenerator<Array<{ element: Buffer; dots: Dot[] }>> {
  const maxBytes = opts.maxBytes ?? Number.MAX_SAFE_INTEGER;
  const range = elementRange(prefix);
  const gt = opts.startAfter !== undefined && opts.startAfter.length > 0 ? elementRecordKey(prefix, opts.startAfter) : undefined;
  const bounds = gt !== undefined ? { gt, lt: range.lt } : range;
  const it = db.iterator(opts.snapshot === undefined ? bounds : { ...bounds, snapshot: opts.snapshot });
  try {
    let chunk: Array<{ element: Buffer; dots: Dot[] }> = [];
    let bytes = 0;
    const offset = prefix.length + 1;
    while (true) {
      const entries = await it.nextv(Math.max(1, opts.chunkSize - chunk.length));
      if (entries.length === 0) break;
      for (const [k, v] of entries) {
        const dots = live(v, opts.now);
        if (dots.length === 0) continue;
        const element = unescapeBytes(k, offset).bytes;
        const size = memberSize(element);
        if (chunk.length > 0 && bytes + size > maxBytes) {
          yield chunk;
          chunk = [];
          bytes = 0;
        }
        chunk.push({ element, dots });
        bytes += size;
      }
      if (chunk.length >= opts.chunkSize) {
        yield chunk;
        chunk = [];
        bytes = 0;
      }
    }
    if (chunk.length > 0) yield chunk;
  } finally {
    await it.close();
  }
}
