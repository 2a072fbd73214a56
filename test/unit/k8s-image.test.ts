// What the image holds is enough to run a node: runtime code imports only production
// dependencies and files the Dockerfile copies, and the image's command, started from a copy of
// exactly those files with the Kubernetes pod environment, serves health and stops cleanly on
// SIGTERM without writing outside its data directory and temp directory.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { builtinModules } from "node:module";
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { protoPath as healthProtoPath } from "grpc-health-check";
import { commandVector, contextSources, parseDockerfile } from "./k8s-dockerfile-checks.js";
import { containerEnv, findObject, parseManifests, renderKustomize, type K8sObject } from "./k8s-manifest-checks.js";

const ROOT = join(import.meta.dirname, "..", "..");
const DOCKERFILE = readFileSync(join(ROOT, "deploy", "Dockerfile"), "utf8");
const PKG = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };

function filesUnder(dir: string, suffixes: string[]): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p, suffixes));
    else if (suffixes.some((s) => e.endsWith(s))) out.push(p);
  }
  return out;
}

/** Module specifiers a file loads at run time (type-only imports are erased by tsx). */
export function runtimeImports(source: string): string[] {
  const specs: string[] = [];
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  for (const m of code.matchAll(/^\s*(import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?["']([^"']+)["']/gm)) {
    if (m[2] === undefined) specs.push(m[3]);
  }
  for (const m of code.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) specs.push(m[1]);
  return specs;
}

function packageName(spec: string): string {
  const parts = spec.split("/");
  return spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** Problems with what one runtime file (path relative to the repository) imports. */
export function importProblems(path: string, source: string, imageRoots: string[], dependencies: Record<string, string>): string[] {
  const problems: string[] = [];
  const builtins = new Set(builtinModules);
  for (const spec of runtimeImports(source)) {
    if (spec.startsWith("node:") || builtins.has(spec)) continue;
    if (spec.startsWith(".")) {
      const target = relative(ROOT, resolve(ROOT, dirname(path), spec));
      if (!imageRoots.some((r) => target === r || target.startsWith(`${r}/`))) problems.push(`${path} imports ${spec}, which the image does not contain`);
      continue;
    }
    if (!(packageName(spec) in dependencies)) problems.push(`${path} imports ${spec}, which is not a production dependency (npm ci --omit=dev leaves it out)`);
  }
  return problems;
}

const IMAGE_ROOTS = [...new Set(contextSources(DOCKERFILE))];
const RUNTIME_FILES = [...filesUnder(join(ROOT, "bin"), [".mjs", ".js", ".ts"]), ...filesUnder(join(ROOT, "services"), [".ts", ".mjs", ".js"])];

test("runtime code imports only production dependencies and files the image contains", () => {
  assert.ok(RUNTIME_FILES.length > 10, `${RUNTIME_FILES.length} runtime files`);
  const problems = RUNTIME_FILES.flatMap((f) => importProblems(relative(ROOT, f), readFileSync(f, "utf8"), IMAGE_ROOTS, PKG.dependencies));
  assert.deepEqual(problems, []);
});

test("import checker: dev dependencies and files outside the image are reported", () => {
  const src = [
    'import * as fc from "fast-check";',
    'import type { X } from "typescript";',
    'import { y } from "../test/helpers/y.js";',
    'import { z } from "./crdt/index.js";',
    'import * as grpc from "@grpc/grpc-js";',
    'import { readFileSync } from "node:fs";',
    'const m = await import("js-yaml");',
  ].join("\n");
  assert.deepEqual(runtimeImports(src), ["fast-check", "../test/helpers/y.js", "./crdt/index.js", "@grpc/grpc-js", "node:fs", "js-yaml"]);
  assert.deepEqual(importProblems("services/probe.ts", src, IMAGE_ROOTS, PKG.dependencies), [
    "services/probe.ts imports fast-check, which is not a production dependency (npm ci --omit=dev leaves it out)",
    "services/probe.ts imports ../test/helpers/y.js, which the image does not contain",
    "services/probe.ts imports js-yaml, which is not a production dependency (npm ci --omit=dev leaves it out)",
  ]);
});

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolvePort(port));
    });
  });
}

function healthStatus(address: string): Promise<string> {
  const def = protoLoader.loadSync(healthProtoPath, { enums: String });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } };
  const client = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure());
  return new Promise((resolveStatus, reject) => {
    client.Check({ service: "" }, { deadline: Date.now() + 5000 }, (err: Error | null, res: { status: string }) => {
      client.close();
      if (err) reject(err);
      else resolveStatus(res.status);
    });
  });
}

function listFiles(dir: string, skip: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (p === skip) continue;
    out.push(p);
    if (statSync(p).isDirectory()) out.push(...listFiles(p, skip));
  }
  return out.sort();
}

test("the image's command starts a node from the image's files with the pod environment", { timeout: 55_000 }, async () => {
  const sandbox = mkdtempSync(join(tmpdir(), "deltaset-image-"));
  const app = join(sandbox, "app");
  const state = join(sandbox, "var-lib-deltaset");
  const tmp = join(sandbox, "tmp");
  mkdirSync(app);
  mkdirSync(state);
  mkdirSync(tmp);
  let child: ReturnType<typeof spawn> | undefined;
  try {
    // The files the Dockerfile copies from the build context, and the installed dependencies.
    for (const src of IMAGE_ROOTS) cpSync(join(ROOT, src), join(app, src), { recursive: true });
    symlinkSync(join(ROOT, "node_modules"), join(app, "node_modules"), "dir");
    const before = listFiles(app, join(app, "node_modules"));

    // The kind overlay's pod environment, moved to loopback and this sandbox.
    const objs = parseManifests(renderKustomize(join(ROOT, "k8s", "overlays", "kind")).stdout);
    const sts = findObject(objs, "StatefulSet") as K8sObject;
    const container = sts.spec.template.spec.containers.find((c: { name: string }) => c.name === "deltaset");
    const configMaps = new Map(objs.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o.data ?? {}]));
    const podEnv = Object.fromEntries([...containerEnv(container, configMaps).env].map(([k, v]) => [k, v.replaceAll("{metadata.name}", "deltaset-0").replaceAll("{metadata.namespace}", "deltaset")]));
    const port = await freePort();
    const mountPath = "/var/lib/deltaset";
    assert.ok(podEnv.DELTASET_DATA_DIR.startsWith(`${mountPath}/`));
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: "/nonexistent",
      TMPDIR: tmp,
      ...podEnv,
      DELTASET_LISTEN: `127.0.0.1:${port}`,
      DELTASET_ADVERTISE: `127.0.0.1:${port}`,
      DELTASET_DATA_DIR: state + podEnv.DELTASET_DATA_DIR.slice(mountPath.length),
      DELTASET_SEEDS_DNS: "", // no DNS lookups off this machine
      DELTASET_METRICS_LISTEN: "",
    };
    // The cluster key the pod mounts from its Secret: a generated one in the sandbox.
    if (podEnv.DELTASET_CLUSTER_KEY_FILE !== undefined) {
      const keyFile = join(sandbox, "cluster.key");
      writeFileSync(keyFile, `${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
      env.DELTASET_CLUSTER_KEY_FILE = keyFile;
    }

    const { stages } = parseDockerfile(DOCKERFILE);
    const final = stages[stages.length - 1];
    const argv = ["ENTRYPOINT", "CMD"].flatMap((op) => {
      const i = final.instructions.filter((x) => x.op === op).pop();
      return i ? commandVector(i.args) : [];
    });
    assert.equal(argv[0], "node");
    const proc = spawn(process.execPath, argv.slice(1), { cwd: app, env, stdio: ["ignore", "pipe", "pipe"] });
    child = proc;
    let stdout = "";
    let stderr = "";
    proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));

    // Bounded wait for the node to listen (first start compiles the sources).
    let listening = false;
    for (let i = 0; i < 400 && !listening && proc.exitCode === null; i++) {
      listening = stdout.includes('"event":"listening"');
      if (!listening) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(listening, `node did not start:\n${stdout}\n${stderr}`);
    assert.equal(await healthStatus(`127.0.0.1:${port}`), "SERVING");

    proc.kill("SIGTERM");
    assert.equal(await exited, 0, stderr);
    child = undefined;
    assert.ok(existsSync(env.DELTASET_DATA_DIR as string), "the data directory was created");
    assert.deepEqual(listFiles(app, join(app, "node_modules")), before, "nothing written under the app directory");
  } finally {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    rmSync(sandbox, { recursive: true, force: true });
  }
});
