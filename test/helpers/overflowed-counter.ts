// Write a counter whose totals lie outside int64 straight into a stopped node's LevelDB, as a
// version without range checks could leave it: the data a node must still answer about.
import { ClassicLevel } from "classic-level";
import { CausalContext, CounterLattice, ObjectType, PNCounter, dotKey } from "../../services/crdt/index.ts";
import { headerKey, objectPrefix } from "../../services/store/keys.ts";
import { encodeHeader } from "../../services/store/records.ts";

/** One entry per replica (dot counter 1), with the given totals (any uint64). */
export function rawCounter(totals: Record<string, { positive: bigint; negative: bigint }>): PNCounter {
  const entries = new Map(
    Object.entries(totals).map(([replica, value]) => {
      const dot = { replica, counter: 1 };
      return [dotKey(dot), { dot, value }] as const;
    }),
  );
  return new PNCounter(entries, CausalContext.of([...entries.values()].map((e) => e.dot)));
}

/** Overwrite key's header with the given counter state (the directory must not be open). */
export async function writeRawCounter(dir: string, partition: number, key: string, state: PNCounter): Promise<void> {
  const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: "buffer", valueEncoding: "buffer" });
  await db.open();
  try {
    const header = encodeHeader({ type: ObjectType.COUNTER, ctx: state.ctx, size: 0, body: CounterLattice.encode(state) });
    await db.put(headerKey(objectPrefix(partition, key)), header, { sync: true });
  } finally {
    await db.close();
  }
}
