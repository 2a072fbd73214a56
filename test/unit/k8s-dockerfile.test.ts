// The container image's contract, read from deploy/Dockerfile and .dockerignore without
// building: it runs the documented node command as a non-root user, with no HEALTHCHECK, from a
// build context that leaves out dependencies and local state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  IMAGE_EXPECTATIONS,
  commandVector,
  contextSources,
  dockerfileProblems,
  dockerignoreProblems,
  imageEnv,
  isIgnored,
  parseDockerfile,
} from "./k8s-dockerfile-checks.js";
import { findObject, parseManifests, renderKustomize } from "./k8s-manifest-checks.js";

const ROOT = join(import.meta.dirname, "..", "..");
const DOCKERFILE = readFileSync(join(ROOT, "deploy", "Dockerfile"), "utf8");
const DOCKERIGNORE = readFileSync(join(ROOT, ".dockerignore"), "utf8");
// The command the operator guide documents for running a node.
const NODE_COMMAND = "node bin/deltaset.mjs node";

function assertReports(problems: string[], pattern: RegExp): void {
  assert.ok(problems.some((p) => pattern.test(p)), `expected a problem matching ${pattern}, got ${JSON.stringify(problems)}`);
}

test("Dockerfile: multi-stage, Node 22, non-root, no HEALTHCHECK, runs the node command", () => {
  assert.equal(IMAGE_EXPECTATIONS.command, NODE_COMMAND);
  assert.deepEqual(dockerfileProblems(DOCKERFILE), []);
});

test("Dockerfile: ENTRYPOINT + CMD is the documented command", () => {
  const { stages } = parseDockerfile(DOCKERFILE);
  const final = stages[stages.length - 1];
  const entry = final.instructions.filter((i) => i.op === "ENTRYPOINT").pop();
  const cmd = final.instructions.filter((i) => i.op === "CMD").pop();
  assert.ok(entry && cmd);
  assert.equal([...commandVector(entry.args), ...commandVector(cmd.args)].join(" "), NODE_COMMAND);
  assert.match(final.from, /^node:22-(bookworm-)?slim$/);
  const guide = readFileSync(join(ROOT, "docs", "operations-kubernetes.md"), "utf8");
  assert.ok(guide.includes(NODE_COMMAND), "the operator guide documents the command");
});

test("the command's script is the package bin and exists", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { bin: Record<string, string> };
  assert.equal(pkg.bin.deltaset, "bin/deltaset.mjs");
  assert.ok(existsSync(join(ROOT, "bin", "deltaset.mjs")), "bin/deltaset.mjs exists");
});

test("Dockerfile: every build-context COPY source exists and is not ignored", () => {
  const sources = contextSources(DOCKERFILE);
  assert.deepEqual([...sources].sort(), ["bin", "package-lock.json", "package-lock.json", "package.json", "package.json", "proto", "services", "tsconfig.json"].sort());
  // bin/ is checked by the test above, with its script.
  for (const s of sources.filter((x) => x !== "bin")) assert.ok(existsSync(join(ROOT, s)), `${s} exists`);
  assert.deepEqual(dockerignoreProblems(DOCKERIGNORE, sources), []);
});

test("the image's user and ports match the StatefulSet", () => {
  const objs = parseManifests(renderKustomize(join(ROOT, "k8s", "base")).stdout);
  const pod = findObject(objs, "StatefulSet")?.spec.template.spec;
  assert.equal(pod.securityContext.runAsUser, IMAGE_EXPECTATIONS.uid);
  const ports = pod.containers[0].ports.map((p: { containerPort: number }) => p.containerPort).sort();
  assert.deepEqual(ports, [...IMAGE_EXPECTATIONS.ports].sort());
  const dataMount = pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === "data");
  assert.equal(dataMount.mountPath, IMAGE_EXPECTATIONS.writableDir);
});

// --- The checkers fail on broken input ---------------------------------------------------

test("Dockerfile checker: root user, HEALTHCHECK, wrong command, shell form, single stage", () => {
  const replace = (from: string | RegExp, to: string): string => {
    const out = DOCKERFILE.replace(from, to);
    assert.notEqual(out, DOCKERFILE, `pattern ${from} found`);
    return out;
  };
  assertReports(dockerfileProblems(replace("USER 10001:10001", "USER root")), /USER root is not a numeric non-root uid/);
  assertReports(dockerfileProblems(replace("USER 10001:10001", "USER 0")), /USER 0 is not a numeric non-root uid/);
  assertReports(dockerfileProblems(replace(/^USER .*$/m, "")), /no USER/);
  assertReports(dockerfileProblems(replace("EXPOSE 7070 9464", "EXPOSE 7070 9464\nHEALTHCHECK CMD node -e 0")), /declares a HEALTHCHECK/);
  assertReports(dockerfileProblems(replace('CMD ["node"]', 'CMD ["cluster"]')), /runs "node bin\/deltaset\.mjs cluster", expected "node bin\/deltaset\.mjs node"/);
  assertReports(dockerfileProblems(replace('ENTRYPOINT ["node", "bin/deltaset.mjs"]', "ENTRYPOINT node bin/deltaset.mjs")), /shell form/);
  assertReports(dockerfileProblems(replace("ARG NODE_IMAGE=node:22-bookworm-slim", "ARG NODE_IMAGE=node:20-bookworm-slim")), /expected node:22/);
  assertReports(dockerfileProblems(replace("EXPOSE 7070 9464", "EXPOSE 7070")), /port 9464 is not EXPOSEd/);
  assertReports(dockerfileProblems(replace(/npm ci --omit=dev/, "npm ci")), /no stage runs npm ci --omit=dev/);
  assertReports(dockerfileProblems(replace("DELTASET_DATA_DIR=/var/lib/deltaset/data", "DELTASET_DATA_DIR=/app/data")), /DELTASET_DATA_DIR \/app\/data is not under \/var\/lib\/deltaset/);
  assertReports(dockerfileProblems("FROM node:22-slim\nUSER 10001\nENTRYPOINT [\"node\", \"bin/deltaset.mjs\"]\nCMD [\"node\"]\n"), /multi-stage/);
});

test("Dockerfile parser: continuations, comments, ARG substitution, stage names", () => {
  const { stages, globalArgs } = parseDockerfile(
    ["ARG BASE=node:22-slim", "FROM ${BASE} AS deps", "RUN a \\", "  # inside", "  && b", "FROM $BASE", "COPY --from=deps /x /y", "COPY a b ./"].join("\n"),
  );
  assert.equal(globalArgs.get("BASE"), "node:22-slim");
  assert.deepEqual(
    stages.map((s) => [s.from, s.name]),
    [
      ["node:22-slim", "deps"],
      ["node:22-slim", undefined],
    ],
  );
  assert.equal(stages[0].instructions[0].args.replace(/\s+/g, " "), "a && b");
  assert.deepEqual(contextSources(["FROM x", "COPY --from=deps /x /y", "COPY --chown=1:1 a b ./"].join("\n")), ["a", "b"]);
  assert.deepEqual(commandVector("node x"), ["/bin/sh", "-c", "node x"]);
  const env = imageEnv(parseDockerfile('FROM x\nENV A=1 \\\n    B="two words"\nENV C 3 4\n').stages[0]);
  assert.deepEqual([...env], [["A", "1"], ["B", "two words"], ["C", "3 4"]]);
});

test(".dockerignore matcher and checker", () => {
  assert.ok(isIgnored(DOCKERIGNORE, "node_modules"));
  assert.ok(isIgnored(DOCKERIGNORE, "node_modules/tsx/package.json"));
  assert.ok(isIgnored(DOCKERIGNORE, "services/x/node_modules"));
  assert.ok(isIgnored(DOCKERIGNORE, "docs/results/sync.json"));
  assert.ok(!isIgnored(DOCKERIGNORE, "docs/operations-kubernetes.md"));
  assert.ok(!isIgnored(DOCKERIGNORE, "services"));
  assert.ok(isIgnored("*.log\n!keep.log\n", "a.log"));
  assert.ok(!isIgnored("*.log\n!keep.log\n", "keep.log"));
  assert.ok(isIgnored("**/cache\n", "a/b/cache/x"));

  const withoutNodeModules = DOCKERIGNORE.split("\n").filter((l) => !l.includes("node_modules")).join("\n");
  assertReports(dockerignoreProblems(withoutNodeModules, []), /does not exclude node_modules/);
  assertReports(dockerignoreProblems(`${DOCKERIGNORE}\nservices\n`, ["services"]), /COPY source services is excluded/);
  assertReports(dockerignoreProblems("node_modules\n", []), /does not exclude docs\/results/);
});
