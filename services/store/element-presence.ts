// Which elements of an add-wins set certainly have no record, so an add of a new element skips
// the LevelDB read for its existing dots (the bigset read before write). That read cost about
// 2.5 µs of CPU per element in batch adds, a third of the store's time (`npm run bench:replica`).
//
// A filter is only ever trusted when it is complete: it holds every element that has a record.
// That is known for an object that has no element record (no header yet, or a live size of 0):
// its filter starts empty under the key's lock and every record written after (WriteView.finish,
// the only writer of element records) is added to it. A stored set met first with elements is
// filled by one scan of its element records (startScan), begun under the key's lock after every
// queued write is durable, and trusted once the scan ends. A filter can answer "maybe" for an
// element without a record (then the record is read, as without a filter), never "absent" for one
// with a record. Nothing is persisted: after a restart filters are built again.
//
// Each filter is a series of Bloom filters, each twice the capacity of the one before (a set
// grows without a rebuild); memory is bounded by a budget shared by every filter, and a filter
// that would pass it is dropped (that set's adds read again).
import { hash32 } from "../crdt/element-hash.js";

/** Bits per element and probes: about 0.8% false "maybe" per segment. */
const BITS_PER_ELEMENT = 10;
const PROBES = 7;
const FIRST_CAPACITY = 1024;

/** The one hash of an element the filters probe with. */
export function presenceHash(element: Uint8Array): number {
  return hash32(element, 0x5bd1e995);
}

/** The double-hashing step, derived from the same 32 bits (odd, so probes differ). */
function probeStep(h: number): number {
  return (Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0) | 1;
}

class Segment {
  readonly bits: Uint32Array;
  readonly mask: number;
  count = 0;

  constructor(readonly capacity: number) {
    // A power of two of bits: positions by mask.
    let m = 32;
    while (m < capacity * BITS_PER_ELEMENT) m *= 2;
    this.bits = new Uint32Array(m / 32);
    this.mask = m - 1;
  }

  get bytes(): number {
    return this.bits.byteLength;
  }

  has(h1: number, h2: number): boolean {
    for (let i = 0; i < PROBES; i++) {
      const p = (h1 + Math.imul(i, h2)) & this.mask;
      if ((this.bits[p >>> 5]! & (1 << (p & 31))) === 0) return false;
    }
    return true;
  }

  add(h1: number, h2: number): void {
    for (let i = 0; i < PROBES; i++) {
      const p = (h1 + Math.imul(i, h2)) & this.mask;
      this.bits[p >>> 5]! |= 1 << (p & 31);
    }
    this.count++;
  }
}

/** The elements of one set that may have a record. */
export class PresenceFilter {
  private readonly segments: Segment[] = [];
  /** Trusted: every element with a record has been added (false while its scan runs). */
  complete: boolean;
  dropped = false;

  constructor(
    private readonly owner: ElementPresence,
    readonly key: string,
    complete: boolean,
  ) {
    this.complete = complete;
  }

  get bytes(): number {
    let n = 0;
    for (const s of this.segments) n += s.bytes;
    return n;
  }

  /** False only when the element (of hash presenceHash(element)) certainly has no record. */
  mayHold(hash: number): boolean {
    if (!this.complete || this.dropped) return true;
    const h2 = probeStep(hash);
    // Newest first: the last segment holds about half the elements (each doubles the one before).
    for (let i = this.segments.length - 1; i >= 0; i--) if (this.segments[i]!.has(hash, h2)) return true;
    return false;
  }

  /** The element (of hash presenceHash(element)) has, or may get, a record. */
  add(hash: number): void {
    if (this.dropped) return;
    let s = this.segments.at(-1);
    if (s === undefined || s.count >= s.capacity) {
      s = new Segment(s === undefined ? FIRST_CAPACITY : s.capacity * 2);
      if (!this.owner.reserve(s.bytes)) {
        this.owner.dropFilter(this);
        return;
      }
      this.segments.push(s);
    }
    s.add(hash, probeStep(hash));
  }
}

/** The presence filters of a store's sets, by key, within one memory budget. */
export class ElementPresence {
  private readonly filters = new Map<string, PresenceFilter>();
  private bytes = 0;
  /** Element reads skipped because a filter said absent; scans started to fill a filter. */
  skipped = 0;
  scans = 0;

  constructor(private readonly budgetBytes: number) {}

  get enabled(): boolean {
    return this.budgetBytes > 0;
  }

  get(key: string): PresenceFilter | undefined {
    return this.filters.get(key);
  }

  /** A trusted empty filter for a set with no element record (call under the key's lock). */
  startEmpty(key: string): PresenceFilter | undefined {
    return this.install(key, true);
  }

  /**
   * An untrusted filter for a set that has records (call under the key's lock, then drain the
   * queued writes before listing the records): writers add to it from now on; finishScan trusts it.
   */
  startScan(key: string, records: number): PresenceFilter | undefined {
    // Segments up to twice the records' capacity: refused when that does not fit, rather than scanning for nothing.
    if (this.bytes + (records * BITS_PER_ELEMENT * 2) / 8 > this.budgetBytes) return undefined;
    const f = this.install(key, false);
    if (f !== undefined) this.scans++;
    return f;
  }

  finishScan(f: PresenceFilter): void {
    if (!f.dropped) f.complete = true;
  }

  drop(key: string): void {
    const f = this.filters.get(key);
    if (f !== undefined) this.dropFilter(f);
  }

  stats(): { filters: number; bytes: number; skipped: number; scans: number } {
    return { filters: this.filters.size, bytes: this.bytes, skipped: this.skipped, scans: this.scans };
  }

  /** Room for a new segment within the budget. */
  reserve(bytes: number): boolean {
    if (this.bytes + bytes > this.budgetBytes) return false;
    this.bytes += bytes;
    return true;
  }

  dropFilter(f: PresenceFilter): void {
    if (f.dropped) return;
    f.dropped = true;
    this.bytes -= f.bytes;
    if (this.filters.get(f.key) === f) this.filters.delete(f.key);
  }

  private install(key: string, complete: boolean): PresenceFilter | undefined {
    if (!this.enabled) return undefined;
    this.drop(key);
    const f = new PresenceFilter(this, key, complete);
    this.filters.set(key, f);
    return f;
  }
}
