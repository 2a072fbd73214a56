// Module hooks that run deltaset's TypeScript sources: each .ts file outside node_modules is
// transformed by esbuild (types stripped, nothing bundled), and relative imports written with a
// .js suffix (NodeNext style) resolve to the .ts file beside them.
//
// Why not tsx at run time: tsx always asks esbuild to keep function names, which wraps every
// named closure in a helper call each time the closure is created. A node creates several per
// request, and measured on single-element Adds (32 in flight) a node ran 5-17% more calls per
// second without it. Names are kept anyway here, since a transform without minification does not
// rename anything.
//
// Transforms are cached on disk by content (deltaset-ts-UID under the temp directory), so a
// restart does not pay for them again; a cache that cannot be used only costs the transforms
// (about 0.1 s at start).
import { createHash } from "node:crypto";
import { lstatSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stop as stopEsbuild, transform, version as esbuildVersion } from "esbuild";

const ROOT = new URL("../", import.meta.url).href;
// The project's compiler options that change emitted code (class fields, decorators) apply here
// as they do for tsc.
const compilerOptions = JSON.parse(readFileSync(new URL("../tsconfig.json", import.meta.url), "utf8")).compilerOptions ?? {};
const OPTIONS = {
  loader: "ts",
  format: "esm",
  target: `node${process.versions.node}`,
  sourcemap: "inline",
  tsconfigRaw: { compilerOptions },
};
const CACHE_DIR = privateCacheDir();
/** esbuild's service process stops once no transform came for this long (then restarts if one does). */
const ESBUILD_IDLE_MS = 2000;
let idleTimer;
let cacheWritable = CACHE_DIR !== undefined;

/**
 * The cache directory, only if this user owns it and no one else can write to it: the temp
 * directory is shared, and a file planted there would run as this process.
 */
function privateCacheDir() {
  if (typeof process.getuid !== "function") return undefined;
  const dir = join(tmpdir(), `deltaset-ts-${process.getuid()}`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    return st.isDirectory() && st.uid === process.getuid() && (st.mode & 0o022) === 0 ? dir : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Ours: a .ts file of this project, not one a dependency ships. A query or fragment does not
 * count: other hooks (tracing's import-in-the-middle) add one to the modules they wrap.
 */
function isProjectTs(url) {
  const path = url.split(/[?#]/, 1)[0];
  // Under this project's root but not in its own node_modules: deltaset itself may sit in
  // another project's node_modules.
  return path.startsWith(ROOT) && path.endsWith(".ts") && !path.startsWith(`${ROOT}node_modules/`);
}

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    const fromProject = context.parentURL !== undefined && isProjectTs(context.parentURL);
    if (fromProject && err?.code === "ERR_MODULE_NOT_FOUND" && specifier.startsWith(".") && specifier.endsWith(".js")) {
      return nextResolve(`${specifier.slice(0, -3)}.ts`, context);
    }
    throw err;
  }
}

export async function load(url, context, nextLoad) {
  if (!isProjectTs(url)) return nextLoad(url, context);
  const file = fileURLToPath(url);
  const source = await readFile(file, "utf8");
  const name = createHash("sha256").update(`${esbuildVersion}\0${JSON.stringify(OPTIONS)}\0${file}\0${source}`).digest("hex");
  const cached = CACHE_DIR === undefined ? undefined : join(CACHE_DIR, `${name}.mjs`);
  if (cached !== undefined) {
    try {
      return { format: "module", source: await readFile(cached, "utf8"), shortCircuit: true };
    } catch {
      // Not cached yet (or unreadable): transform below.
    }
  }
  const { code } = await transform(source, { ...OPTIONS, sourcefile: file });
  // A node transforms its modules at start only: esbuild's process (about 15 MB) need not outlive that.
  clearTimeout(idleTimer);
  idleTimer = setTimeout(() => void stopEsbuild(), ESBUILD_IDLE_MS);
  idleTimer.unref();
  if (cached !== undefined && cacheWritable) {
    try {
      // Written whole under a temporary name, then renamed: a reader never sees half a file.
      const tmp = `${cached}.${process.pid}.tmp`;
      writeFileSync(tmp, code, { mode: 0o600 });
      renameSync(tmp, cached);
    } catch {
      cacheWritable = false;
    }
  }
  return { format: "module", source: code, shortCircuit: true };
}
