// deploy/kind/run-eval.sh, run offline against stand-ins for docker, kind, kubectl and npx: it
// deploys the chaos overlay, puts the StatefulSet in each sync mode through the environment that
// `deltaset chaos eval-env` prints, forwards every pod's gRPC, Toxiproxy API and metrics ports, runs
// one eval-cell per (latency, loss) with the forwarded addresses, and stops its forwards.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { alive, calls, cleanup, env, forwardPids, freeBasePort, sandbox } from "../helpers/kind-sandbox.ts";

const SCRIPT = join(import.meta.dirname, "..", "..", "deploy", "kind", "run-eval.sh");
// eval-env prints a mode's variables; a cell with "--loss-share 0.5" fails.
const NPX = `case " $* " in
  *" eval-env "*) echo "DELTASET_GOSSIP_ALGORITHM=alg2"; echo "DELTASET_GOSSIP_MODE_OF=$4" ;;
  *" --loss-share 0.5 "*) exit 1 ;;
esac
exit 0`;

test("run-eval.sh: bash strict mode, valid syntax, shared helpers", () => {
  const text = readFileSync(SCRIPT, "utf8");
  assert.match(text, /^#!\/usr\/bin\/env bash\n/);
  assert.match(text, /^set -euo pipefail$/m);
  assert.match(text, /source "\$repo_root\/deploy\/kind\/common\.sh"/);
  assert.equal(spawnSync("bash", ["-n", SCRIPT]).status, 0);
});

test("run-eval.sh: each mode set through the environment, every cell run with the forwarded ports", async () => {
  const s = sandbox(undefined, NPX);
  const base = await freeBasePort(6);
  try {
    const r = spawnSync("bash", [SCRIPT], {
      env: env(s, { BASE_PORT: String(base), SKIP_BUILD: "1", MODES: "alg2 alg2+bp+rr", LATENCIES: "0:0 50:10", LOSSES: "0" }),
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const log = calls(s);
    assert.ok(log.includes("kubectl --context kind-deltaset apply -k k8s/overlays/chaos"), log.join("\n"));
    for (const mode of ["alg2", "alg2+bp+rr"]) {
      // Membership timing for the largest latency of the run (50 ± 10 ms).
      assert.ok(log.includes(`npx deltaset chaos eval-env ${mode} --latency-ms 50 --jitter-ms 10`), log.join("\n"));
      assert.ok(
        log.includes(`kubectl --context kind-deltaset -n deltaset set env statefulset/deltaset DELTASET_GOSSIP_INTERVAL_MS=100 DELTASET_GOSSIP_PUSH_LOCAL_MS=0 DELTASET_GOSSIP_CHOOSE=delta+periodic-state DELTASET_GOSSIP_ALGORITHM=alg2 DELTASET_GOSSIP_MODE_OF=${mode}`),
        log.join("\n"),
      );
    }
    assert.ok(log.includes(`kubectl --context kind-deltaset -n deltaset port-forward --address 127.0.0.1 pod/deltaset-0 ${base}:7070 ${base + 1}:8474 ${base + 2}:9464`));
    assert.ok(log.includes(`kubectl --context kind-deltaset -n deltaset port-forward --address 127.0.0.1 pod/deltaset-1 ${base + 3}:7070 ${base + 4}:8474 ${base + 5}:9464`));
    const cells = log.filter((c) => c.includes("chaos eval-cell"));
    assert.equal(cells.length, 4);
    const nodes = `127.0.0.1:${base},127.0.0.1:${base + 3}`;
    const proxies = `http://127.0.0.1:${base + 1},http://127.0.0.1:${base + 4}`;
    const metrics = `127.0.0.1:${base + 2},127.0.0.1:${base + 5}`;
    assert.equal(
      cells[1],
      `npx deltaset chaos eval-cell --nodes-addrs ${nodes} --toxiproxy ${proxies} --metrics ${metrics} --mode alg2 --latency-ms 50 --jitter-ms 10 --loss-share 0 --rounds 2 --gossip-interval-ms 100 --seed 2 --warm-up-ms 0 --out ${s.results}/cell-alg2-lat50-loss0.json`,
    );
    // The first cell after each mode's rollout warms the fresh pods up; the others do not.
    assert.deepEqual(
      cells.map((c) => /--warm-up-ms (\d+)/.exec(c)?.[1]),
      ["5000", "0", "5000", "0"],
    );
    // One set of forwards per mode, all stopped at the end.
    assert.equal(forwardPids(s).length, 4);
    assert.deepEqual(forwardPids(s).filter(alive), []);
  } finally {
    cleanup(s);
  }
});

test("run-eval.sh: a failed cell fails the run after the others ran", async () => {
  const s = sandbox(undefined, NPX);
  const base = await freeBasePort(6);
  try {
    const r = spawnSync("bash", [SCRIPT], { env: env(s, { BASE_PORT: String(base), SKIP_BUILD: "1", MODES: "alg2", LATENCIES: "0:0", LOSSES: "0.5 0" }), encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /cells that failed or lost writes: alg2\/0:0\/0\.5/);
    assert.equal(calls(s).filter((c) => c.includes("chaos eval-cell")).length, 2);
    assert.deepEqual(forwardPids(s).filter(alive), []);
  } finally {
    cleanup(s);
  }
});
