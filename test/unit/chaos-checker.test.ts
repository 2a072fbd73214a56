// The chaos checker: it must find a lost acknowledged add, a removed element that came back and
// a divergent node when they are there, and report a correct history as clean. A property test
// runs random histories of a correct (single-copy) set through it, then breaks the final reads.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { checkHistory, contextCovers } from "../../services/chaos/checker.js";
import type { AddOp, ContextRanges, FinalReads, Op, ReadOp, RemoveOp } from "../../services/chaos/history.js";

let index = 0;
function add(element: string, dot: string | null, start: number, end: number, outcome: AddOp["outcome"] = "ok", node = "n1"): AddOp {
  return { kind: "add", index: index++, client: "c1", node, key: "k", element, start, end, outcome, dots: dot === null ? [] : [dot] };
}
function remove(element: string, context: ContextRanges, start: number, end: number, removed: number | null = 1, outcome: RemoveOp["outcome"] = "ok"): RemoveOp {
  return { kind: "remove", index: index++, client: "c1", node: "n2", key: "k", element, start, end, outcome, context, removed: outcome === "ok" ? removed : null, readNode: "n1" };
}
function read(elements: string[], present: boolean[], start: number): ReadOp {
  return { kind: "read", index: index++, client: "c1", node: "n1", key: "k", start, end: start + 1, outcome: "ok", elements, present };
}
const same = (elements: string[], nodes = ["n1", "n2", "n3"]): FinalReads => Object.fromEntries(nodes.map((n) => [n, { k: [...elements] }]));

test("contextCovers reads replica ranges", () => {
  const ctx: ContextRanges = { n1: [[1, 5], [8, 8]], "a:b": [[2, 3]] };
  assert.equal(contextCovers(ctx, "n1:1"), true);
  assert.equal(contextCovers(ctx, "n1:5"), true);
  assert.equal(contextCovers(ctx, "n1:6"), false);
  assert.equal(contextCovers(ctx, "n1:8"), true);
  assert.equal(contextCovers(ctx, "n2:1"), false);
  assert.equal(contextCovers(ctx, "a:b:3"), true);
});

test("a clean history is reported clean", () => {
  const h: Op[] = [
    add("a", "n1:1", 0, 10),
    add("b", "n1:2", 5, 15),
    read(["a"], [true], 20),
    remove("a", { n1: [[1, 2]] }, 22, 30),
    add("c", "n2:1", 40, 50, "ok", "n2"),
  ];
  const r = checkHistory(h, same(["b", "c"]));
  assert.equal(r.valid, true);
  assert.equal(r.lostCount, 0);
  assert.equal(r.resurrectedCount, 0);
  assert.deepEqual(r.divergence.nodes, []);
  assert.equal(r.divergence.identical, true);
  assert.deepEqual(r.ops.add, { ok: 3, fail: 0, info: 0 });
  assert.deepEqual(r.elements, { attempted: 3, acked: 3, removed: 1 });
  assert.ok(r.ackedOpsPerSec > 0);
});

test("a known lost write, a known resurrection and a divergent node are all reported", () => {
  const h: Op[] = [
    add("lost", "n1:1", 0, 10), // acknowledged, never removed, absent everywhere
    add("back", "n1:2", 0, 10),
    read(["back"], [true], 20),
    remove("back", { n1: [[1, 2]] }, 21, 25, 1), // reported removed, context covered its dot
    add("kept", "n2:1", 30, 40, "ok", "n2"),
  ];
  const finals: FinalReads = { n1: { k: ["back", "kept"] }, n2: { k: ["back", "kept"] }, n3: { k: ["back"] } };
  const r = checkHistory(h, finals);
  assert.equal(r.valid, false);
  assert.equal(r.lostCount, 2, "lost everywhere, and 'kept' lost on n3");
  const lost = r.lost.find((l) => l.element === "lost")!;
  assert.deepEqual(lost.missingOn, ["n1", "n2", "n3"]);
  assert.deepEqual(r.lost.find((l) => l.element === "kept")!.missingOn, ["n3"]);
  assert.equal(r.resurrectedCount, 1);
  assert.equal(r.resurrected[0]!.element, "back");
  assert.deepEqual(r.resurrected[0]!.presentOn, ["n1", "n2", "n3"]);
  assert.deepEqual(r.divergence.nodes, ["n3"]);
  assert.deepEqual(r.divergence.details, [{ node: "n3", extra: 0, missing: 1 }]);
});

test("an absent element is explained only by a remove whose context covered its dot", () => {
  // Indeterminate remove with a covering context: it may have happened.
  let r = checkHistory([add("a", "n1:3", 0, 10), remove("a", { n1: [[1, 3]] }, 20, 30, null, "info")], same([]));
  assert.equal(r.lostCount, 0);
  // Acknowledged remove whose context did not see the dot: it cannot have removed it.
  r = checkHistory([add("a", "n1:3", 0, 10), remove("a", { n1: [[1, 2]] }, 20, 30, 1)], same([]));
  assert.equal(r.lostCount, 1);
  // A remove that definitely failed explains nothing.
  r = checkHistory([add("a", "n1:3", 0, 10), remove("a", { n1: [[1, 3]] }, 20, 30, null, "fail")], same([]));
  assert.equal(r.lostCount, 1);
  // An indeterminate add that is absent is not lost (it may never have happened).
  r = checkHistory([add("a", null, 0, 10, "info")], same([]));
  assert.equal(r.lostCount, 0);
  assert.equal(r.valid, true);
});

test("presence after a remove is excused by adds the remove did not cover", () => {
  // A retried add acknowledged after the remove: its dot is outside the remove's context.
  let r = checkHistory([add("a", "n1:1", 0, 10), remove("a", { n1: [[1, 1]] }, 20, 30, 1), add("a", "n2:1", 40, 50, "ok", "n2")], same(["a"]));
  assert.equal(r.resurrectedCount, 0);
  assert.equal(r.valid, true);
  // An indeterminate add may take effect at any time (add wins).
  r = checkHistory([add("a", null, 0, 1000, "info"), add("a", "n1:1", 5, 10), remove("a", { n1: [[1, 1]] }, 20, 30, 1)], same(["a"]));
  assert.equal(r.resurrectedCount, 0);
  assert.equal(r.excusedByIndeterminateAdd, 1);
});

test("a remove that answered removed = 0 although its context covered the element is reported", () => {
  // The element was never gone (not a resurrection), but the remove ignored what its context saw.
  let r = checkHistory([add("a", "n1:1", 0, 10), remove("a", { n1: [[1, 1]] }, 20, 30, 0)], same(["a"]));
  assert.equal(r.resurrectedCount, 0);
  assert.equal(r.removesWithoutEffect, 1);
  assert.equal(r.ignoredRemoveCount, 1);
  assert.equal(r.ignoredRemoves[0]!.element, "a");
  assert.equal(r.valid, false);
  // Its context did not cover the add: add wins, nothing to report.
  r = checkHistory([add("a", "n1:2", 0, 10), remove("a", { n1: [[1, 1]] }, 20, 30, 0)], same(["a"]));
  assert.equal(r.ignoredRemoveCount, 0);
  assert.equal(r.valid, true);
  // Repeated where it took effect: the element is gone, nothing to report.
  r = checkHistory([add("a", "n1:1", 0, 10), remove("a", { n1: [[1, 1]] }, 20, 30, 0), remove("a", { n1: [[1, 1]] }, 31, 35, 1)], same([]));
  assert.equal(r.ignoredRemoveCount, 0);
  assert.equal(r.removesWithoutEffect, 1);
  assert.equal(r.valid, true);
});

test("unreadable nodes and elements nobody added make a run invalid", () => {
  let r = checkHistory([add("a", "n1:1", 0, 10)], { n1: { k: ["a"] }, n2: null });
  assert.equal(r.valid, false);
  assert.deepEqual(r.divergence.unreadable, ["n2"]);
  assert.deepEqual(r.divergence.nodes, ["n2"]);
  r = checkHistory([add("a", "n1:1", 0, 10)], same(["a", "ghost"]));
  assert.equal(r.valid, false);
  assert.equal(r.unexpected.length, 3);
});

test("a read that misses an add its own node acknowledged before it, or sees one never added, is reported", () => {
  // n1 acknowledged "a" at 10; a read at n1 from 20 says absent, with no remove anywhere: stale.
  let r = checkHistory([add("a", "n1:1", 0, 10), read(["a"], [false], 20)], same(["a"]));
  assert.equal(r.staleReadCount, 1);
  assert.deepEqual(r.staleReads[0], { key: "k", element: "a", node: "n1", readStart: 20, addEnd: 10 });
  assert.equal(r.valid, false);
  // The same answer at another node may lag: not stale.
  r = checkHistory([add("a", "n2:1", 0, 10, "ok", "n2"), read(["a"], [false], 20)], same(["a"]));
  assert.equal(r.staleReadCount, 0);
  assert.equal(r.valid, true);
  // A read that began before the add was acknowledged may miss it.
  r = checkHistory([add("a", "n1:1", 0, 25), read(["a"], [false], 20)], same(["a"]));
  assert.equal(r.staleReadCount, 0);
  // A remove invoked before the read ended (anywhere, even one that was not acknowledged) may explain it.
  r = checkHistory([add("a", "n1:1", 0, 10), remove("a", { n1: [[1, 1]] }, 15, 40, null, "info"), read(["a"], [false], 20)], same([]));
  assert.equal(r.staleReadCount, 0);
  // Present although no add of it was invoked before the read ended: phantom.
  r = checkHistory([read(["b"], [true], 20), add("b", "n1:1", 30, 40)], same(["b"]));
  assert.equal(r.phantomReads.length, 1);
  assert.equal(r.valid, false);
  assert.equal(r.readAnswersChecked, 1);
});

// ---- property: histories of a correct single-copy set check out; broken final reads do not

type Step = { kind: "add" } | { kind: "remove"; pick: number } | { kind: "timeout"; applied: boolean };

function simulate(steps: Step[]): { history: Op[]; final: string[]; ackedLive: string[]; removedForSure: string[] } {
  const live = new Map<string, number>(); // element → dot counter
  let counter = 0;
  let t = 0;
  let n = 0;
  const history: Op[] = [];
  const removedForSure: string[] = [];
  for (const s of steps) {
    t += 10;
    if (s.kind === "add" || s.kind === "timeout") {
      const e = `e${++n}`;
      const applied = s.kind === "add" || s.applied;
      if (applied) live.set(e, ++counter);
      history.push({
        kind: "add", index: history.length, client: "c", node: "n1", key: "k", element: e, start: t, end: t + 5,
        outcome: s.kind === "add" ? "ok" : "info", dots: s.kind === "add" ? [`r:${counter}`] : [],
      });
    } else {
      const elements = [...live.keys()];
      if (elements.length === 0) continue;
      const e = elements[s.pick % elements.length]!;
      const ctx: ContextRanges = { r: [[1, counter]] };
      history.push({ kind: "read", index: history.length, client: "c", node: "n1", key: "k", start: t, end: t + 1, outcome: "ok", elements: [e], present: [true] });
      live.delete(e);
      // Present again after this would be a resurrection (unless an indeterminate add explains it).
      if (history.some((o) => o.kind === "add" && o.element === e && o.outcome === "ok")) removedForSure.push(e);
      history.push({ kind: "remove", index: history.length, client: "c", node: "n1", key: "k", element: e, start: t + 2, end: t + 5, outcome: "ok", context: ctx, removed: 1, readNode: "n1" });
    }
  }
  const ackedLive = [...live.keys()].filter((e) => history.some((o) => o.kind === "add" && o.element === e && o.outcome === "ok"));
  return { history, final: [...live.keys()].sort(), ackedLive, removedForSure };
}

const steps = fc.array(
  fc.oneof(
    fc.constant<Step>({ kind: "add" }),
    fc.nat(100).map((pick): Step => ({ kind: "remove", pick })),
    fc.boolean().map((applied): Step => ({ kind: "timeout", applied })),
  ),
  { minLength: 1, maxLength: 60 },
);

test("property: a correct execution checks out, and dropping or resurrecting an element does not", () => {
  fc.assert(
    fc.property(steps, fc.nat(1000), (s, which) => {
      const { history, final, ackedLive, removedForSure } = simulate(s);
      const clean = checkHistory(history, same(final));
      assert.equal(clean.valid, true, JSON.stringify(clean.lost.concat(clean.resurrected as never)));
      // A read that answers absent for an element the same node acknowledged before it: stale.
      const reads = history.filter((o): o is ReadOp => o.kind === "read");
      if (reads.length > 0) {
        const target = reads[which % reads.length]!;
        const hidden = history.map((o) => (o === target ? { ...target, present: target.present.map(() => false) } : o));
        const stale = checkHistory(hidden, same(final));
        const ackedBefore = history.some((o) => o.kind === "add" && o.outcome === "ok" && o.element === target.elements[0] && o.end < target.start);
        assert.equal(stale.staleReadCount, ackedBefore ? 1 : 0);
      }
      if (ackedLive.length > 0) {
        const victim = ackedLive[which % ackedLive.length]!;
        const broken = checkHistory(history, same(final.filter((e) => e !== victim)));
        assert.equal(broken.lostCount, 1);
        const oneNode = checkHistory(history, { ...same(final, ["n1", "n2"]), n3: { k: final.filter((e) => e !== victim) } });
        assert.deepEqual(oneNode.divergence.nodes, ["n3"]);
      }
      if (removedForSure.length > 0) {
        const ghost = removedForSure[which % removedForSure.length]!;
        const back = checkHistory(history, same([...final, ghost]));
        assert.equal(back.resurrectedCount, 1);
        assert.equal(back.valid, false);
      }
    }),
    { numRuns: 200 },
  );
});

test("a remove deferred at a lagging node counts as effective: the element must be gone at the end", () => {
  const deferred = (element: string): RemoveOp => ({ ...remove(element, { n1: [[1, 2]] }, 21, 25, 0), pending: 1 });
  const h: Op[] = [add("x", "n1:1", 0, 10), add("y", "n1:2", 0, 10), read(["x", "y"], [true, true], 20), deferred("x"), deferred("y")];
  const clean = checkHistory(h, same([]));
  assert.equal(clean.valid, true);
  assert.equal(clean.removesWithoutEffect, 0);
  assert.deepEqual(clean.elements, { attempted: 2, acked: 2, removed: 2 });
  // Still present everywhere: a deferred remove that was never applied is a resurrection.
  const r = checkHistory(h, same(["x"]));
  assert.equal(r.resurrectedCount, 1);
  assert.equal(r.resurrected[0]!.element, "x");
  assert.equal(r.ignoredRemoveCount, 0);
});
