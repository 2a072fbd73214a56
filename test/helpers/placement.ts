// Where keys live on a cluster with placement: what each node holds in its own store (Keys is
// never forwarded) against the owners the nodes name (Owners), for tests and benchmarks.
import { call } from "../../services/client/rpc.ts";
import { eventually } from "./eventually.ts";
import type { TestCluster } from "./test-cluster.ts";
import { partitionOf } from "../../services/gossip/partition.ts";

/** The first key `${tag}${i}` whose partition (of `partitions`) the predicate accepts. */
export function keyWhere(ok: (p: number) => boolean, tag: string, partitions: number): string {
  for (let i = 0; ; i++) if (ok(partitionOf(`${tag}${i}`, partitions))) return `${tag}${i}`;
}

/** The keys node i holds in its own store (Keys is served locally, never forwarded). */
export async function localKeys(c: TestCluster, i: number): Promise<Set<string>> {
  return c.replica(i, async (r) => {
    const out = new Set<string>();
    let token: Buffer = Buffer.alloc(0);
    do {
      const res = await call(r, r.keys, { prefix: "", pageSize: 1000, pageToken: token }, { timeoutMs: 5000 });
      for (const k of res.keys) out.add(k.key);
      token = res.nextPageToken;
    } while (token.length > 0);
    return out;
  });
}

/** The owners of key as node i places it. */
export async function ownersAt(c: TestCluster, i: number, key: string): Promise<string[]> {
  return c.replica(i, async (r) => (await call(r, r.owners, { key }, { timeoutMs: 5000 })).owners.map((o) => o.nodeId).sort());
}

/**
 * Per key: the nodes (ids) holding it and its owners, once every node of `alive` agrees on the
 * owners; undefined while they disagree.
 */
export async function layout(c: TestCluster, alive: number[], keys: string[]): Promise<Map<string, { holders: string[]; owners: string[] }> | undefined> {
  const held = await Promise.all(alive.map((i) => localKeys(c, i)));
  const out = new Map<string, { holders: string[]; owners: string[] }>();
  for (const key of keys) {
    const views = await Promise.all(alive.map((i) => ownersAt(c, i, key)));
    if (views.some((v) => v.join() !== views[0]!.join())) return undefined;
    const holders = alive.filter((_, j) => held[j]!.has(key)).map((i) => `${c.name}${i}`).sort();
    out.set(key, { holders, owners: views[0]! });
  }
  return out;
}

/** Wait until every key is held by exactly its owners (R of them), as all of `alive` agree. */
export async function placedOnOwners(c: TestCluster, alive: number[], keys: string[], r: number, timeoutMs = 30_000) {
  return eventually(
    `every key on exactly its ${r} owners (nodes ${alive.join(",")})`,
    async () => {
      const l = await layout(c, alive, keys);
      if (l === undefined) return { agreed: false, wrong: [] as unknown[] };
      const wrong = [...l].filter(([, v]) => v.owners.length !== r || v.holders.join() !== v.owners.join()).slice(0, 5);
      return { agreed: true, wrong, layout: l };
    },
    (s) => s.agreed && s.wrong.length === 0,
    timeoutMs,
    () => c.dumpLogs(),
  );
}

