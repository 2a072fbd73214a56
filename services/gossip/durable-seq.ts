// What survives a crash of Algorithm 2's sequence numbers, and how a node restarts from it: the
// one policy the gossip exchange (exchange.ts) runs, in a node and in the simulator alike.
//
// The crash invariant: a node that restarts with data must look behind to every neighbour, so
// that it ships each partition's full state before it can look caught up. After a restart the
// delta buffer D and the ack map A are empty (volatile), so A(j) = 0 for every neighbour j, and
// Algorithm 2 ships full state exactly when A(j) < c, i.e. when c > 0. A partition whose c was
// still 0 on disk (the seq is persisted lazily, at the next tick) would look caught up and ship
// nothing: an acknowledged write taken just before the crash would stay on this node forever.
//
// So every partition that holds data restarts one past its persisted value (always >= 1), and
// that new value is made durable before the engine runs. A partition that holds no object record
// has nothing a neighbour could miss: it restarts at 0, so its first delta goes out as a delta.
// (At 1 with an empty buffer, each neighbour would first need a full-state stream of it: a cluster
// started under a write load streamed its partitions while the writes filled them, and until a
// stream ended no delta of its partitions could go to that neighbour.) A node restarted with
// nothing to ship still tells its neighbours it restarted (exchange.ts sends each an empty frame
// carrying its new boot id), so a wiped node gets everything back. The write path pays nothing:
// c is still persisted lazily, before the frames of each tick leave, which keeps it monotone
// across restarts for metrics.
// Lowering c below the last value used before the crash is harmless: acks live only in the
// sender's volatile map, and the receiver keeps no per-sender seq.

/**
 * The seqs a restarting node starts from, one per partition: one past what was persisted where the
 * partition holds data, 0 where it holds none.
 */
export function seqsAfterRestart(persisted: ReadonlyMap<number, number>, partitions: number, holdingData: ReadonlySet<number>): number[] {
  return Array.from({ length: partitions }, (_, p) => (holdingData.has(p) ? (persisted.get(p) ?? 0) + 1 : 0));
}

/** Where a node keeps its seqs: its store (LevelDB in a node, in memory in the simulator). */
export interface SeqSink {
  /** Durably record these partitions' seqs (all of them or none) before resolving. */
  persistSeqs(seqs: ReadonlyMap<number, number>): Promise<void> | void;
}

/**
 * The engine's moved seqs, persisted before the tick's frames leave (the lazy half of the policy:
 * nothing is persisted on the write path).
 */
export function persistMovedSeqs(engine: { takeSeqChanges(): Map<number, number> }, sink: SeqSink): Promise<void> | void {
  const moved = engine.takeSeqChanges();
  if (moved.size > 0) return sink.persistSeqs(moved);
}

/** Restart: load what was persisted, move every partition holding data past it durably, return the engine's initial seqs. */
export async function restartSeqs(persisted: ReadonlyMap<number, number>, partitions: number, holdingData: ReadonlySet<number>, sink: SeqSink): Promise<number[]> {
  const seqs = seqsAfterRestart(persisted, partitions, holdingData);
  await sink.persistSeqs(new Map(seqs.map((c, p) => [p, c])));
  return seqs;
}
