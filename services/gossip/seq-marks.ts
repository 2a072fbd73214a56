// When a partition's sequence numbers were handed out, so the age of the oldest change some
// neighbour has not acknowledged can be told (the shrink gate: "everything older than a few
// seconds is on every owner" holds under steady writes, where "nothing unacknowledged" never does).
//
// One mark per resolution step, kept only back to the slowest neighbour's ack, and at most
// maxMarks (the oldest intervals are merged first). Every approximation reads an age too high,
// never too low: a seq is dated by the mark at or before it, and a seq older than every mark (one
// handed out before this process started, restored from disk, or while the partition had no
// neighbour) has no known age: Infinity.

export const DEFAULT_MARK_RESOLUTION_MS = 50;
export const DEFAULT_MAX_MARKS = 256;

export class SeqMarks {
  private readonly seqs: number[] = [];
  private readonly times: number[] = [];

  constructor(
    private readonly resolutionMs = DEFAULT_MARK_RESOLUTION_MS,
    private readonly maxMarks = DEFAULT_MAX_MARKS,
  ) {
    if (!(resolutionMs >= 0)) throw new RangeError(`mark resolution must be non-negative, got ${resolutionMs}`);
    if (!Number.isInteger(maxMarks) || maxMarks < 2) throw new RangeError(`maxMarks must be an integer of at least 2, got ${maxMarks}`);
  }

  get size(): number {
    return this.seqs.length;
  }

  /** seq was handed out at now (seqs only grow). */
  note(seq: number, now: number): void {
    const last = this.times.length - 1;
    if (last >= 0 && now - this.times[last]! < this.resolutionMs) return;
    this.seqs.push(seq);
    this.times.push(now);
    // Merging the two oldest intervals dates the second one earlier: too old, never too young.
    if (this.seqs.length > this.maxMarks) {
      this.seqs.splice(1, 1);
      this.times.splice(1, 1);
    }
  }

  /** Every neighbour holds the seqs below minAck: keep only the mark dating minAck itself. */
  prune(minAck: number): void {
    let drop = 0;
    while (drop + 1 < this.seqs.length && this.seqs[drop + 1]! <= minAck) drop++;
    if (drop > 0) {
      this.seqs.splice(0, drop);
      this.times.splice(0, drop);
    }
  }

  /** How long ago seq was handed out, at most (ms); Infinity when it is older than every mark. */
  ageOf(seq: number, now: number): number {
    let lo = 0;
    let hi = this.seqs.length - 1;
    let at = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.seqs[mid]! <= seq) {
        at = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return at < 0 ? Infinity : Math.max(0, now - this.times[at]!);
  }
}
