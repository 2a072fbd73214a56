// Add, Remove and Query by element text on a test cluster's nodes, and filter parameters with
// every field at its default but those given: the calls the filter-key tests make.
import { call } from "../../services/client/rpc.ts";
import type { ObjectType } from "../../services/crdt/index.ts";
import { FilterParams } from "../../services/gen/deltaset/v1/types.ts";
import type { TestCluster } from "./test-cluster.ts";

const b = (s: string) => Buffer.from(s);

export const filterParams = (p: Partial<FilterParams>): FilterParams => FilterParams.fromPartial(p);

export function filterCalls(c: TestCluster) {
  return {
    add: (i: number, key: string, elements: string[], type?: ObjectType, p?: FilterParams) =>
      c.replica(i, (r) => call(r, r.add, { key, elements: elements.map(b), texts: [], type, params: p })),
    remove: (i: number, key: string, elements: string[]) => c.replica(i, (r) => call(r, r.remove, { key, elements: elements.map(b), texts: [] })),
    query: (i: number, key: string, elements: string[]) =>
      c.replica(i, (r) => call(r, r.query, { key, elements: elements.map(b), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false })),
  };
}
