// Partition placement: which live members own each partition, by rendezvous (highest random
// weight) hashing. Each member gets a score per partition from a hash of (member id, partition);
// a partition's owners are the R members with the highest scores. Every node computes this from
// its own membership view, with no protocol of its own. A member joining takes a partition only
// where it outscores one of the current owners (it then replaces the lowest of them), and a member
// leaving hands each of its partitions to the next member in that partition's order, so a change
// of one member moves about R/N of the partition copies and nothing else. Pure and deterministic.
import { fmix32 } from "../crdt/element-hash.js";
import { fnv1a32 } from "./partition.js";

/** R: owners per partition, or every member ("all": full replication). */
export type ReplicationFactor = number | "all";

const utf8 = new TextEncoder();

/** The member's score for a partition (ties, which are rare, are broken by id). */
export function score(memberHash: number, partition: number): number {
  return fmix32(memberHash ^ fmix32(partition + 0x9e3779b9));
}

export function memberHash(id: string): number {
  return fnv1a32(utf8.encode(id));
}

function checkFactor(r: ReplicationFactor): void {
  if (r !== "all" && !(Number.isInteger(r) && r >= 1)) throw new RangeError(`replication factor must be a positive integer or "all", got ${String(r)}`);
}

interface Ranked {
  id: string;
  h: number;
}

/** Higher score first; equal scores by id. */
function before(a: Ranked, sa: number, b: Ranked, sb: number): boolean {
  return sa > sb || (sa === sb && a.id < b.id);
}

/** The top r of the members for one partition, highest first: one pass, no sort of the whole view. */
function topOwners(partition: number, members: readonly Ranked[], r: number): string[] {
  const top: Ranked[] = [];
  const scores: number[] = [];
  for (const m of members) {
    const s = score(m.h, partition);
    if (top.length === r && !before(m, s, top[r - 1]!, scores[r - 1]!)) continue;
    let i = Math.min(top.length, r - 1);
    if (top.length < r) {
      top.push(m);
      scores.push(s);
    }
    while (i > 0 && before(m, s, top[i - 1]!, scores[i - 1]!)) {
      top[i] = top[i - 1]!;
      scores[i] = scores[i - 1]!;
      i--;
    }
    top[i] = m;
    scores[i] = s;
  }
  return top.map((m) => m.id);
}

function ranked(members: Iterable<string>): Ranked[] {
  return [...new Set(members)].map((id) => ({ id, h: memberHash(id) }));
}

/** The owners of one partition, highest score first (min(R, members) of them). */
export function ownersOf(partition: number, members: Iterable<string>, r: ReplicationFactor): string[] {
  checkFactor(r);
  const list = ranked(members);
  return topOwners(partition, list, r === "all" ? list.length : r);
}

/** The owners of every partition (index: partition). */
export function placement(members: Iterable<string>, partitions: number, r: ReplicationFactor): string[][] {
  checkFactor(r);
  const list = ranked(members);
  const n = r === "all" ? list.length : r;
  return Array.from({ length: partitions }, (_, p) => topOwners(p, list, n));
}

/** The partitions a member owns. */
export function ownedBy(member: string, table: readonly string[][]): number[] {
  const out: number[] = [];
  table.forEach((owners, p) => {
    if (owners.includes(member)) out.push(p);
  });
  return out;
}

/** Partition copies a member holds after a change and did not before: what a hand-off must move. */
export function copiesToMove(before: readonly string[][], after: readonly string[][]): number {
  let moved = 0;
  after.forEach((owners, p) => {
    for (const o of owners) if (!before[p]!.includes(o)) moved++;
  });
  return moved;
}
