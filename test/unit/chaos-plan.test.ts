// Fault plans: deterministic for a seed, inside the fault phase, every fault undone by a later
// step, and no process signals where none are possible.
import { test } from "node:test";
import assert from "node:assert/strict";
import { seededRandom } from "../../services/common/prng.ts";
import { EXTRA_SCENARIOS, SCENARIOS, allLinks, between, planScenario, resolveScenario, type FaultPlan } from "../../services/chaos/plan.js";
import { sumMetric } from "../../services/chaos/gossip-bytes.js";

const NODES = ["n1", "n2", "n3", "n4", "n5"];

/** Replays a plan and checks that every fault is undone before the end, returning the faults seen. */
function replay(plan: FaultPlan, nodes: string[]): Set<string> {
  const kinds = new Set<string>();
  let cut = false;
  let toxics = false;
  const down = new Set<string>();
  const paused = new Set<string>();
  let prev = -1;
  for (const s of plan.steps) {
    assert.ok(s.atMs >= prev, "steps are in time order");
    assert.ok(s.atMs >= 0 && s.atMs <= plan.faultMs, `step at ${s.atMs} inside the fault phase`);
    prev = s.atMs;
    const a = s.action;
    kinds.add(a.kind);
    switch (a.kind) {
      case "cut":
        assert.ok(a.links.length > 0);
        for (const [x, y] of a.links) assert.ok(nodes.includes(x) && nodes.includes(y) && x !== y);
        cut = true;
        break;
      case "toxic":
        assert.ok(a.links.length > 0);
        toxics = true;
        break;
      case "heal-links":
        cut = false;
        toxics = false;
        break;
      case "kill":
      case "leave":
        assert.ok(!down.has(a.node), "one fault per node at a time");
        down.add(a.node);
        break;
      case "restart":
      case "rejoin":
        assert.ok(down.delete(a.node), "restarts a node that is down");
        break;
      case "pause":
        paused.add(a.node);
        break;
      case "resume":
        assert.ok(paused.delete(a.node));
        break;
    }
    assert.ok(down.size + paused.size <= 1, "at most one node away at a time");
  }
  assert.equal(cut, false, "links healed at the end");
  assert.equal(toxics, false, "toxics removed at the end");
  assert.equal(down.size, 0, "every node restarted");
  assert.equal(paused.size, 0, "every node resumed");
  return kinds;
}

test("every scenario plans faults that are all undone, on 3 and 5 nodes", () => {
  for (const name of [...SCENARIOS, ...EXTRA_SCENARIOS]) {
    for (const n of [3, 5]) {
      const nodes = NODES.slice(0, n);
      const plan = planScenario(name, { nodes, faultMs: 30_000, random: seededRandom(7) });
      assert.equal(plan.scenario, name);
      assert.ok(plan.steps.length >= 2, `${name} has steps`);
      replay(plan, nodes);
    }
  }
});

test("the plans do what their names say", () => {
  const p = (name: string, seed = 1) => planScenario(name, { nodes: NODES, faultMs: 20_000, random: seededRandom(seed) });
  const halves = p("partition-halves").steps[0]!.action;
  assert.equal(halves.kind, "cut");
  if (halves.kind === "cut") assert.equal(halves.links.length, 2 * 2 * 3, "2|3 split, both directions");
  const one = p("isolate-one").steps[0]!.action;
  if (one.kind !== "cut") assert.fail("isolate-one cuts");
  else assert.equal(one.links.length, 2 * 4);
  const asym = p("asymmetric-cut").steps[0]!.action;
  if (asym.kind !== "cut") assert.fail("asymmetric-cut cuts");
  else assert.equal(asym.links.length, 1, "one direction only");
  const lat = p("latency").steps[0]!.action;
  if (lat.kind !== "toxic") assert.fail("latency is a toxic");
  else {
    assert.deepEqual(lat.toxic.attributes, { latency: 100, jitter: 50 });
    assert.equal(lat.links.length, 20, "every directed link");
  }
  const bw = p("bandwidth").steps[0]!.action;
  if (bw.kind !== "toxic") assert.fail("bandwidth is a toxic");
  else assert.equal(bw.toxic.attributes.rate, 64);
  assert.ok(p("reset-storm").steps.filter((s) => s.action.kind === "toxic").length >= 5, "reset-storm flaps");
  assert.deepEqual([...replay(p("kill-restart"), NODES)].sort(), ["kill", "restart"]);
  assert.deepEqual([...replay(p("pause-resume"), NODES)].sort(), ["pause", "resume"]);
  assert.deepEqual([...replay(p("churn"), NODES)].sort(), ["leave", "rejoin"]);
  const churned = p("churn").steps.filter((s) => s.action.kind === "leave").map((s) => (s.action as { node: string }).node);
  assert.equal(new Set(churned).size, churned.length, "churn takes different nodes in turn");
});

test("mix is a seeded random sequence", () => {
  const a = planScenario("mix", { nodes: NODES, faultMs: 40_000, random: seededRandom(42) });
  const b = planScenario("mix", { nodes: NODES, faultMs: 40_000, random: seededRandom(42) });
  const c = planScenario("mix", { nodes: NODES, faultMs: 40_000, random: seededRandom(43) });
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  assert.ok(new Set(a.steps.map((s) => s.action.kind)).size >= 3, "several kinds of faults");
  for (let seed = 0; seed < 20; seed++) {
    const ext = planScenario("mix", { nodes: NODES, faultMs: 40_000, random: seededRandom(seed), processFaults: false });
    for (const s of ext.steps) assert.ok(["cut", "toxic", "heal-links"].includes(s.action.kind), "no process signals");
  }
  assert.throws(() => planScenario("kill-restart", { nodes: NODES, faultMs: 10_000, random: seededRandom(1), processFaults: false }), /signals node processes/);
  assert.throws(() => planScenario("nope", { nodes: NODES, faultMs: 10_000, random: seededRandom(1) }), /unknown scenario/);
});

test("scenario names, aliases and link helpers", () => {
  assert.equal(resolveScenario("partition-one"), "isolate-one");
  assert.equal(resolveScenario("latency-jitter"), "latency");
  assert.equal(resolveScenario("mix"), "mix");
  assert.equal(resolveScenario("bogus"), undefined);
  assert.equal(allLinks(["a", "b", "c"]).length, 6);
  assert.deepEqual(between(["a"], ["b"]), [["a", "b"], ["b", "a"]]);
});

test("gossip bytes are summed from a Prometheus exposition", () => {
  const text = [
    "# HELP deltaset_gossip_sent_bytes_total Anti-entropy payload bytes sent",
    "# TYPE deltaset_gossip_sent_bytes_total counter",
    'deltaset_gossip_sent_bytes_total{kind="delta"} 100',
    'deltaset_gossip_sent_bytes_total{kind="state"} 2000',
    'deltaset_gossip_sent_bytes_total{kind="ack"} 5',
    'deltaset_gossip_sent_bytes_total_other{kind="ack"} 7',
    'deltaset_gossip_received_bytes_total{kind="delta"} 9',
  ].join("\n");
  assert.equal(sumMetric(text, "deltaset_gossip_sent_bytes_total"), 2105);
  assert.equal(sumMetric(text, "deltaset_missing_total"), undefined);
});
