// The module loader the node, the CLI and the tests run on (bin/ts-loader.mjs): TypeScript
// transformed without esbuild's keep-names wrappers, ".js" imports resolved to ".ts", stack
// traces mapped to the sources, and a transform cache only in a directory no one else can write.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startNodeProcess } from "../helpers/node-process.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const FIXTURE = "test/fixtures/ts-loader/main.ts";

function runFixture(tmp: string): Record<string, unknown> {
  const out = execFileSync(process.execPath, ["--import", "./bin/register-ts.mjs", FIXTURE], {
    cwd: REPO,
    env: { ...process.env, TMPDIR: tmp },
    encoding: "utf8",
  });
  return JSON.parse(out) as Record<string, unknown>;
}

const cacheDirIn = (tmp: string) => join(tmp, `deltaset-ts-${process.getuid!()}`);

test("runs TypeScript: .js imports reach .ts files, enums, parameter properties, names, mapped stack traces", (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "ts-loader-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const r = runFixture(tmp);
  assert.equal(r.area, 9);
  assert.equal(r.colour, 2);
  assert.equal(r.count, 6);
  assert.equal(r.name, "named");
  assert.equal(r.className, "Counter");
  assert.match(String(r.stackLine), /at Counter\.fail \(.*test\/fixtures\/ts-loader\/shape\.ts:22:\d+\)/);
});

test("caches transforms in a private directory, without keep-names wrappers, and reuses them", (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "ts-loader-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const first = runFixture(tmp);
  const dir = cacheDirIn(tmp);
  assert.equal(readdirSync(dir).length >= 2, true, "the fixture's two modules are cached");
  // Only this user may read or write it.
  assert.equal(statSync(dir).mode & 0o077, 0);
  const cached = readdirSync(dir).map((f) => readFileSync(join(dir, f), "utf8"));
  assert.ok(cached.some((c) => c.includes("const named = ")), "the fixture's transform is among the cached files");
  for (const c of cached) assert.ok(!c.includes("__name("), "no keep-names wrapper in the transformed code");
  const before = readdirSync(dir).sort();
  assert.deepEqual(runFixture(tmp), first);
  assert.deepEqual(readdirSync(dir).sort(), before, "a second run reads the cache and writes nothing new");
});

test("does not use a cache directory others can write to, and still runs", (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "ts-loader-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const dir = cacheDirIn(tmp);
  mkdirSync(dir);
  chmodSync(dir, 0o777);
  assert.equal(runFixture(tmp).area, 9);
  assert.deepEqual(readdirSync(dir), [], "nothing written to (or read from) a world-writable directory");
});

test("runs the sources when deltaset itself lies in another project's node_modules", (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "ts-loader-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const pkg = join(tmp, "node_modules", "deltaset");
  mkdirSync(pkg, { recursive: true });
  for (const part of ["bin", "services", "proto", "tsconfig.json", "package.json"]) cpSync(join(REPO, part), join(pkg, part), { recursive: true });
  // The other project's dependencies: ours, linked beside the package.
  for (const dep of readdirSync(join(REPO, "node_modules"))) symlinkSync(join(REPO, "node_modules", dep), join(tmp, "node_modules", dep));
  const out = execFileSync(process.execPath, [join(pkg, "bin", "deltaset.mjs"), "--help"], { cwd: tmp, env: { ...process.env, TMPDIR: tmp }, encoding: "utf8" });
  assert.match(out, /^deltaset: replicated add-wins sets/);
  assert.match(out, /deltaset node --listen/);
});

/** Command lines of a process's children (Linux). */
function childCommands(pid: number): string[] {
  const kids = readdirSync(`/proc/${pid}/task`).flatMap((t) => readFileSync(`/proc/${pid}/task/${t}/children`, "utf8").split(" ").filter((x) => x !== ""));
  return kids.map((k) => {
    try {
      return readFileSync(`/proc/${k}/cmdline`, "utf8").replaceAll("\0", " ");
    } catch {
      return "";
    }
  });
}

test("a node started with nothing cached keeps no esbuild process once it serves", async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "ts-loader-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const node = await startNodeProcess(["--listen", "127.0.0.1:0", "--data-dir", join(tmp, "data"), "--log-level", "warn"], { TMPDIR: tmp });
  t.after(() => node.stop());
  assert.ok(readdirSync(cacheDirIn(tmp)).length > 50, "the node's modules were transformed, not found in a cache");
  let esbuild: string[] = [];
  for (let i = 0; i < 40; i++) {
    esbuild = childCommands(node.child.pid!).filter((c) => c.includes("esbuild"));
    if (esbuild.length === 0) break;
    await sleep(250);
  }
  assert.deepEqual(esbuild, [], "esbuild's service stopped within 10 s of the start");
});
