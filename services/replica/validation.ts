// Request validation against the configured limits.
import { type CausalContext, DecodeError, MAX_TTL_MS, contextFromProto } from "../crdt/index.js";
import type { CausalContext as CausalContextMsg } from "../gen/deltaset/v1/types.js";
import type { QueryRequest } from "../gen/deltaset/v1/replica.js";
import type { Limits } from "./limits.js";
import { invalid, tooLarge } from "./errors.js";

/** A request's since context (Export, Watch), or INVALID_ARGUMENT naming what is wrong with it. */
export function sinceFrom(msg: CausalContextMsg | undefined): CausalContext | undefined {
  try {
    return msg === undefined ? undefined : contextFromProto(msg);
  } catch (err) {
    if (err instanceof DecodeError) throw invalid(`since is not a valid context: ${err.message}`);
    throw err;
  }
}

export function checkKey(key: string, limits: Limits): void {
  if (key.length === 0) throw invalid("key is required");
  const bytes = Buffer.byteLength(key, "utf8");
  if (bytes > limits.maxKeyBytes) throw tooLarge(`key has ${bytes} bytes; the limit is ${limits.maxKeyBytes} (--max-key-bytes)`);
}

/** elements and texts of a request, as one list of byte strings, checked against the limits. */
export function collectElements(
  elements: Buffer[],
  texts: string[],
  limits: Limits,
  opts: { required: boolean },
): Buffer[] {
  const all = [...elements, ...texts.map((t) => Buffer.from(t, "utf8"))];
  if (opts.required && all.length === 0) throw invalid("no elements given: set elements (bytes) or texts (UTF-8)");
  if (all.length > limits.maxElementsPerCall) {
    throw tooLarge(`${all.length} elements in one call; the limit is ${limits.maxElementsPerCall} (--max-elements-per-call): split the call`);
  }
  for (const [i, e] of all.entries()) {
    if (e.length === 0) throw invalid(`element ${i} is empty; elements must have at least one byte`);
    if (e.length > limits.maxElementBytes) {
      throw tooLarge(`element ${i} has ${e.length} bytes; the limit is ${limits.maxElementBytes} (--max-element-bytes)`);
    }
  }
  return all;
}

/**
 * A Query of a COUNTER key answers its value alone: a field that asks about members, elements or
 * their dots is INVALID_ARGUMENT naming it, rather than ignored (the client meant another key or
 * type). with_text only says how members would be shown, and is taken by generic readers.
 */
export function checkCounterQuery(req: QueryRequest): void {
  const field =
    req.elements.length > 0 ? "elements" :
    req.texts.length > 0 ? "texts" :
    req.pageSize !== 0 ? "page_size" :
    req.pageToken.length > 0 ? "page_token" :
    req.withDots === true ? "with_dots" : undefined;
  if (field !== undefined) {
    throw invalid(`key "${req.key}" holds a COUNTER, whose Query answers its value alone: leave ${field} unset (it applies to sets and filters)`);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

export function withText(element: Buffer, want: boolean): { element: Buffer; text: string; dots: [] } {
  if (!want) return { element, text: "", dots: [] };
  try {
    return { element, text: utf8.decode(element), dots: [] };
  } catch {
    return { element, text: "", dots: [] };
  }
}

/** A request's ttl_ms in ms: undefined for none (unset or 0); INVALID_ARGUMENT above MAX_TTL_MS. */
export function ttlFrom(ttlMs: bigint | undefined): number | undefined {
  if (ttlMs === undefined || ttlMs === 0n) return undefined;
  if (ttlMs > BigInt(MAX_TTL_MS)) throw invalid(`ttl_ms ${ttlMs} is above the largest, ${MAX_TTL_MS} (100 years)`);
  return Number(ttlMs);
}
