// The three stores the state-log property tests run the same operations on: one keeping a large
// state as a base and a log with its decoded state in memory (logged), one rewriting the one
// record every time (plain, the reference), and one logging without the cache, so that every
// read replays the log (replayed). Every key is logged from its first write.
import { strict as assert } from "node:assert";
import { Store } from "../../services/store/store.ts";

const open = (o: { dir?: string; stateCacheBytes: number; stateLogFromBytes: number }) =>
  Store.open({ dir: "memory", partitions: 2, partitionOf: () => 0, sync: "buffered", nodeId: "local", replicaId: "local~1", ...o });

const loggedAt = (dir: string) => open({ dir, stateCacheBytes: 32 * 1024 * 1024, stateLogFromBytes: 1 });

export async function stateLogStores(dir: string): Promise<{ logged: Store; plain: Store; replayed: Store }> {
  return {
    logged: await loggedAt(dir),
    plain: await open({ stateCacheBytes: 0, stateLogFromBytes: Number.POSITIVE_INFINITY }),
    replayed: await open({ stateCacheBytes: 0, stateLogFromBytes: 1 }),
  };
}

/** Close logged, open its directory again, and check the key reads the same state. */
export async function assertReopenedSame<S>(logged: Store, dir: string, key: string, same: (a: S, b: S) => boolean): Promise<void> {
  const read = async (s: Store) => (await s.wholeState(key))?.state as S | undefined;
  const before = await read(logged);
  await logged.close();
  const reopened = await loggedAt(dir);
  try {
    const again = await read(reopened);
    assert.ok(before === undefined ? again === undefined : again !== undefined && same(again, before), "reopened reads the same");
  } finally {
    await reopened.close();
  }
}

/** fast-check options: `runs` runs, or the failure FC_SEED and FC_PATH name, replayed. */
export function replayable(runs: number): { numRuns: number; seed?: number; path?: string; endOnFailure?: boolean } {
  return { numRuns: runs, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH, endOnFailure: true } : {}) };
}

/**
 * The end of a run: every store's records verify, the plain store never logged, the logged ones'
 * appends and compactions are added to counts, and the logged store reopens to the same state.
 */
export async function finishStateLogRun<S>(
  stores: { logged: Store; plain: Store; replayed: Store },
  dir: string,
  key: string,
  same: (a: S, b: S) => boolean,
  counts: { appends: number; compactions: number },
): Promise<void> {
  for (const s of Object.values(stores)) assert.deepEqual(await s.verify(key), []);
  assert.deepEqual(stores.plain.stats().stateLog, { appends: 0, compactions: 0 });
  for (const s of [stores.logged, stores.replayed]) {
    counts.appends += s.stats().stateLog.appends;
    counts.compactions += s.stats().stateLog.compactions;
  }
  await assertReopenedSame(stores.logged, dir, key, same);
}

export async function closeStateLogStores(stores: { logged: Store; plain: Store; replayed: Store }): Promise<void> {
  for (const s of Object.values(stores)) await s.close();
}
