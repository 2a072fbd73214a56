// The operator guide's grpcurl examples agree with proto/deltaset/v1/*.proto, and the guide
// names the manifests' real objects.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { grpcurlCalls, grpcurlDocProblems, jsonName, loadProtoIndex, parseJsonStream, responseExamples, shellWords } from "./k8s-grpcurl-checks.js";

const ROOT = join(import.meta.dirname, "..", "..");
const GUIDE = readFileSync(join(ROOT, "docs", "operations-kubernetes.md"), "utf8");
const INDEX = loadProtoIndex(join(ROOT, "proto"), ["deltaset/v1/replica.proto", "deltaset/v1/membership.proto", "deltaset/v1/gossip.proto"]);

function assertReports(problems: string[], pattern: RegExp): void {
  assert.ok(problems.some((p) => pattern.test(p)), `expected a problem matching ${pattern}, got ${JSON.stringify(problems)}`);
}

test("every grpcurl example and example response matches the protos", () => {
  assert.deepEqual(grpcurlDocProblems(GUIDE, INDEX), []);
});

test("the guide covers list, describe, health, Add, Query, Remove, Scan and Members", () => {
  const calls = grpcurlCalls(GUIDE);
  const used = new Set(calls.map((c) => (c.verb === "call" ? c.symbol : c.verb)));
  for (const want of ["list", "describe", "grpc.health.v1.Health/Check", "deltaset.v1.Replica/Add", "deltaset.v1.Replica/Query", "deltaset.v1.Replica/Remove", "deltaset.v1.Replica/Scan", "deltaset.v1.Membership/Members"]) {
    assert.ok(used.has(want), `no grpcurl example for ${want}`);
  }
  // Text and base64 forms of elements both appear.
  const adds = calls.filter((c) => c.symbol === "deltaset.v1.Replica/Add").map((c) => JSON.parse(c.data ?? "{}"));
  assert.ok(adds.some((a) => Array.isArray(a.texts)));
  assert.ok(adds.some((a) => Array.isArray(a.elements)));
  assert.ok(responseExamples(GUIDE).length >= 5);
});

test("the guide names the manifests' objects and paths", () => {
  for (const s of ["deltaset-peers", "svc/deltaset", "statefulset/deltaset", "k8s/overlays/kind", "k8s/overlays/chaos", "deploy/kind/kind-config.yaml", "DELTASET_PEER_PROXY=127.0.0.1:8474", "data-deltaset-4"]) {
    assert.ok(GUIDE.includes(s), s);
  }
});

// --- The checker fails on broken examples ------------------------------------------------

test("grpcurl checker: unknown methods, snake_case and unknown fields, bad bytes and enums", () => {
  const doc = (cmd: string) => "```bash\n" + cmd + "\n```\n";
  const check = (cmd: string) => grpcurlDocProblems(doc(cmd), INDEX);
  assert.deepEqual(check(`grpcurl -plaintext -d '{"key":"k","pageSize":2}' localhost:7070 deltaset.v1.Replica/Query`), []);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k"}' localhost:7070 deltaset.v1.Replica/Get`), /unknown method deltaset\.v1\.Replica\/Get/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k"}' localhost:7070 Replica/Add`), /unknown method Replica\/Add/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k","page_size":2}' localhost:7070 deltaset.v1.Replica/Query`), /page_size: grpcurl uses the JSON name pageSize/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k","elementz":["YQ=="]}' localhost:7070 deltaset.v1.Replica/Add`), /has no field elementz/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k","elements":["apple"]}' localhost:7070 deltaset.v1.Replica/Add`), /elements\[0\]: bytes must be a base64 string/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k","elements":"YQ=="}' localhost:7070 deltaset.v1.Replica/Add`), /repeated field needs an array/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k","context":{"vv":[{"replica":"a","counter":"x"}]}}' localhost:7070 deltaset.v1.Replica/Remove`), /counter: a 64-bit integer/);
  assertReports(check(`grpcurl -plaintext -d '{"key":"k",}' localhost:7070 deltaset.v1.Replica/Add`), /-d is not JSON/);
  assertReports(check(`grpcurl -plaintext localhost:7070 describe deltaset.v1.Replicas`), /unknown symbol deltaset\.v1\.Replicas/);
  assert.deepEqual(check(`grpcurl -plaintext localhost:7070 describe deltaset.v1.Replica.Scan`), []);

  const response = (method: string, json: string) => grpcurlDocProblems(`<!-- grpcurl-response: ${method} -->\n\`\`\`json\n${json}\n\`\`\`\n`, INDEX);
  assert.deepEqual(response("deltaset.v1.Replica/Query", `{"type":"AWSET","size":"3"}`), []);
  assertReports(response("deltaset.v1.Replica/Query", `{"type":"AWSET","size":3}`), /size: a 64-bit integer is printed as a decimal string/);
  assertReports(response("deltaset.v1.Replica/Query", `{"type":"SET"}`), /SET is not a value of ObjectType/);
  assertReports(response("deltaset.v1.Membership/Members", `{"self":"a","members":[{"node_id":"a"}]}`), /node_id: grpcurl uses the JSON name nodeId/);
  assertReports(response("deltaset.v1.Replica/Add", `{"added":1}\n{"added":2}`), /2 messages but the method is unary/);
  assert.deepEqual(response("deltaset.v1.Replica/Scan", `{"sent":"1"}\n{"sent":"2","last":true}`), []);
  assertReports(response("grpc.health.v1.Health/Check", `{"status":"UP"}`), /UP is not a value of ServingStatus/);
});

test("helpers: JSON names, shell words, JSON streams", () => {
  assert.equal(jsonName("since_unix_ms"), "sinceUnixMs");
  assert.equal(jsonName("key"), "key");
  assert.deepEqual(shellWords(`grpcurl -d '{"a": 1}' "x y" z\\ w # comment`), ["grpcurl", "-d", '{"a": 1}', "x y", "z w"]);
  assert.deepEqual(parseJsonStream(`{"a":"}"}\n{"b":{"c":1}}`), [{ a: "}" }, { b: { c: 1 } }]);
  assert.throws(() => parseJsonStream(`{"a":1`), /unbalanced/);
});

test("the README's grpcurl examples match the protos too", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  assert.ok(grpcurlCalls(readme).length >= 5, "the README shows grpcurl examples");
  assert.deepEqual(grpcurlDocProblems(readme, INDEX), []);
});
