// A set as it stood at one moment: its causal context, its size and its members, all read from one
// snapshot of the database. Query and Scan answer a context with the members so that a Remove
// built from them (Remove.context) removes exactly the adds the reader saw: read apart, an add
// landing between the context's read and the members' was listed with a dot the context did not
// cover, and a Remove of that element with that context removed nothing (outside check: 12 of
// 1,194 such Removes answered OK and left the element for good).
import { type CausalContext, type Dot, ObjectType } from "../crdt/index.js";
import type { DbSnapshot, StoreDb } from "./db.js";
import { elementDotsAt, members, page } from "./element-reads.js";
import { headerKey } from "./keys.js";
import { decodeHeader } from "./records.js";

export class SetSnapshot {
  private constructor(
    private readonly db: StoreDb,
    private readonly snapshot: DbSnapshot,
    private readonly prefix: Buffer,
    private readonly now: number,
    /** The set's context and live element count at the snapshot. */
    readonly ctx: CausalContext,
    readonly size: number,
  ) {}

  /**
   * The set at this moment of the database: every acknowledged write is in it (group commit
   * acknowledges a write once its batch is). undefined when the key is absent or not an AWSET.
   */
  static async open(db: StoreDb, prefix: Buffer, now: number): Promise<SetSnapshot | undefined> {
    const snapshot = db.snapshot();
    try {
      const record = await db.get(headerKey(prefix), { snapshot });
      const h = record === undefined ? undefined : decodeHeader(record);
      if (h === undefined || h.type !== ObjectType.AWSET) {
        await snapshot.close();
        return undefined;
      }
      return new SetSnapshot(db, snapshot, prefix, now, h.ctx, h.size);
    } catch (err) {
      await snapshot.close();
      throw err;
    }
  }

  page(startAfter: Uint8Array | undefined, limit: number, maxBytes?: number): Promise<{ members: Buffer[]; dots: Dot[][]; next: Buffer | undefined }> {
    return page(this.db, this.prefix, startAfter, limit, this.now, maxBytes, this.snapshot);
  }

  members(opts: { startAfter?: Uint8Array; chunkSize: number; maxBytes?: number }): AsyncGenerator<Array<{ element: Buffer; dots: Dot[] }>> {
    return members(this.db, this.prefix, { ...opts, now: this.now, snapshot: this.snapshot });
  }

  dotsOf(elements: Uint8Array[]): Promise<Dot[][]> {
    return elementDotsAt(this.db, this.snapshot, this.prefix, elements, this.now);
  }

  close(): Promise<void> {
    return this.snapshot.close();
  }
}
