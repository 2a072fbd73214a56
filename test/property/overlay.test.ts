// The finger overlay: symmetric links, degree at most 2·ceil(log2 n), connected, every member
// within ceil(log2 n) hops, and after any set of members leaves, the survivors' overlay (each
// recomputed from the surviving membership) is again all of that.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { fingerNeighbours, fingerTopology, overlayNeighbours } from "../../services/gossip/overlay.ts";
import { type Topology, isConnected } from "../../services/gossip/topology.ts";

const ids = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}-${i}`);

/** Longest shortest path (BFS from every node). */
function diameter(t: Topology): number {
  let worst = 0;
  for (const start of t.keys()) {
    const dist = new Map([[start, 0]]);
    const queue = [start];
    for (let q = 0; q < queue.length; q++) {
      const u = queue[q]!;
      for (const v of t.get(u) ?? []) {
        if (!dist.has(v)) {
          dist.set(v, dist.get(u)! + 1);
          queue.push(v);
        }
      }
    }
    worst = Math.max(worst, ...dist.values());
  }
  return worst;
}

function checkOverlay(t: Topology): void {
  const n = t.size;
  const log = Math.ceil(Math.log2(Math.max(2, n)));
  for (const [a, ns] of t) {
    assert.ok(!ns.includes(a), "no self link");
    assert.ok(ns.length <= 2 * log, `degree ${ns.length} of ${n} members`);
    for (const b of ns) assert.ok(t.get(b)!.includes(a), `${a}→${b} without ${b}→${a}`);
  }
  assert.ok(isConnected(t));
  if (n > 1) assert.ok(diameter(t) <= log, `diameter ${diameter(t)} > ${log} at n = ${n}`);
}

describe("finger overlay", () => {
  it("is symmetric, connected, of logarithmic degree and diameter", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), fc.string({ minLength: 1, maxLength: 6 }), (n, tag) => checkOverlay(fingerTopology(ids(n, tag)))),
      { numRuns: 60 },
    );
  });

  it("repairs itself: the survivors of any departures form such an overlay again", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 200 }), fc.array(fc.nat(), { maxLength: 150 }), (n, gone) => {
        const all = ids(n, "m");
        const leave = new Set(gone.map((g) => all[g % n]!));
        const alive = all.filter((m) => !leave.has(m));
        if (alive.length === 0) return;
        checkOverlay(fingerTopology(alive));
      }),
      { numRuns: 60 },
    );
  });

  it("does not depend on the order members are listed in, and includes self or not alike", () => {
    const members = ids(40, "x");
    const a = fingerNeighbours("x-7", members);
    const b = fingerNeighbours("x-7", [...members].reverse().filter((m) => m !== "x-7"));
    assert.deepEqual(a, b);
  });

  it("keeps every member under the all overlay", () => {
    assert.deepEqual(overlayNeighbours("all", "b", ["c", "a", "b"]), ["a", "c"]);
    assert.equal(overlayNeighbours("fingers", "m-0", ids(1000, "m")).length <= 20, true);
  });
});
