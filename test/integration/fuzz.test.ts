// The fuzzer in npm test: 10 000 frames (mutated valid frames and random bytes, peer frames mostly
// signed with the cluster key) to a real node across Replica, Gossip and Membership; the node must
// not crash, stay healthy, keep its control set and counter unchanged, and answer no frame with
// INTERNAL or UNKNOWN nor leave one hanging. The full run is `npm run fuzz` (test/fuzz/main.ts).
import { strict as assert } from "node:assert";
import { it } from "node:test";
import { runFuzz } from "../fuzz/runner.ts";

it("10 000 fuzzed frames: no crash, no corruption, no INTERNAL or UNKNOWN", { timeout: 120_000 }, async () => {
  const r = await runFuzz({ frames: 10_000, maxSeconds: 50, seed: 20_250_613, nodeHost: "127.0.0.215", peerHost: "127.0.0.216" });
  const summary = JSON.stringify({ statusCounts: r.statusCounts, findings: r.findings.slice(0, 5), corruptions: r.corruptionDetails });
  assert.equal(r.crashes, 0, summary);
  assert.equal(r.corruptions, 0, summary);
  assert.equal(r.unhealthyChecks, 0, summary);
  assert.equal(r.internalOrUnknown, 0, summary);
  assert.equal(r.deadlineExceeded, 0, summary);
  assert.ok(r.framesSent >= 10_000 || r.stoppedBy === "time", `${r.framesSent} frames sent`);
  assert.ok(r.framesSent >= 5_000, `only ${r.framesSent} frames sent before the time limit`);
  // The mutants reached the handlers, not only the decoders and the proof check.
  for (const method of ["Replica/Add", "Replica/Merge", "Gossip/Exchange", "Gossip/ExchangeStream", "Gossip/PushState", "Gossip/HandOver", "Membership/Join", "Membership/Ping"]) {
    assert.ok((r.perMethod[method]?.OK ?? 0) > 0, `${method}: ${JSON.stringify(r.perMethod[method])}`);
  }
  assert.ok((r.statusCounts.UNAUTHENTICATED ?? 0) > 0, "unsigned peer frames were refused");
  assert.equal(r.nodeExitCode, 0, "the node drained and exited 0 on SIGTERM after the run");
});
