// A state stored whole (a filter, a counter, an awset-prob set) travels as one chunk, but it can be
// larger than a message: a filter may be as large as --max-filter-bytes, a key may hold several
// (siblings), and an awset-prob set grows with its elements. Such a chunk is cut into pieces of at
// most a given number of payload bytes, each sent as a chunk of its own marked `continued` but the
// last; the receiver gathers a key's pieces back into the one chunk before it checks and applies
// it. Used by full-state gossip (PushState) and by Export and Import.
//
// The pieces of a state are not self-checking (a filter's bits decode whatever their order), so
// each piece names where its payload begins in the whole (its offset) and the last one carries the
// SHA-256 of the whole: a piece missing, repeated, moved or altered is refused before anything of
// the state is applied. Pieces from a sender that marks neither are taken in the order they come.
import { createHash } from "node:crypto";

/** One piece of a payload: offset and digest are set only when the payload is cut in several. */
export interface Piece {
  payload: Buffer;
  /** Where this piece's bytes begin in the whole payload. */
  offset?: number;
  /** On the last piece: the SHA-256 of the whole payload. */
  digest?: Buffer;
}

export const sha256 = (bytes: Uint8Array): Buffer => createHash("sha256").update(bytes).digest();

/** Cut payload into pieces of at most maxBytes each (one unmarked piece when it fits, or is empty). */
export function cutIntoPieces(payload: Buffer, maxBytes: number): Piece[] {
  if (payload.length <= maxBytes) return [{ payload }];
  const out: Piece[] = [];
  for (let at = 0; at < payload.length; at += maxBytes) out.push({ payload: payload.subarray(at, at + maxBytes), offset: at });
  out[out.length - 1]!.digest = sha256(payload);
  return out;
}

/** Pieces that do not form a chunk: nothing of that key was applied. */
export class PieceError extends Error {
  override readonly name: string = "PieceError";
}

/** A key's pieces add up to more than the receiver takes (--max-state-bytes). */
export class PiecesTooLargeError extends PieceError {
  override readonly name = "PiecesTooLargeError";
}

/** What the gatherer reads of a chunk, and how it makes the whole chunk of its pieces. */
export interface PieceShape<C> {
  key(c: C): string;
  continued(c: C): boolean;
  payload(c: C): Uint8Array;
  /** Piece.offset as the chunk carries it; undefined when it carries none. */
  offset(c: C): number | undefined;
  /** Piece.digest as the chunk carries it; undefined when it carries none. */
  digest(c: C): Uint8Array | undefined;
  /** The chunk the pieces stand for: the first piece's header, the last one's ending, the whole payload. */
  whole(first: C, last: C, payload: Buffer): C;
}

/**
 * Gathers the pieces of one key at a time (a key's chunks are contiguous in a stream). take()
 * returns the chunk to handle, or undefined while more pieces are due. A key's pieces must carry
 * offsets all or none (as its first piece does); with offsets, each must begin where the pieces
 * before it ended and the last must carry the digest of the whole; a digest carried is checked.
 */
export class PieceGatherer<C> {
  private first: C | undefined;
  private parts: Uint8Array[] = [];
  private bytes = 0;
  /** The key's first piece carried an offset: every piece must, and the last a digest. */
  private marked = false;
  /** A key whose pieces outgrew maxBytes: its remaining pieces are dropped. */
  private skipping: string | undefined;

  /**
   * @param maxBytes most payload bytes a gathered chunk may have
   * @param tooLarge told of a key whose pieces outgrow maxBytes, whose pieces are then dropped;
   *   left out, take() throws PiecesTooLargeError instead
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
    const p = s.payload(c);
    this.checkOffset(key, s.offset(c));
    if (this.first === undefined && !s.continued(c)) {
      // A chunk in one piece (or a lone last piece, whose offset above was not 0).
      this.checkDigest(key, s.digest(c), p);
      return c;
    }
    this.bytes += p.length;
    if (this.bytes > this.maxBytes) {
      const message = `the state of key "${key}" is larger than this node takes (${this.maxBytes} bytes; see --max-state-bytes)`;
      this.reset();
      if (this.tooLarge === undefined) throw new PiecesTooLargeError(message);
      this.tooLarge(key, message);
      if (s.continued(c)) this.skipping = key;
      return undefined;
    }
    if (this.first === undefined) {
      this.first = c;
      this.marked = s.offset(c) !== undefined;
    }
    this.parts.push(p);
    if (s.continued(c)) return undefined;
    const payload = Buffer.concat(this.parts, this.bytes);
    const digest = s.digest(c);
    const marked = this.marked;
    const whole = s.whole(this.first, c, payload);
    this.reset();
    if (marked && digest === undefined) throw new PieceError(`the last piece of key "${key}" carries no SHA-256 of the whole state, though its pieces carry offsets`);
    this.checkDigest(key, digest, payload);
    return whole;
  }

  /** A piece's offset against the bytes gathered before it (none: a key's first piece, or a chunk in one piece). */
  private checkOffset(key: string, offset: number | undefined): void {
    if (this.first === undefined) {
      if (offset !== undefined && offset !== 0) {
        this.reset();
        throw new PieceError(`the first piece of key "${key}" begins at byte ${offset} of its state: the pieces before it are missing or come later`);
      }
      return;
    }
    if (offset === undefined ? !this.marked : this.marked && offset === this.bytes) return;
    const due = this.bytes;
    const marked = this.marked;
    this.reset();
    if (!marked) throw new PieceError(`a piece of key "${key}" carries an offset though its first piece did not`);
    if (offset === undefined) throw new PieceError(`a piece of key "${key}" carries no offset though its first piece did`);
    throw new PieceError(`a piece of key "${key}" begins at byte ${offset} of its state where byte ${due} was due: its pieces are out of order, repeated or missing`);
  }

  private checkDigest(key: string, digest: Uint8Array | undefined, payload: Uint8Array): void {
    if (digest === undefined || sha256(payload).equals(digest)) return;
    throw new PieceError(`the state of key "${key}" does not match the SHA-256 its last piece carries: a piece was altered, or its pieces do not belong together`);
  }

  private reset(): void {
    this.first = undefined;
    this.parts = [];
    this.bytes = 0;
    this.marked = false;
  }
}
