// The writes and reads of each data type in the evaluation of the newer types (eval-types.ts):
// what one update of the type is, sent to a node, and what a node's read of the key is, as a
// string, so that "every node reads the same" is a string comparison.
import { call } from "../../services/client/rpc.ts";
import type { Random } from "../../services/common/prng.ts";
import { ObjectType } from "../../services/crdt/index.ts";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import type { FilterParams } from "../../services/gen/deltaset/v1/types.ts";

export const EVAL_TYPES = ["awset-prob", "gbf", "orcf", "counter"] as const;
export type EvalType = (typeof EVAL_TYPES)[number];

const UNIVERSE = 200;
/** Elements a filter's read asks about: every element the workload can add, and as many never added. */
const PROBES = [...Array.from({ length: UNIVERSE }, (_, i) => Buffer.from(`e${i}`)), ...Array.from({ length: UNIVERSE }, (_, i) => Buffer.from(`never-${i}`))];

const filterParams = (): FilterParams => ({ capacity: 10_000n, falsePositiveRate: 0.01, hashes: 0, bits: 0n, fingerprintBits: 0, bucketSize: 0, ageSlices: 0, unionStrategy: 0 });

const TYPE: Record<EvalType, ObjectType> = { "awset-prob": ObjectType.AWSET_PROB, gbf: ObjectType.GBF, orcf: ObjectType.ORCF, counter: ObjectType.COUNTER };

/**
 * One update of the type at a node: adds (and for sets and ORCF removes) over a small universe, or an
 * increment. probParams: the filter of a probabilistic set the Add creates (default: the type's).
 */
export async function update(type: EvalType, c: ReplicaClient, key: string, random: Random, timeoutMs: number, probParams?: Partial<FilterParams>): Promise<void> {
  if (type === "counter") {
    await call(c, c.increment, { key, amount: random() < 0.7 ? 1n : -1n, requestId: "" }, { timeoutMs });
    return;
  }
  const element = Buffer.from(`e${Math.floor(random() * UNIVERSE)}`);
  const removes = type !== "gbf" && random() < 0.3;
  if (removes) await call(c, c.remove, { key, elements: [element], texts: [] }, { timeoutMs });
  else {
    const params = type !== "awset-prob" ? filterParams() : probParams === undefined ? undefined : { ...filterParams(), capacity: 0n, falsePositiveRate: 0, ...probParams };
    await call(c, c.add, { key, elements: [element], texts: [], type: TYPE[type], params }, { timeoutMs });
  }
}

/** A node's read of the key: members for the set, maybe-present answers and count for filters, the value for a counter. */
export async function read(type: EvalType, c: ReplicaClient, key: string, timeoutMs: number): Promise<string> {
  if (type === "awset-prob") {
    const q = await call(c, c.query, { key, elements: [], texts: [], pageSize: 10_000, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs });
    return q.members.map((m) => m.element.toString()).sort().join(",");
  }
  if (type === "counter") {
    const q = await call(c, c.query, { key, elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs });
    return String(q.counterValue);
  }
  const q = await call(c, c.query, { key, elements: PROBES, texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs });
  return `${q.presence.map((p) => (p.present ? 1 : 0)).join("")}:${q.filter?.estimatedCount ?? 0}`;
}
