// Convergence of the add-wins set under a hostile network.
//
// 3 to 8 replicas add and remove elements (removes sometimes carry the context of an earlier read,
// possibly at another replica) and ship deltas and full states through a network that reorders,
// duplicates and drops messages; fast-check picks the schedule. After a final full exchange all
// replicas must be equal, and their elements must match a reference computed without the kernel:
//
//   Every add creates a fresh tag. A remove of e at replica r "observes" the tags of e that r holds
//   (restricted to the tags the supplied read had seen, if any); an add of e at r observes the tags
//   of e that r holds (it supersedes them). An element is in the final set iff some add of it has a
//   tag that no operation observed.
//
// "The tags r holds" comes from a naive model of every replica (plain Maps and Sets of tags) that
// receives the same messages as the kernel. After every step the kernel replica and its model
// must also show the same elements.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import fc from "fast-check";
import { AWSet, AWSetLattice, type CausalContext } from "../../services/crdt/index.js";
import { ELEMENT_DOMAIN, RUNS, el } from "./universe.js";

// ---------------------------------------------------------------- naive model

interface ModelState {
  live: Map<string, number>; // tag → element
  seen: Set<string>; // tags known (live or removed)
}

const emptyModel = (): ModelState => ({ live: new Map(), seen: new Set() });
const cloneModel = (m: ModelState): ModelState => ({ live: new Map(m.live), seen: new Set(m.seen) });

/** Observed-remove join on sets of tags. */
function modelJoin(into: ModelState, other: ModelState): void {
  for (const tag of [...into.live.keys()]) if (!other.live.has(tag) && other.seen.has(tag)) into.live.delete(tag);
  for (const [tag, e] of other.live) if (!into.seen.has(tag)) into.live.set(tag, e);
  for (const tag of other.seen) into.seen.add(tag);
}

const modelElements = (m: ModelState) => [...new Set(m.live.values())].sort((a, b) => a - b);
const kernelElements = (s: AWSet) => s.elements().map((b) => b[0]!);

// ---------------------------------------------------------------- schedule

type Cmd =
  | { t: "add"; r: number; e: number }
  | { t: "remove"; r: number; e: number; read: number | null }
  | { t: "read"; r: number }
  | { t: "deliver"; m: number; dup: boolean }
  | { t: "drop"; m: number }
  | { t: "ship"; from: number; to: number };

const i = fc.nat({ max: 1000 });
const e = fc.integer({ min: 0, max: ELEMENT_DOMAIN - 1 });
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant("add" as const), r: i, e }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant("remove" as const), r: i, e, read: fc.option(i) }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant("read" as const), r: i }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant("deliver" as const), m: i, dup: fc.boolean() }), weight: 6 },
  { arbitrary: fc.record({ t: fc.constant("drop" as const), m: i }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant("ship" as const), from: i, to: i }), weight: 1 },
);
const scenario = fc.record({
  n: fc.integer({ min: 3, max: 8 }),
  cmds: fc.array(cmd, { minLength: 1, maxLength: 80, size: "max" }),
});

interface Message {
  to: number;
  state: AWSet;
  model: ModelState;
}

function simulate({ n, cmds }: { n: number; cmds: Cmd[] }): void {
  const ids = Array.from({ length: n }, (_, k) => `r${k}`);
  const replicas = ids.map(() => AWSet.bottom());
  const models = ids.map(emptyModel);
  const reads: Array<{ ctx: CausalContext; seen: Set<string> }> = [];
  let inFlight: Message[] = [];
  const adds = new Map<string, number>(); // every tag ever minted → its element
  const observed = new Set<string>(); // every tag some operation observed
  const tagCounter = ids.map(() => 0);

  const broadcast = (from: number, delta: AWSet, model: ModelState) => {
    for (let to = 0; to < n; to++) if (to !== from) inFlight.push({ to, state: delta, model });
  };

  for (const c of cmds) {
    switch (c.t) {
      case "add": {
        const r = c.r % n;
        const delta = replicas[r]!.addDelta(ids[r]!, [el(c.e)]);
        replicas[r]!.joinInPlace(delta);
        const tag = `${ids[r]}#${++tagCounter[r]!}`;
        adds.set(tag, c.e);
        const superseded = [...models[r]!.live].filter(([, x]) => x === c.e).map(([t]) => t);
        for (const t of superseded) observed.add(t);
        const md: ModelState = { live: new Map([[tag, c.e]]), seen: new Set([tag, ...superseded]) };
        modelJoin(models[r]!, md);
        broadcast(r, delta, md);
        break;
      }
      case "remove": {
        const r = c.r % n;
        const read = c.read === null || reads.length === 0 ? undefined : reads[c.read % reads.length];
        const delta = replicas[r]!.removeDelta([el(c.e)], read?.ctx);
        replicas[r]!.joinInPlace(delta);
        const seen = [...models[r]!.live]
          .filter(([t, x]) => x === c.e && (read === undefined || read.seen.has(t)))
          .map(([t]) => t);
        for (const t of seen) observed.add(t);
        const md: ModelState = { live: new Map(), seen: new Set(seen) };
        modelJoin(models[r]!, md);
        broadcast(r, delta, md);
        break;
      }
      case "read": {
        const r = c.r % n;
        reads.push({ ctx: replicas[r]!.ctx.clone(), seen: new Set(models[r]!.seen) });
        break;
      }
      case "deliver": {
        if (inFlight.length === 0) break;
        const k = c.m % inFlight.length;
        const msg = inFlight[k]!;
        if (!c.dup) inFlight = inFlight.filter((_, x) => x !== k);
        replicas[msg.to]!.joinInPlace(msg.state);
        modelJoin(models[msg.to]!, msg.model);
        break;
      }
      case "drop":
        if (inFlight.length > 0) inFlight = inFlight.filter((_, x) => x !== c.m % inFlight.length);
        break;
      case "ship": {
        const from = c.from % n;
        const to = c.to % n;
        inFlight.push({ to, state: replicas[from]!.clone(), model: cloneModel(models[from]!) });
        break;
      }
    }
    for (let r = 0; r < n; r++) {
      assert.deepEqual(kernelElements(replicas[r]!), modelElements(models[r]!), `replica ${r} after ${JSON.stringify(c)}`);
    }
  }

  // Full exchange: every replica joins every other replica's full state.
  const finalStates = replicas.map((s) => s.clone());
  for (const s of replicas) for (const o of finalStates) s.joinInPlace(o);
  for (const m of models) for (const o of models.map(cloneModel)) modelJoin(m, o);

  const reference = [...new Set([...adds].filter(([t]) => !observed.has(t)).map(([, x]) => x))].sort((a, b) => a - b);
  for (let r = 0; r < n; r++) {
    assert.ok(AWSetLattice.equals(replicas[r]!, replicas[0]!), `replica ${r} differs from replica 0`);
    assert.deepEqual(kernelElements(replicas[r]!), reference);
    assert.deepEqual(modelElements(models[r]!), reference, "the model itself agrees with the reference");
  }
  // The converged state holds exactly one dot per unobserved add tag.
  assert.equal(replicas[0]!.dotCount(), [...adds.keys()].filter((t) => !observed.has(t)).length);
}

describe("AWSET convergence under reordering, duplication and loss", () => {
  it("all replicas converge to the add-wins reference after a full exchange", () =>
    fc.assert(fc.property(scenario, simulate), { numRuns: RUNS }));
});
