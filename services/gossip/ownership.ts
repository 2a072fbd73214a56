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

  constructor(
    readonly self: string,
    private selfAddress: string,
    readonly partitions: number,
    readonly factor: ReplicationFactor,
  ) {
    this.members.set(self, selfAddress);
    this.table = placement(this.members.keys(), partitions, factor);
  }

  /** Every node owns every partition ("all"): nothing is forwarded or handed off. */
  get full(): boolean {
    return this.factor === "all";
  }

  /** How many times the placement changed (a view change that moved no partition does not count). */
  get version(): number {
    return this.changes;
  }

  /** The live peers (id → address; this node's own entry is ignored). Returns true when a partition moved. */
  setLive(live: ReadonlyMap<string, string>, selfAddress = this.selfAddress): boolean {
    this.selfAddress = selfAddress;
    const next = new Map<string, string>([[this.self, selfAddress]]);
    for (const [id, address] of live) if (id !== this.self) next.set(id, address);
    this.members = next;
    const table = placement(next.keys(), this.partitions, this.factor);
    const moved = table.some((owners, p) => owners.join("\n") !== this.table[p]!.join("\n"));
    this.table = table;
    if (moved) this.changes++;
    return moved;
  }

  partitionOf(key: string): number {
    return partitionOf(key, this.partitions);
  }

  /** The owners of a partition, highest rendezvous score first (this node may be among them). */
  ownersOf(partition: number): readonly string[] {
    return this.table[partition]!;
  }

  owns(partition: number): boolean {
    return this.full || this.table[partition]!.includes(this.self);
  }

  /** The other owners of a partition: those this node exchanges it with. */
  peersOf(partition: number): string[] {
    return this.table[partition]!.filter((id) => id !== this.self);
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
