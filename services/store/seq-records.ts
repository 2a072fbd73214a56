// Algorithm 2's durable sequence numbers, one record per partition (gossip/durable-seq.ts says
// when they are written and how a restart uses them).
import type { StoreDb } from "./db.js";
import type { GroupCommit } from "./group-commit.js";
import { seqKey, seqKeyRange } from "./keys.js";

export async function loadSeqs(db: StoreDb): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for await (const [k, v] of db.iterator(seqKeyRange())) out.set(k.readUInt32BE(2), Number(v.readBigUInt64BE(0)));
  return out;
}

/** Durably record the sequence numbers of these partitions, in one atomic batch. */
export async function persistSeqs(commit: GroupCommit, seqs: ReadonlyMap<number, number>): Promise<void> {
  const ops = [...seqs].map(([partition, value]) => {
    const v = Buffer.alloc(8);
    v.writeBigUInt64BE(BigInt(value));
    return { type: "put" as const, key: seqKey(partition), value: v };
  });
  if (ops.length > 0) await commit.write(ops);
}
