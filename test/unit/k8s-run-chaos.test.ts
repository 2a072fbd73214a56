// deploy/kind/run-chaos.sh, run offline against stand-ins for docker, kind, kubectl and npx:
// it checks its tools, deploys the chaos overlay, forwards every pod's ports, runs each scenario
// with the forwarded addresses, and stops its port-forwards on every exit path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { alive, calls, cleanup, env, forwardPids, freeBasePort, sandbox } from "../helpers/kind-sandbox.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const SCRIPT = join(ROOT, "deploy", "kind", "run-chaos.sh");

test("run-chaos.sh: bash strict mode, valid syntax", () => {
  const text = readFileSync(SCRIPT, "utf8");
  assert.match(text, /^#!\/usr\/bin\/env bash\n/);
  assert.match(text, /^set -euo pipefail$/m);
  assert.equal(spawnSync("bash", ["-n", SCRIPT]).status, 0);
});

test("run-chaos.sh: a missing tool stops it with a clear message", () => {
  const s = sandbox(["docker", "kubectl", "npx"]);
  try {
    const r = spawnSync("bash", [SCRIPT], { env: env(s, {}), encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /'kind' not found in PATH\. Install kind: https:\/\/kind\.sigs\.k8s\.io/);
    assert.deepEqual(calls(s).filter((c) => !c.startsWith("docker info")), [], "nothing ran before the check");
  } finally {
    cleanup(s);
  }
});

test("run-chaos.sh: builds, deploys, forwards every pod and runs each scenario", async () => {
  const s = sandbox();
  const base = await freeBasePort();
  try {
    const r = spawnSync("bash", [SCRIPT, "partition-one", "latency-jitter"], { env: env(s, { BASE_PORT: String(base) }), encoding: "utf8", timeout: 45_000 });
    assert.equal(r.status, 0, r.stderr);
    const log = calls(s);
    assert.ok(log.includes("docker build -f deploy/Dockerfile -t deltaset:dev ."), log.join("\n"));
    assert.ok(log.includes("kind load docker-image deltaset:dev --name deltaset"));
    assert.ok(log.includes("kubectl --context kind-deltaset apply -k k8s/overlays/chaos"));
    // The cluster key Secret is looked for before the nodes are deployed (the stand-in has it).
    assert.ok(log.indexOf("kubectl --context kind-deltaset -n deltaset get secret deltaset-cluster-key") < log.indexOf("kubectl --context kind-deltaset apply -k k8s/overlays/chaos"));
    assert.ok(log.includes("kubectl --context kind-deltaset -n deltaset get secret deltaset-cluster-key"));
    assert.ok(log.includes("kubectl --context kind-deltaset -n deltaset rollout status statefulset/deltaset --timeout=300s"));
    // Pods in name order: deltaset-0 gets the first pair of ports.
    assert.ok(log.includes(`kubectl --context kind-deltaset -n deltaset port-forward --address 127.0.0.1 pod/deltaset-0 ${base}:7070 ${base + 1}:8474`));
    assert.ok(log.includes(`kubectl --context kind-deltaset -n deltaset port-forward --address 127.0.0.1 pod/deltaset-1 ${base + 2}:7070 ${base + 3}:8474`));
    const nodes = `127.0.0.1:${base},127.0.0.1:${base + 2}`;
    const proxies = `http://127.0.0.1:${base + 1},http://127.0.0.1:${base + 3}`;
    assert.deepEqual(
      log.filter((c) => c.startsWith("npx ")),
      ["partition-one", "latency-jitter"].map((sc) => `npx deltaset chaos run ${sc} --external --nodes ${nodes} --toxiproxy ${proxies} --out ${s.results}`),
    );
    // Fresh forwards per scenario, all stopped by the time the script exits.
    const pids = forwardPids(s);
    assert.equal(pids.length, 4);
    assert.deepEqual(pids.filter(alive), []);
  } finally {
    cleanup(s);
  }
});

test("run-chaos.sh: a failed scenario fails the run after the others ran", async () => {
  const s = sandbox();
  const base = await freeBasePort();
  try {
    const r = spawnSync("bash", [SCRIPT, "bad", "partition-one"], { env: env(s, { BASE_PORT: String(base), SKIP_BUILD: "1" }), encoding: "utf8", timeout: 45_000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /failed scenarios: bad/);
    assert.equal(calls(s).filter((c) => c.startsWith("docker build")).length, 0, "SKIP_BUILD=1 skips the build");
    assert.equal(calls(s).filter((c) => c.startsWith("npx ")).length, 2);
    assert.deepEqual(forwardPids(s).filter(alive), []);
  } finally {
    cleanup(s);
  }
});

test("run-chaos.sh: SIGTERM stops the run and its port-forwards", async () => {
  const s = sandbox();
  const base = await freeBasePort();
  try {
    const child = spawn("bash", [SCRIPT, "slow", "partition-one"], { env: env(s, { BASE_PORT: String(base), SKIP_BUILD: "1" }), stdio: "ignore" });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    // Wait (bounded) until the first scenario runs, then terminate the script.
    for (let i = 0; i < 200 && !calls(s).some((c) => c.startsWith("npx ")); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(calls(s).some((c) => c.includes("chaos run slow")), "the first scenario started");
    child.kill("SIGTERM");
    const code = await exited;
    assert.equal(code, 143);
    assert.ok(!calls(s).some((c) => c.includes("chaos run partition-one")), "no scenario after the signal");
    const pids = forwardPids(s);
    assert.equal(pids.length, 2);
    assert.deepEqual(pids.filter(alive), []);
  } finally {
    cleanup(s);
  }
});
