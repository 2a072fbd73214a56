// Which partitions this node owns, from its view of the live members: the placement table
// (placement.ts) over the live members and this node, recomputed when the view changes. The
// routing layer asks it where a key's calls go, the gossip driver which peers each partition is
// exchanged with, and the hand-off which partitions this node holds without owning. Pure: the
// caller feeds it the view.
import { type ReplicationFactor, placement } from "./placement.js";
import { partitionOf } from "./partition.js";

export class Ownership {
  /** Live members (id → address), this node included. */
  private members = new Map<string, string>();
  private table: string[][];
  private changes = 0;
  /** Told after each placement change (onChange). */
  private readonly changeListeners = new Set<() => void>();
  /** Placements over the live members without some of them, by those members (cleared on a view change). */
  private readonly without = new Map<string, string[][]>();
  /** This node is leaving: it owns nothing, and a partition's peers are its owners once it is gone. */
  private leavingNow = false;
  /** Members that said they are leaving (GossipFrame.leaving): not counted among the owners a leaving node ships to. */
  private readonly leavingPeers = new Set<string>();
  /** Per partition: when (the caller's clock, setLive) its owners last changed; -Infinity: never. */
  private readonly movedAt: number[];
  /**
   * Per partition: the nodes that stopped owning it, each with when it last did (setLive's
   * clock). Not only the last change's: a partition that moves twice within a read window (two
   * joins in a row) is still held by its first owner, whose hand-off each change delays.
   */
  private readonly formerOwners: Array<Map<string, number>>;
  /** No view with a peer yet (the table is this node's alone). */
  private alone = true;
  /**
   * Per partition this node came to own: when (setLive's clock; -Infinity: never gained, or owned
   * from the start; kept when lost again) and the members that held it before, less those that
   * have since sent it whole (receivedWhole). A read of such a partition first fetches the key
   * from them (node/read-pull.ts): the copy here may hold only part of it until they have.
   */
  private readonly gainTimes: number[];
  private readonly priorHolders: Array<Set<string>>;
  /** Per partition: gained at the first view with peers (not by a change this node saw). */
  private readonly gainedAtFirstView: boolean[];
  /** Per partition gained: the members that have sent it whole since (receivedWhole). */
  private readonly wholeFrom: Array<Set<string>>;

  constructor(
    readonly self: string,
    private selfAddress: string,
    readonly partitions: number,
    readonly factor: ReplicationFactor,
  ) {
    this.members.set(self, selfAddress);
    this.table = placement(this.members.keys(), partitions, factor);
    this.movedAt = new Array<number>(partitions).fill(Number.NEGATIVE_INFINITY);
    this.formerOwners = Array.from({ length: partitions }, () => new Map<string, number>());
    this.gainTimes = new Array<number>(partitions).fill(Number.NEGATIVE_INFINITY);
    this.priorHolders = Array.from({ length: partitions }, () => new Set<string>());
    this.wholeFrom = Array.from({ length: partitions }, () => new Set<string>());
    this.gainedAtFirstView = new Array<boolean>(partitions).fill(false);
  }

  /** Every node owns every partition ("all"): nothing is forwarded or handed off. */
  get full(): boolean {
    return this.factor === "all";
  }

  /** How many times the placement changed (a view change that moved no partition does not count). */
  get version(): number {
    return this.changes;
  }

  /**
   * Calls listener after each placement change (a partition moved, or this node started leaving),
   * synchronously: a listener with work to do defers it. Returns the function that removes it.
   */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => void this.changeListeners.delete(listener);
  }

  private placementChanged(): void {
    this.changes++;
    for (const l of [...this.changeListeners]) l();
  }

  /**
   * The live peers (id → address; this node's own entry is ignored). Returns true when a partition
   * moved; `now` (the caller's clock) is recorded as the time its owners changed (movedSince).
   */
  setLive(live: ReadonlyMap<string, string>, selfAddress = this.selfAddress, now = 0): boolean {
    this.selfAddress = selfAddress;
    const next = new Map<string, string>([[this.self, selfAddress]]);
    for (const [id, address] of live) if (id !== this.self) next.set(id, address);
    const changedMembers = next.size !== this.members.size || [...next.keys()].some((id) => !this.members.has(id));
    this.members = next;
    this.without.clear();
    for (const id of this.leavingPeers) if (!next.has(id)) this.leavingPeers.delete(id);
    const table = placement(next.keys(), this.partitions, this.factor);
    let moved = false;
    table.forEach((owners, p) => {
      if (owners.join("\n") === this.table[p]!.join("\n")) return;
      moved = true;
      this.movedAt[p] = now;
      this.noteFormer(p, this.table[p]!, owners, now);
      this.noteGain(p, this.table[p]!, owners, now);
    });
    if (this.alone && next.size > 1) {
      // The first view with peers: this node (just started) knows no earlier placement but its own
      // table alone. What it owns now had, as far as reads go, the owners the others give it.
      this.alone = false;
      const others = this.tableWithout(this.self);
      for (let p = 0; p < this.partitions; p++) {
        this.movedAt[p] = now;
        this.formerOwners[p]!.clear(); // its table alone held nothing
        this.noteFormer(p, others[p]!, table[p]!, now);
        // What it owns, it gained from the owners the others give it (a join, a wiped restart).
        this.noteGain(p, others[p]!, table[p]!, now);
        this.gainedAtFirstView[p] = table[p]!.includes(this.self);
      }
    }
    this.table = table;
    // A partition gained at the first view with peers: the members that own it in a later view's
    // placement without this node held it too (a first view that listed only some members named
    // others; a node that knows no earlier placement cannot tell more).
    if (!this.alone && changedMembers) {
      const others = this.tableWithout(this.self);
      for (let p = 0; p < this.partitions; p++) {
        if (!this.gainedAtFirstView[p] || !table[p]!.includes(this.self)) continue;
        for (const id of others[p]!) if (id !== this.self && !this.wholeFrom[p]!.has(id)) this.priorHolders[p]!.add(id);
      }
    }
    if (moved) this.placementChanged();
    return moved;
  }

  /** Record the owners of p that the change from `before` to `after` left, and forget those no longer members. */
  private noteFormer(p: number, before: readonly string[], after: readonly string[], now: number): void {
    const former = this.formerOwners[p]!;
    for (const id of former.keys()) if (!this.members.has(id) || after.includes(id)) former.delete(id);
    for (const id of before) if (!after.includes(id)) former.set(id, now);
  }

  /** A change from `before` to `after` owners of p: whether this node gained it, and from whom. */
  private noteGain(p: number, before: readonly string[], after: readonly string[], now: number): void {
    const holders = this.priorHolders[p]!;
    // Lost again: whom it fetches from stays for the window. It still holds what arrived (until
    // hand-off drops it), and a new owner that came to own the partition from it fetches through it.
    if (!after.includes(this.self)) return;
    // Owned before too: it keeps what it had, and whom it still fetches from.
    if (before.includes(this.self)) return;
    this.gainTimes[p] = now;
    this.gainedAtFirstView[p] = false;
    holders.clear();
    this.wholeFrom[p]!.clear();
    for (const id of before) if (id !== this.self && this.members.has(id)) holders.add(id);
  }

  /**
   * The members a read of partition p fetches its key from before answering here: those that held
   * it when this node came to own it at or after sinceMs (setLive's clock), still members, that
   * have not sent it whole since. Empty when this node came to own it longer ago, or never. A node
   * that lost it again since still names them: it holds what arrived (until hand-off drops it),
   * and a fetch of the owner that took it over reaches them through it.
   */
  pullFrom(partition: number, sinceMs: number): Array<{ nodeId: string; address: string }> {
    if (this.gainTimes[partition]! < sinceMs) return [];
    // A holder that itself came to own it lately fetches in turn (read-pull.ts): two moves in a row.
    const out: Array<{ nodeId: string; address: string }> = [];
    for (const id of this.priorHolders[partition]!) {
      const address = this.members.get(id);
      if (id !== this.self && address !== undefined && address !== "") out.push({ nodeId: id, address });
    }
    return out;
  }

  /** When this node last came to own partition p (setLive's clock), also after losing it again; -Infinity: never gained. */
  gainedAt(partition: number): number {
    return this.gainTimes[partition]!;
  }

  /**
   * A member sent partition p whole (a full-state stream's end marker, its first chunk at
   * startedMs on setLive's clock): reads no longer fetch from it. A stream begun before this node
   * came to own p does not count.
   */
  receivedWhole(partition: number, from: string, startedMs: number): void {
    if (startedMs < this.gainTimes[partition]!) return;
    this.priorHolders[partition]?.delete(from);
    this.wholeFrom[partition]?.add(from);
  }

  /**
   * Where a read of a partition whose owners just changed may find it: its owners, then the live
   * members that stopped owning it at or after sinceMs (setLive's clock), the latest first (with
   * R = 1 a join leaves the data with an owner that is no longer one until it hands the
   * partition over, and a second change before then leaves it there still).
   */
  readAddresses(partition: number, sinceMs = Number.NEGATIVE_INFINITY): Array<{ nodeId: string; address: string }> {
    const now = this.table[partition]!;
    const before = [...this.formerOwners[partition]!]
      .filter(([id, at]) => at >= sinceMs && !now.includes(id) && this.members.has(id))
      .sort((a, b) => b[1] - a[1])
      .map(([id]) => id);
    return [...now, ...before].map((nodeId) => ({ nodeId, address: this.members.get(nodeId) ?? "" }));
  }

  /** Whether the partition's owners changed at or after `sinceMs` (setLive's clock). */
  movedSince(partition: number, sinceMs: number): boolean {
    return this.movedAt[partition]! >= sinceMs;
  }

  partitionOf(key: string): number {
    return partitionOf(key, this.partitions);
  }

  /** The owners of a partition, highest rendezvous score first (this node may be among them). */
  ownersOf(partition: number): readonly string[] {
    return this.table[partition]!;
  }

  owns(partition: number): boolean {
    if (this.leavingNow) return false;
    return this.full || this.table[partition]!.includes(this.self);
  }

  /**
   * Whether this node owns the partition, or would once `absent` (and the members that said they
   * leave) are gone: a leaving owner ships
   * its partitions to those who take them over before it goes (startLeaving), and they take them.
   */
  ownsOnceGone(partition: number, absent: string): boolean {
    // A leaving node takes nothing over: what it took would leave with it.
    if (this.leavingNow) return false;
    // Members that said they leave are gone too by then.
    return this.owns(partition) || this.tableWithout(absent, ...this.leavingPeers)[partition]!.includes(this.self);
  }

  /**
   * The other owners of a partition: those this node exchanges it with (while leaving: its owners
   * once this node and the members that said they leave too are gone).
   */
  peersOf(partition: number): string[] {
    const table = this.leavingNow ? this.tableWithout(this.self, ...this.leavingPeers) : this.table;
    return table[partition]!.filter((id) => id !== this.self);
  }

  /** This node is leaving (startLeaving). */
  get leaving(): boolean {
    return this.leavingNow;
  }

  /** A member said whether it is leaving (its gossip frames and replies). Returns true when that changed. */
  peerLeaving(id: string, leaving: boolean): boolean {
    if (id === this.self || leaving === this.leavingPeers.has(id)) return false;
    if (leaving && !this.members.has(id)) return false;
    if (leaving) this.leavingPeers.add(id);
    else this.leavingPeers.delete(id);
    return true;
  }

  /** Whether a member said it is leaving. */
  isLeaving(id: string): boolean {
    return this.leavingPeers.has(id);
  }

  /**
   * This node is about to leave: from now on it owns no partition, and each partition's peers are
   * the owners it will have without this node, so gossip gives them what only this node may hold
   * (with R = 1, everything it owns) before it goes, and hand-off gives them its deferred removes.
   * With every node owning everything ("all") nothing changes.
   */
  startLeaving(): void {
    if (this.leavingNow || this.full) return;
    this.leavingNow = true;
    this.placementChanged();
  }

  private tableWithout(...absent: string[]): string[][] {
    const key = [...new Set(absent)].sort().join("\n");
    let t = this.without.get(key);
    if (t === undefined) {
      t = placement([...this.members.keys()].filter((id) => !absent.includes(id)), this.partitions, this.factor);
      this.without.set(key, t);
    }
    return t;
  }

  addressOf(id: string): string | undefined {
    return this.members.get(id);
  }

  /** The owners of a partition with their addresses. */
  ownerAddresses(partition: number): Array<{ nodeId: string; address: string }> {
    return this.table[partition]!.map((nodeId) => ({ nodeId, address: this.members.get(nodeId) ?? "" }));
  }

  /** The partitions this node owns. */
  owned(): number[] {
    const out: number[] = [];
    for (let p = 0; p < this.partitions; p++) if (this.owns(p)) out.push(p);
    return out;
  }
}
