// The checker of a chaos run: a pure function of the history and the final reads of every node.
//
// What it reports (after Jepsen's set-full and final-reads checkers, adapted to an add-wins set
// whose removes carry the context of a read):
// - lost: an acknowledged add of e, e absent from a node's final read, although some dot of an
//   acknowledged add of e was covered by the context of no acknowledged or indeterminate remove
//   of e. A remove deletes only the dots its context covers, so only such a remove may explain
//   the absence (an acknowledged add with no dot recorded is explained by any such remove).
// - resurrected: e present in a node's final read although an acknowledged remove of e reported
//   it removed (removed = 1) with a context covering the dot of every acknowledged add of e, and
//   no indeterminate add of e exists. Elements are unique per client add, so another add of e is
//   a retry of the same add: an acknowledged one started after the remove completed has a dot
//   outside the remove's context (and so does not count as covered), and an indeterminate one
//   may have taken effect at any time, before or after the remove (add wins): both excuse e.
// - ignored removes: e present at the end although an acknowledged remove of e whose context
//   covered the dot of every acknowledged add of e answered removed = 0 (the node did not remove
//   it), with no indeterminate add of e. The remove's contract is to delete what its context saw.
// - divergence: nodes whose final reads differ from the most common read (or that could not be
//   read at all), and unexpected elements that no add ever wrote.
// - stale reads: a Query during the run answered e absent at a node that had acknowledged an add
//   of e before the Query was invoked, while no remove of e (acknowledged or indeterminate) had
//   been invoked before the Query ended. The node made the add durable before acknowledging it
//   (a restart keeps it), and only a remove takes it away: reads at other nodes may lag, a read
//   at the node that took the write may not.
// - phantom reads: a Query answered e present although no add of e was invoked before it ended.
import type { AddOp, ContextRanges, FinalReads, Op, ReadOp, RemoveOp } from "./history.js";

export interface OutcomeCounts {
  ok: number;
  fail: number;
  info: number;
}

export interface LostElement {
  key: string;
  element: string;
  /** Nodes whose final read lacks it. */
  missingOn: string[];
  /** Acknowledged adds of it: node and completion time. */
  addedBy: Array<{ node: string; end: number; dots: string[] }>;
  /** Removes of it that were acknowledged or indeterminate, none covering every acknowledged dot. */
  removes: number;
}

export interface ResurrectedElement {
  key: string;
  element: string;
  presentOn: string[];
  /** The acknowledged remove that reported it removed (for ignored removes: that removed nothing). */
  removedBy: { node: string; end: number; readNode: string };
}

export interface StaleRead {
  key: string;
  element: string;
  node: string;
  readStart: number;
  /** The add the same node acknowledged before the read began. */
  addEnd: number;
}

export interface CheckReport {
  valid: boolean;
  ops: { add: OutcomeCounts; remove: OutcomeCounts; read: OutcomeCounts };
  elements: {
    /** Distinct elements some add was invoked for. */
    attempted: number;
    /** Distinct elements with an acknowledged add. */
    acked: number;
    /** Distinct elements an acknowledged remove reported removed. */
    removed: number;
  };
  lost: LostElement[];
  lostCount: number;
  resurrected: ResurrectedElement[];
  resurrectedCount: number;
  /** Present after an effective remove, but an indeterminate add of the element may explain it. */
  excusedByIndeterminateAdd: number;
  /**
   * Acknowledged removes that removed nothing (removed = 0): the node did not hold every dot the
   * read's context covered (it lagged behind the node that served the read).
   */
  removesWithoutEffect: number;
  /** Elements still present at the end that such a remove should have deleted (its context covered them). */
  ignoredRemoves: ResurrectedElement[];
  ignoredRemoveCount: number;
  divergence: {
    identical: boolean;
    /** Nodes whose read differs from the most common one. */
    nodes: string[];
    /** Nodes that returned no final read. */
    unreadable: string[];
    /** Per divergent node: elements it has that the common read lacks, and the reverse. */
    details: Array<{ node: string; extra: number; missing: number }>;
  };
  /** Elements in some final read that no add was ever invoked for. */
  unexpected: Array<{ key: string; element: string; node: string }>;
  /** Reads during the run that missed an add the reading node had acknowledged before them (see above). */
  staleReads: StaleRead[];
  staleReadCount: number;
  /** Reads during the run that saw an element no add had been invoked for by then. */
  phantomReads: Array<{ key: string; element: string; node: string; readEnd: number }>;
  /** Element answers of acknowledged reads the two checks above looked at. */
  readAnswersChecked: number;
  /** Acknowledged adds and removes per second of the history's span. */
  ackedOpsPerSec: number;
  /** First invocation to last completion, in ms. */
  spanMs: number;
}

/** Whether a context covers a dot "replica:counter". */
export function contextCovers(ctx: ContextRanges, dot: string): boolean {
  const i = dot.lastIndexOf(":");
  const ranges = ctx[dot.slice(0, i)];
  if (ranges === undefined) return false;
  const n = Number(dot.slice(i + 1));
  return ranges.some(([a, b]) => a <= n && n <= b);
}

const id = (key: string, element: string) => `${key}\u0000${element}`;

function counts(ops: Op[]): OutcomeCounts {
  const c = { ok: 0, fail: 0, info: 0 };
  for (const o of ops) c[o.outcome]++;
  return c;
}

/**
 * localReads: every node holds every key (full replication), so a node answers a read from its own
 * store and the stale-read check applies. With placement a read is forwarded to one of the key's
 * owners, which need not be the one that took the add: then it is skipped.
 */
export function checkHistory(history: readonly Op[], finals: FinalReads, opts: { localReads?: boolean } = {}): CheckReport {
  const localReads = opts.localReads ?? true;
  const adds = new Map<string, AddOp[]>();
  const removes = new Map<string, RemoveOp[]>();
  const addOps: AddOp[] = [];
  const removeOps: RemoveOp[] = [];
  const readOps: ReadOp[] = [];
  for (const op of history) {
    if (op.kind === "add") {
      addOps.push(op);
      const k = id(op.key, op.element);
      adds.set(k, [...(adds.get(k) ?? []), op]);
    } else if (op.kind === "remove") {
      removeOps.push(op);
      const k = id(op.key, op.element);
      removes.set(k, [...(removes.get(k) ?? []), op]);
    } else {
      readOps.push(op);
    }
  }

  // Final state per node as sets of element ids.
  const nodes = Object.keys(finals).sort();
  const readable = nodes.filter((n) => finals[n] !== null);
  const present = new Map<string, Set<string>>();
  for (const n of readable) {
    const s = new Set<string>();
    for (const [key, elements] of Object.entries(finals[n]!)) for (const e of elements) s.add(id(key, e));
    present.set(n, s);
  }

  const lost: LostElement[] = [];
  const resurrected: ResurrectedElement[] = [];
  let excused = 0;
  const ignored: ResurrectedElement[] = [];
  let removedElements = 0;
  let ackedElements = 0;
  for (const [k, list] of adds) {
    const [key, element] = k.split("\u0000") as [string, string];
    const acked = list.filter((a) => a.outcome === "ok");
    const rs = removes.get(k) ?? [];
    const mayHaveRemoved = rs.filter((r) => r.outcome !== "fail");
    // Effective: the node removed it, or deferred the remove until the covered adds arrive.
    const effective = rs.filter((r) => r.outcome === "ok" && ((r.removed ?? 0) >= 1 || (r.pending ?? 0) >= 1));
    if (effective.length > 0) removedElements++;
    if (acked.length > 0) ackedElements++;
    const missingOn = readable.filter((n) => !present.get(n)!.has(k));
    const presentOn = readable.filter((n) => present.get(n)!.has(k));

    // Lost: absent, and some acknowledged dot is covered by no remove that may have happened.
    if (acked.length > 0 && missingOn.length > 0) {
      const explained = acked.every((a) =>
        a.dots.length === 0 ? mayHaveRemoved.length > 0 : a.dots.every((d) => mayHaveRemoved.some((r) => contextCovers(r.context, d))),
      );
      if (!explained) {
        lost.push({ key, element, missingOn, addedBy: acked.map((a) => ({ node: a.node, end: a.end, dots: a.dots })), removes: mayHaveRemoved.length });
      }
    }

    // Resurrected: present, although an effective remove covered every acknowledged add.
    if (presentOn.length > 0) {
      const coversAll = (r: RemoveOp) => acked.every((a) => (a.dots.length === 0 ? a.start < r.end : a.dots.every((d) => contextCovers(r.context, d))));
      const indeterminateAdd = list.some((a) => a.outcome === "info");
      const culprit = effective.find(coversAll);
      if (culprit !== undefined) {
        if (indeterminateAdd) excused++;
        else resurrected.push({ key, element, presentOn, removedBy: { node: culprit.node, end: culprit.end, readNode: culprit.readNode } });
      } else if (!indeterminateAdd && acked.length > 0) {
        const noEffect = rs.find((r) => r.outcome === "ok" && r.removed === 0 && (r.pending ?? 0) === 0 && coversAll(r));
        if (noEffect !== undefined) ignored.push({ key, element, presentOn, removedBy: { node: noEffect.node, end: noEffect.end, readNode: noEffect.readNode } });
      }
    }
  }

  // Elements no add was invoked for.
  const unexpected: CheckReport["unexpected"] = [];
  for (const n of readable) {
    for (const k of present.get(n)!) {
      if (adds.has(k)) continue;
      const [key, element] = k.split("\u0000") as [string, string];
      unexpected.push({ key, element, node: n });
    }
  }

  // Reads during the run, against the adds and removes invoked before them.
  const staleReads: StaleRead[] = [];
  const phantomReads: CheckReport["phantomReads"] = [];
  let readAnswersChecked = 0;
  for (const r of readOps) {
    if (r.outcome !== "ok") continue;
    r.elements.forEach((element, i) => {
      const k = id(r.key, element);
      const list = adds.get(k) ?? [];
      readAnswersChecked++;
      if (r.present[i] === true) {
        if (!list.some((a) => a.start < r.end)) phantomReads.push({ key: r.key, element, node: r.node, readEnd: r.end });
        return;
      }
      if (!localReads) return;
      const mine = list.find((a) => a.outcome === "ok" && a.node === r.node && a.end < r.start);
      if (mine === undefined) return;
      const removedMeanwhile = (removes.get(k) ?? []).some((x) => x.outcome !== "fail" && x.start < r.end);
      if (!removedMeanwhile) staleReads.push({ key: r.key, element, node: r.node, readStart: r.start, addEnd: mine.end });
    });
  }

  // Divergence: group nodes by their read.
  const groups = new Map<string, string[]>();
  for (const n of readable) {
    const sig = [...present.get(n)!].sort().join("\u0001");
    groups.set(sig, [...(groups.get(sig) ?? []), n]);
  }
  let common: string[] = [];
  for (const g of groups.values()) if (g.length > common.length || (g.length === common.length && g[0]! < common[0]!)) common = g;
  const unreadable = nodes.filter((n) => finals[n] === null);
  const divergentNodes = readable.filter((n) => !common.includes(n));
  const commonSet = common.length > 0 ? present.get(common[0]!)! : new Set<string>();
  const details = divergentNodes.map((n) => {
    const s = present.get(n)!;
    let extra = 0;
    let missing = 0;
    for (const e of s) if (!commonSet.has(e)) extra++;
    for (const e of commonSet) if (!s.has(e)) missing++;
    return { node: n, extra, missing };
  });
  const identical = divergentNodes.length === 0 && unreadable.length === 0 && readable.length > 0;

  let first = Infinity;
  let last = -Infinity;
  for (const o of history) {
    first = Math.min(first, o.start);
    last = Math.max(last, o.end);
  }
  const spanMs = history.length === 0 ? 0 : last - first;
  const okOps = addOps.filter((o) => o.outcome === "ok").length + removeOps.filter((o) => o.outcome === "ok").length;

  return {
    valid: lost.length === 0 && resurrected.length === 0 && ignored.length === 0 && identical && unexpected.length === 0 && staleReads.length === 0 && phantomReads.length === 0,
    ops: { add: counts(addOps), remove: counts(removeOps), read: counts(readOps) },
    elements: { attempted: adds.size, acked: ackedElements, removed: removedElements },
    lost,
    lostCount: lost.length,
    resurrected,
    resurrectedCount: resurrected.length,
    excusedByIndeterminateAdd: excused,
    removesWithoutEffect: removeOps.filter((r) => r.outcome === "ok" && r.removed === 0 && (r.pending ?? 0) === 0).length,
    ignoredRemoves: ignored,
    ignoredRemoveCount: ignored.length,
    divergence: { identical, nodes: divergentNodes.concat(unreadable), unreadable, details },
    unexpected,
    staleReads,
    staleReadCount: staleReads.length,
    phantomReads,
    readAnswersChecked,
    ackedOpsPerSec: spanMs > 0 ? okOps / (spanMs / 1000) : 0,
    spanMs,
  };
}
