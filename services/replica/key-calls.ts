// Keys and Delete of the Replica service. Keys merges the per-partition key listings of the store
// (each in key order) into one ordered page, with a page token bound to the prefix. Delete removes
// every element of a set this node has observed, a page of elements at a time, spreading each
// batch's delta like a Remove; a set stored whole (AWSET_PROB) is cleared in one update.
import { status } from "@grpc/grpc-js";
import { ObjectType } from "../crdt/index.js";
import type { DeleteRequest, DeleteResponse, KeyInfo, KeysRequest, KeysResponse } from "../gen/deltaset/v1/replica.js";
import type { Store } from "../store/store.js";
import { RpcError, invalid, tooLarge } from "./errors.js";
import type { Limits } from "./limits.js";
import { decodePageToken, encodePageToken } from "./page-token.js";
import { checkKey } from "./validation.js";

/** Page tokens of Keys are bound to this namespace and the prefix, never valid for a Query. */
const tokenScope = (prefix: string) => `\u0000keys\u0000${prefix}`;

const utf8Order = (a: string, b: string) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));

export interface KeyCallsDeps {
  store: Store;
  limits: Limits;
  notify: (key: string, type: ObjectType, delta: unknown) => void;
  /** Delete on a key stored whole (whole-type-calls.ts clear): removes its members, or refuses the type. */
  clearWhole: (key: string, type: ObjectType, name: string) => Promise<number>;
}

export function keyCalls(deps: KeyCallsDeps) {
  const { store, limits } = deps;

  async function keys(req: KeysRequest): Promise<KeysResponse> {
    if (Buffer.byteLength(req.prefix, "utf8") > limits.maxKeyBytes) throw tooLarge(`prefix is longer than the key limit of ${limits.maxKeyBytes} bytes`);
    if (req.pageSize > limits.maxPageSize) throw tooLarge(`page_size ${req.pageSize} exceeds the limit ${limits.maxPageSize} (--max-page-size)`);
    const pageSize = req.pageSize === 0 ? limits.defaultPageSize : req.pageSize;
    let after: string | undefined;
    if (req.pageToken.length > 0) {
      const last = decodePageToken(tokenScope(req.prefix), req.pageToken);
      if (last === undefined) throw invalid("page_token is not a token of this listing (cut, altered, or issued for another prefix): pass next_page_token back unchanged");
      after = last.toString("utf8");
    }
    // One cursor per partition, each in key order; repeatedly take the smallest head.
    const cursors = Array.from({ length: store.partitions }, (_, p) => store.keysWithPrefix(p, req.prefix, after));
    const heads = await Promise.all(cursors.map(async (c) => (await c.next()).value as string | undefined));
    const out: KeyInfo[] = [];
    let more = false;
    try {
      while (true) {
        let best = -1;
        for (let i = 0; i < heads.length; i++) if (heads[i] !== undefined && (best < 0 || utf8Order(heads[i]!, heads[best]!) < 0)) best = i;
        if (best < 0) break;
        if (out.length === pageSize) {
          more = true;
          break;
        }
        const key = heads[best]!;
        const info = await store.keyInfo(key);
        if (info !== undefined) {
          out.push({ key, type: info.type, size: BigInt(listedSize(info)), stateDigest: info.stateDigest ?? Buffer.alloc(0) });
        }
        heads[best] = (await cursors[best]!.next()).value as string | undefined;
      }
    } finally {
      await Promise.all(cursors.map((c) => c.return(undefined)));
    }
    return { keys: out, nextPageToken: more && out.length > 0 ? encodePageToken(tokenScope(req.prefix), Buffer.from(out.at(-1)!.key, "utf8")) : Buffer.alloc(0) };
  }

  async function deleteKey(req: DeleteRequest): Promise<Omit<DeleteResponse, "copies">> {
    checkKey(req.key, limits);
    const type = await store.typeOf(req.key);
    if (type === undefined) throw new RpcError(status.NOT_FOUND, `key "${req.key}" does not exist on this node`);
    if (type !== ObjectType.AWSET) return { removed: BigInt(await deps.clearWhole(req.key, type, ObjectType[type] ?? String(type))) };
    let removed = 0;
    // Every page of what is held now, in element order, removed with its observed dots; what
    // arrives meanwhile (a concurrent add) is not observed and survives. The pages move forward:
    // they are read from the database, which may still list elements whose removal by another
    // call is queued (removing them again removes nothing), and must not stop the pass there.
    let after: Buffer | undefined;
    for (;;) {
      const page = await store.page(req.key, after, limits.maxElementsPerCall);
      if (page.members.length === 0) break;
      const r = await store.remove(req.key, page.members);
      if (!r.delta.ctx.isEmpty()) deps.notify(req.key, ObjectType.AWSET, r.delta);
      removed += r.removed;
      if (page.next === undefined) break;
      after = page.next;
    }
    return { removed: BigInt(removed) };
  }

  return { keys, deleteKey };
}

/** The size Keys and Import answer for a key: a set's live elements (AWSET, AWSET_PROB), 0 for the other types. */
export function listedSize(info: { type: ObjectType; size: number } | undefined): number {
  return info !== undefined && (info.type === ObjectType.AWSET || info.type === ObjectType.AWSET_PROB) ? info.size : 0;
}
