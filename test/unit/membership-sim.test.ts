// The real membership core, many nodes in one process, on a simulated network with seeded loss and
// delay and a virtual clock, under the three churn models of seed 000 (shared/notes/seed-000.md
// section 6.1). The benchmark (test/bench/membership.bench.ts) runs the full-size version.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { scheduleChurn, type ChurnModel } from "../../services/membership/churn.ts";
import { detectionBoundMs, resolveConfig } from "../../services/membership/config.ts";
import { seededRandom } from "../../services/common/prng.ts";
import { SimulationObserver, quantile } from "../../services/membership/sim-observer.ts";
import { MembershipSimulation } from "../../services/membership/simulator.ts";

function formed(n: number, seed: number, lossRate: number) {
  const sim = new MembershipSimulation({ seed, lossRate });
  for (let i = 0; i < n; i++) {
    sim.addNode();
    sim.run(50);
  }
  const agreed = sim.runUntilAgreement(sim.now + 60_000);
  assert.ok(agreed !== undefined, `${n} nodes form one cluster`);
  return sim;
}

describe("membership simulation", () => {
  it("static, 100 nodes, 10% message loss: no live node is declared dead", () => {
    const sim = formed(100, 1, 0.1);
    const observer = new SimulationObserver(sim);
    sim.run(120_000);
    assert.equal(observer.count("dead"), 0, "false deaths");
    assert.equal(observer.count("left"), 0);
    // Loss does cause suspicions; every one of them must have been refuted.
    assert.ok(observer.distinct("suspect") > 0, "10% loss does cause some suspicions");
    assert.ok(sim.runUntilAgreement(sim.now + 30_000) !== undefined, "views agree");
    for (const id of sim.runningIds()) assert.equal(sim.core(id).members().length, 100);
  });

  it("detects a silent node at 10 nodes with default settings within 5 s", () => {
    const sim = formed(10, 2, 0);
    const observer = new SimulationObserver(sim);
    const detections: number[] = [];
    for (let trial = 0; trial < 40; trial++) {
      sim.run(3000 + sim.random() * 2000);
      const ids = sim.runningIds();
      sim.crash(ids[Math.floor(sim.random() * ids.length)]!);
      const record = observer.departures.at(-1)!;
      assert.ok(sim.runUntil(sim.now + 60_000, () => record.settledAt !== undefined), "the crash is settled");
      detections.push(record.detectedAt! - record.at);
      sim.restart(record.nodeId);
      assert.ok(sim.runUntilAgreement(sim.now + 30_000) !== undefined, "the restarted node is back everywhere");
    }
    assert.equal(observer.count("dead"), 0, "no false deaths through 40 restarts");
    assert.ok(quantile(detections, 0.5) <= 2500, `median detection ${quantile(detections, 0.5)} ms`);
    assert.ok(quantile(detections, 0.95) <= 5000, `95th percentile detection ${quantile(detections, 0.95)} ms`);
    const bound = detectionBoundMs(resolveConfig(), 10);
    assert.ok(Math.max(...detections) <= bound, `every detection within the round-robin bound ${bound} ms`);
  });

  for (const model of ["intermediate", "dynamic"] as ChurnModel[]) {
    it(`${model} churn, 50 nodes, 10% loss: no false deaths, and views agree soon after churn stops`, () => {
      const sim = formed(50, 3, 0.1);
      const observer = new SimulationObserver(sim);
      // Steps of 100 ms: intermediate replaces a node every 10 s on average, dynamic has one
      // departure and one (re)join per second.
      const counts = scheduleChurn(sim, { model, stepMs: 100, steps: 600, churnRate: model === "intermediate" ? 0.01 : undefined }, seededRandom(9));
      sim.run(60_000);
      if (model === "dynamic") {
        assert.ok(counts.crashes + counts.leaves > 20 && counts.rejoins > 10, `real churn happened: ${JSON.stringify(counts)}`);
      } else {
        assert.ok(counts.fresh > 0, `real churn happened: ${JSON.stringify(counts)}`);
      }
      const stoppedAt = sim.now;
      const agreedAt = sim.runUntilAgreement(stoppedAt + 60_000);
      assert.ok(agreedAt !== undefined, "views agree within 60 s of virtual time after churn stops");
      sim.run(200); // the observer samples departures every 100 ms
      assert.equal(observer.count("dead"), 0, "false deaths");
      assert.equal(observer.count("left"), 0, "false leaves");
      assert.equal(observer.unsettled().length, 0, "every departure is DEAD or LEFT everywhere");
      const leaves = observer.settled("leave").map((d) => d.settledAt! - d.at);
      if (leaves.length > 0) assert.ok(quantile(leaves, 0.5) <= 5000, "a graceful leave is LEFT everywhere within seconds");
    });
  }
});
