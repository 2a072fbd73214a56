// A full-state push asks its neighbour what it holds of each partition (Gossip/Contexts) just
// before streaming that partition. Asked one partition after another, a push of n partitions
// waits n round trips before its last one goes out: over a link with 50 ms of latency each way, a
// 30-partition push spent 3 s asking. Here the questions for the next partitions are already on
// their way (up to `ahead` at once) while the stream sends the current one. A later page of one
// partition's answer (startAfter) is asked when it is needed, as before.

/** Default of the questions out at once ahead of a stream (--gossip-contexts-ahead). */
export const CONTEXTS_AHEAD = 32;

/** Asks what the neighbour holds of one partition (from startAfter, when given). */
export type HoldingsOf<H> = (partition: number, startAfter?: string) => Promise<H>;

/**
 * holdingsOf for a push of these partitions, in this order: the first page of each is asked up to
 * `ahead` partitions before the stream reaches it. A partition the stream never reaches (it ended
 * at its byte budget) may have been asked: the neighbour ends that claim when the stream ends
 * (PartitionClaims.streamEnded). Answers nobody takes are still observed, so a failed one is
 * never an unhandled rejection.
 */
export function prefetchedHoldings<H>(partitions: readonly number[], ask: HoldingsOf<H>, ahead: number): HoldingsOf<H> {
  const asked = new Map<number, Promise<H>>();
  let next = 0;
  const askUpTo = (index: number) => {
    for (; next < partitions.length && next <= index; next++) {
      const p = partitions[next]!;
      const answer = ask(p);
      answer.catch(() => {});
      asked.set(p, answer);
    }
  };
  return (partition, startAfter) => {
    if (startAfter !== undefined) return ask(partition, startAfter);
    const at = partitions.indexOf(partition);
    if (at < 0) return ask(partition);
    askUpTo(at + Math.max(0, ahead - 1));
    const answer = asked.get(partition) ?? ask(partition);
    asked.delete(partition);
    return answer;
  };
}
