// A client's write concern: `copies` on Add, Remove, Increment, Delete, Merge, an Import's first chunk and AddStream batches asks the node to answer only
// once that many nodes hold the write durably, itself included. Checked before the write (a
// request that cannot be met now changes nothing), awaited after it through the gossip layer's
// acknowledgements (gossip/copy-waiters.ts).
import { status } from "@grpc/grpc-js";
import { RpcError } from "./errors.js";

/** What the gossip layer offers a write that asks for copies. */
export interface CopyConfirmer {
  /** Other nodes that could confirm a copy of a write of key now; undefined under Algorithm 1 (no acknowledgements). */
  holders(key: string): number | undefined;
  /** Where the changes of a write of key made from now on will be found (taken before the write). */
  mark(key: string): number;
  /** After the write of key was reported: how many other nodes hold what it changed since the mark, once need do or after timeoutMs. */
  confirm(key: string, need: number, timeoutMs: number, since: number): Promise<number>;
}

/** A write's concern, taken before the write: the copies it asks for and its confirmer's mark. */
export interface Asked {
  copies: number;
  since: number;
}

/** Answered this long before the call's deadline, so that the client reads the count, not its own timeout. */
const DEADLINE_MARGIN_MS = 50;

/**
 * The copies a request asks for, or undefined when this node alone will do (unset, 0 or 1).
 * Throws, before anything is written, when they cannot be had now.
 */
export function copiesAsked(requested: number | undefined, key: string, confirmer: CopyConfirmer | undefined): Asked | undefined {
  if (requested === undefined || requested <= 1) return undefined;
  const others = confirmer?.holders(key);
  if (confirmer !== undefined && others === undefined) {
    throw new RpcError(
      status.FAILED_PRECONDITION,
      `copies ${requested} waits for the other nodes' gossip acknowledgements, which --gossip-algorithm alg1 does not send: ask for 0 or 1 copies, or run the cluster with alg2; nothing was written`,
    );
  }
  const nodes = (others ?? 0) + 1;
  if (nodes < requested) {
    throw new RpcError(
      status.UNAVAILABLE,
      `copies ${requested} cannot be had: ${nodes === 1 ? "this node alone holds" : `${nodes} nodes hold`} the key's partition now (members it gossips with, its owners under --replication-factor); nothing was written: ask for at most ${nodes}, or retry once more nodes are members`,
    );
  }
  // nodes > 1 here: the confirmer exists.
  return { copies: requested, since: confirmer!.mark(key) };
}

/**
 * After the write was reported: how many nodes hold it durably, this one included, once copies
 * do. Not within the call's deadline (less a margin) or timeoutMs: DEADLINE_EXCEEDED naming how
 * many did; the write stays made.
 */
async function awaitCopies(
  /** Undefined: none any more (the node stops), so none confirms. */
  confirmer: CopyConfirmer | undefined,
  key: string,
  { copies, since }: Asked,
  o: { deadline: number; timeoutMs: number; now: number; what: string },
): Promise<number> {
  const timeoutMs = Math.max(0, Math.min(o.timeoutMs, o.deadline - o.now - DEADLINE_MARGIN_MS));
  const held = 1 + (confirmer === undefined ? 0 : await confirmer.confirm(key, copies - 1, timeoutMs, since));
  if (held >= copies) return held;
  throw new RpcError(
    status.DEADLINE_EXCEEDED,
    `the ${o.what} is made and durable here, but ${held} of the ${copies} copies asked were confirmed within ${timeoutMs} ms (the call's deadline or --copies-timeout-ms); it stays made and spreads by gossip as any write`,
  );
}

/** A call's deadline in ms since the epoch (Infinity without one). */
function deadlineMs(d: Date | number): number {
  return d instanceof Date ? d.getTime() : d;
}

/** The write concern as the Replica service's calls use it: checked before a write, awaited after. */
export interface WriteCopies {
  /** copiesAsked with the node's confirmer of now: call it just before the write. */
  asked(requested: number | undefined, key: string): Asked | undefined;
  /** After the write of key was reported by call: the copies that hold it (0 when none were asked), or DEADLINE_EXCEEDED. */
  held(key: string, asked: Asked | undefined, call: { getDeadline(): Date | number }, what: string): Promise<number>;
}

/**
 * confirmer: the gossip layer's, once it runs (undefined before: this node alone holds anything);
 * timeoutMs: --copies-timeout-ms.
 */
export function writeCopies(confirmer: () => CopyConfirmer | undefined, timeoutMs = 5000): WriteCopies {
  return {
    asked: (requested, key) => copiesAsked(requested, key, confirmer()),
    // The deadline is read only when copies were asked: this runs on every write.
    held: async (key, asked, call, what) =>
      asked === undefined ? 0 : awaitCopies(confirmer(), key, asked, { deadline: deadlineMs(call.getDeadline()), timeoutMs, now: Date.now(), what }),
  };
}
