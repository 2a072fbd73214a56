// A state stored whole (a filter, a counter, an awset-prob set) travels as one chunk, but it can be
// larger than a message: a filter may be as large as --max-filter-bytes, a key may hold several
// (siblings), and an awset-prob set grows with its elements. Such a chunk is cut into pieces of at
// most a given number of payload bytes, each sent as a chunk of its own marked `continued` but the
// last; the receiver gathers a key's pieces back into the one chunk before it checks and applies
// it. Used by full-state gossip (PushState) and by Export and Import.

/** Cut payload into pieces of at most maxBytes each (one piece when it fits, or is empty). */
export function cutIntoPieces(payload: Buffer, maxBytes: number): Buffer[] {
  if (payload.length <= maxBytes) return [payload];
  const out: Buffer[] = [];
  for (let at = 0; at < payload.length; at += maxBytes) out.push(payload.subarray(at, at + maxBytes));
  return out;
}

/** Pieces that do not form a chunk: nothing of that key was applied. */
export class PieceError extends Error {
  override readonly name = "PieceError";
}

/** What the gatherer reads of a chunk, and how it makes the whole chunk of its pieces. */
export interface PieceShape<C> {
  key(c: C): string;
  continued(c: C): boolean;
  payload(c: C): Uint8Array;
  /** The chunk the pieces stand for: the first piece's header, the last one's ending, the whole payload. */
  whole(first: C, last: C, payload: Buffer): C;
}

/**
 * Gathers the pieces of one key at a time (a key's chunks are contiguous in a stream). take()
 * returns the chunk to handle, or undefined while more pieces are due.
 */
export class PieceGatherer<C> {
  private first: C | undefined;
  private parts: Uint8Array[] = [];
  private bytes = 0;
  /** A key whose pieces outgrew maxBytes: its remaining pieces are dropped. */
  private skipping: string | undefined;

  /**
   * @param maxBytes most payload bytes a gathered chunk may have
   * @param tooLarge told of a key whose pieces outgrow maxBytes, whose pieces are then dropped;
   *   left out, take() throws PieceError instead
   */
  constructor(
    private readonly shape: PieceShape<C>,
    private readonly maxBytes: number,
    private readonly tooLarge?: (key: string, message: string) => void,
  ) {}

  /** The key whose pieces are under way, if any (a partition or stream must not end there). */
  get pending(): string | undefined {
    if (this.skipping !== undefined) return this.skipping;
    return this.first === undefined ? undefined : this.shape.key(this.first);
  }

  take(c: C): C | undefined {
    const s = this.shape;
    const key = s.key(c);
    const under = this.pending;
    if (under !== undefined && key !== under) throw new PieceError(`the pieces of key "${under}" ended without their last piece`);
    if (this.skipping !== undefined) {
      if (!s.continued(c)) this.skipping = undefined;
      return undefined;
    }
    if (this.first === undefined && !s.continued(c)) return c;
    const p = s.payload(c);
    this.bytes += p.length;
    if (this.bytes > this.maxBytes) {
      const message = `the state of key "${key}" is larger than this node takes (${this.maxBytes} bytes; see --max-state-bytes)`;
      this.reset();
      if (this.tooLarge === undefined) throw new PieceError(message);
      this.tooLarge(key, message);
      if (s.continued(c)) this.skipping = key;
      return undefined;
    }
    this.first ??= c;
    this.parts.push(p);
    if (s.continued(c)) return undefined;
    const whole = s.whole(this.first, c, Buffer.concat(this.parts, this.bytes));
    this.reset();
    return whole;
  }

  private reset(): void {
    this.first = undefined;
    this.parts = [];
    this.bytes = 0;
  }
}
