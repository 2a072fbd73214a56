// A short mixed fault run on a real 3-node cluster whose peer links go through per-link fault
// proxies: a graceful leave and rejoin, latency, partitions and a paused node (mix with seed 19,
// the first seed whose plan holds every kind of step), under a concurrent add/remove workload.
// Fails on any lost acknowledged add, any removed element that came back, or nodes whose final
// reads, or final states (causal contexts included), differ.
import { test } from "node:test";
import assert from "node:assert/strict";
import { runScenario, CHAOS_NODE_ARGS } from "../../services/chaos/run.js";

test("mixed faults on 3 nodes: nothing lost, nothing resurrected, identical final reads and states", { timeout: 90_000 }, async () => {
  const lines: string[] = [];
  const r = await runScenario({
    scenario: "mix",
    nodes: 3,
    faultMs: 18_000,
    clients: 3,
    seed: 19,
    firstHost: 121,
    port: 7070,
    nodeArgs: CHAOS_NODE_ARGS,
    postHealMs: 2000,
    settleBoundMs: 20_000,
    log: (l) => lines.push(l),
  });
  const kinds = new Set<string>(r.plan.steps.map((s) => s.action.kind));
  for (const k of ["leave", "rejoin", "toxic", "cut", "heal-links", "pause", "resume"]) assert.ok(kinds.has(k), `the plan has ${k}`);
  assert.deepEqual(r.steps.filter((s) => s.error !== undefined), [], "every fault step was carried out");
  assert.ok(r.check.ops.add.ok > 50, `the workload made progress (${r.check.ops.add.ok} acknowledged adds)`);
  assert.ok(r.check.ops.remove.ok > 10, "and removed elements");
  const detail = JSON.stringify({ lost: r.check.lost.slice(0, 5), resurrected: r.check.resurrected.slice(0, 5), divergence: r.check.divergence, problems: r.problems, data: r.dataDir, log: lines });
  assert.equal(r.check.lostCount, 0, `lost acknowledged adds: ${detail}`);
  assert.equal(r.check.resurrectedCount, 0, `resurrected elements: ${detail}`);
  assert.equal(r.check.divergence.identical, true, `final reads differ: ${detail}`);
  assert.equal(r.check.unexpected.length, 0);
  assert.notEqual(r.convergenceFromHealMs, null);
  assert.equal(typeof r.statesFromHealMs, "number", `identical states, contexts included: ${detail}`);
  assert.equal(r.valid, true);
});
