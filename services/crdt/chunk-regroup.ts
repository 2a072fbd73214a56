// Regrouping of a key's chunked transfer into chunks of bounded entries and bytes: the store
// reads a set in chunks of a fixed number of entries, an export keeps only part of each (a
// delta) and must bound each chunk's bytes too. The output ranges still tile the element space
// in order (chunk-slice.ts: each chunk carries every entry inside its range, only the last is
// open), so the receiver applies them with the same rule as any chunked transfer.
import type { ElementKey } from "./awset.js";
import { elementBytes } from "./awset.js";
import type { DotSet } from "./dot-store.js";

/** A chunk of a key's entries: its range and the entries inside it, in element order. */
export interface EntryChunk {
  /** Inclusive lower bound; empty: from the first element. */
  rangeStart: Buffer;
  /** Inclusive upper bound; ignored when rangeOpen. */
  rangeEnd: Buffer;
  /** The range extends past the last element (the last chunk). */
  rangeOpen: boolean;
  entries: Map<ElementKey, DotSet>;
}

export interface RegroupLimits {
  maxEntries: number;
  /** Most bytes of a chunk's entries, as entryBytes counts them; a chunk holds at least one entry. */
  maxBytes: number;
  entryBytes: (k: ElementKey, dots: DotSet) => number;
}

/**
 * Takes tiling chunks (push, in order) and gives tiling chunks within the limits. A chunk is
 * given as soon as the next entry would not fit; the last one (open) when the last input arrives.
 */
export class ChunkRegrouper {
  private start: Buffer = Buffer.alloc(0);
  private entries = new Map<ElementKey, DotSet>();
  private bytes = 0;
  private lastKey: ElementKey | undefined;
  private ended = false;

  constructor(private readonly limits: RegroupLimits) {
    if (!(limits.maxEntries >= 1)) throw new RangeError("maxEntries must be at least 1");
  }

  /** One input chunk; returns the output chunks it completed. */
  push(chunk: EntryChunk): EntryChunk[] {
    if (this.ended) throw new Error("chunk after the last (open) one");
    const out: EntryChunk[] = [];
    for (const [k, dots] of chunk.entries) {
      const size = this.limits.entryBytes(k, dots);
      const full = this.entries.size >= this.limits.maxEntries || this.bytes + size > this.limits.maxBytes;
      if (this.entries.size > 0 && full) out.push(this.close());
      this.entries.set(k, dots);
      this.bytes += size;
      this.lastKey = k;
    }
    if (chunk.rangeOpen) {
      this.ended = true;
      out.push({ rangeStart: this.start, rangeEnd: Buffer.alloc(0), rangeOpen: true, entries: this.entries });
    }
    return out;
  }

  /** The pending chunk, closed at its last entry; the next one starts just after it. */
  private close(): EntryChunk {
    const end = elementBytes(this.lastKey!);
    const c = { rangeStart: this.start, rangeEnd: end, rangeOpen: false, entries: this.entries };
    // Ranges are inclusive: the successor of end (end + 0x00) is where the next chunk starts.
    this.start = Buffer.concat([end, Buffer.from([0])]);
    this.entries = new Map();
    this.bytes = 0;
    return c;
  }
}
