// A small Dockerfile reader and .dockerignore matcher, enough to check the image's contract
// offline: stages, final USER, ENTRYPOINT + CMD, EXPOSE, no HEALTHCHECK, and that every COPY
// source exists and is not excluded from the build context.

export interface Instruction {
  op: string; // upper case: FROM, RUN, COPY, ...
  args: string; // the rest of the logical line, continuations joined
}

export interface Stage {
  from: string; // image after ARG substitution
  name?: string;
  instructions: Instruction[];
}

/** Split a Dockerfile into stages of instructions (comments dropped, `\` continuations joined). */
export function parseDockerfile(text: string): { globalArgs: Map<string, string>; stages: Stage[] } {
  const logical: string[] = [];
  let pending = "";
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.trim();
    if (pending === "" && (line === "" || line.startsWith("#"))) continue;
    if (pending !== "" && line.startsWith("#")) continue; // comment inside a continued instruction
    if (line.endsWith("\\")) {
      pending += line.slice(0, -1) + " ";
      continue;
    }
    logical.push(pending + line);
    pending = "";
  }
  if (pending.trim() !== "") logical.push(pending.trim());

  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const l of logical) {
    const m = /^(\S+)\s*(.*)$/.exec(l);
    if (!m) continue;
    const op = m[1].toUpperCase();
    const args = m[2].trim();
    if (op === "FROM") {
      const fm = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!fm) throw new Error(`cannot read FROM ${args}`);
      const from = fm[1].replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (all, name: string) => globalArgs.get(name) ?? all);
      stages.push({ from, name: fm[2], instructions: [] });
      continue;
    }
    if (stages.length === 0) {
      if (op === "ARG") {
        const am = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(args);
        if (am) globalArgs.set(am[1], (am[2] ?? "").replace(/^"(.*)"$/, "$1"));
      }
      continue;
    }
    stages[stages.length - 1].instructions.push({ op, args });
  }
  return { globalArgs, stages };
}

/** The argument vector of an exec-form (JSON array) or shell-form instruction. */
export function commandVector(args: string): string[] {
  if (args.startsWith("[")) {
    const v: unknown = JSON.parse(args);
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw new Error(`not a string array: ${args}`);
    return v;
  }
  return ["/bin/sh", "-c", args];
}

/** Variables set by ENV in a stage (KEY=value pairs, or the legacy `ENV KEY value`). */
export function imageEnv(stage: Stage): Map<string, string> {
  const env = new Map<string, string>();
  for (const i of stage.instructions.filter((x) => x.op === "ENV")) {
    const legacy = /^([A-Za-z_][A-Za-z0-9_]*)\s+([^=]*)$/.exec(i.args);
    if (legacy) {
      env.set(legacy[1], legacy[2].trim());
      continue;
    }
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) env.set(m[1], m[2].replace(/^"(.*)"$/, "$1"));
  }
  return env;
}

function last(stage: Stage, op: string): Instruction | undefined {
  return [...stage.instructions].reverse().find((i) => i.op === op);
}

export interface ImageExpectations {
  command: string; // ENTRYPOINT + CMD joined by spaces
  uid: number;
  ports: number[];
  workdir: string;
  /** The one directory the process may write (mounted as a volume in Kubernetes). */
  writableDir: string;
  nodeMajor: number;
}

export const IMAGE_EXPECTATIONS: ImageExpectations = {
  command: "node bin/deltaset.mjs node",
  uid: 10001,
  ports: [7070, 9464],
  workdir: "/app",
  writableDir: "/var/lib/deltaset",
  nodeMajor: 22,
};

/** The final image runs the node command as a non-root user, multi-stage, on Node's LTS. */
export function dockerfileProblems(text: string, expect: ImageExpectations = IMAGE_EXPECTATIONS): string[] {
  const problems: string[] = [];
  const { stages } = parseDockerfile(text);
  if (stages.length < 2) problems.push(`expected a multi-stage build, found ${stages.length} stage(s)`);
  const final = stages[stages.length - 1];
  if (!final) return [...problems, "no FROM"];

  if (!new RegExp(`^node:${expect.nodeMajor}([.-]|$)`).test(final.from)) problems.push(`final stage is ${final.from}, expected node:${expect.nodeMajor}`);
  if (!stages.some((s) => s.instructions.some((i) => i.op === "RUN" && /\bnpm ci\b[^&;]*--omit=dev/.test(i.args)))) problems.push("no stage runs npm ci --omit=dev");

  for (const s of stages) if (s.instructions.some((i) => i.op === "HEALTHCHECK")) problems.push(`stage ${s.name ?? s.from} declares a HEALTHCHECK (probes are Kubernetes' job)`);

  const user = last(final, "USER")?.args;
  const uid = user === undefined ? undefined : user.split(":")[0];
  if (uid === undefined) problems.push("final stage has no USER: the node would run as root");
  else if (!/^\d+$/.test(uid) || Number(uid) === 0) problems.push(`USER ${user} is not a numeric non-root uid (runAsNonRoot needs a number)`);
  else if (Number(uid) !== expect.uid) problems.push(`USER ${user} is not uid ${expect.uid}`);

  const workdir = last(final, "WORKDIR")?.args;
  if (workdir !== expect.workdir) problems.push(`WORKDIR is ${workdir}, expected ${expect.workdir}`);

  const entrypoint = last(final, "ENTRYPOINT");
  const cmd = last(final, "CMD");
  if (!entrypoint || !entrypoint.args.startsWith("[")) problems.push("ENTRYPOINT is missing or in shell form (signals would go to /bin/sh, not node)");
  else {
    const argv = [...commandVector(entrypoint.args), ...(cmd ? commandVector(cmd.args) : [])];
    if (argv.join(" ") !== expect.command) problems.push(`ENTRYPOINT + CMD runs "${argv.join(" ")}", expected "${expect.command}"`);
  }

  const exposed = new Set(final.instructions.filter((i) => i.op === "EXPOSE").flatMap((i) => i.args.split(/\s+/).map((p) => Number(p.split("/")[0]))));
  for (const p of expect.ports) if (!exposed.has(p)) problems.push(`port ${p} is not EXPOSEd`);

  const runs = final.instructions.filter((i) => i.op === "RUN").map((i) => i.args).join("\n");
  if (!runs.includes(expect.writableDir) || !new RegExp(`chown\\s+(-R\\s+)?${expect.uid}`).test(runs)) problems.push(`final stage does not create ${expect.writableDir} owned by ${expect.uid}`);
  const dataDir = imageEnv(final).get("DELTASET_DATA_DIR");
  if (dataDir === undefined || !(dataDir === expect.writableDir || dataDir.startsWith(`${expect.writableDir}/`))) problems.push(`DELTASET_DATA_DIR ${dataDir} is not under ${expect.writableDir}`);
  return problems;
}

/** Sources of COPY/ADD instructions that read the build context (not --from another stage). */
export function contextSources(text: string): string[] {
  const sources: string[] = [];
  for (const s of parseDockerfile(text).stages) {
    for (const i of s.instructions) {
      if (i.op !== "COPY" && i.op !== "ADD") continue;
      const words = i.args.startsWith("[") ? (JSON.parse(i.args) as string[]) : i.args.split(/\s+/);
      if (words.some((w) => w.startsWith("--from="))) continue;
      const paths = words.filter((w) => !w.startsWith("--"));
      sources.push(...paths.slice(0, -1));
    }
  }
  return sources;
}

function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i];
    if (ch === "*" && glob[i + 1] === "*") {
      re += ".*";
      i++;
      if (glob[i + 1] === "/") i++;
    } else if (ch === "*") re += "[^/]*";
    else if (ch === "?") re += "[^/]";
    else re += ch.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/**
 * Whether .dockerignore excludes a context path. Follows Docker's rules for the forms used
 * here: patterns are relative to the context root, `*`, `?` and `**` globs, a pattern that
 * matches a directory excludes everything below it, later `!` patterns re-include.
 */
export function isIgnored(dockerignore: string, path: string): boolean {
  const clean = path.replace(/^\.\//, "").replace(/\/+$/, "");
  const parts = clean.split("/");
  let ignored = false;
  for (const raw of dockerignore.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const negate = line.startsWith("!");
    const pattern = (negate ? line.slice(1) : line).trim().replace(/^\/+/, "").replace(/\/+$/, "");
    const re = globToRegExp(pattern);
    // The path itself or any of its parent directories.
    const hit = parts.some((_, n) => re.test(parts.slice(0, n + 1).join("/")));
    if (hit) ignored = !negate;
  }
  return ignored;
}

export const REQUIRED_IGNORES = ["node_modules", ".git", "docs/results", "test", ".deltaset", "data"];

/** The build context leaves out local state and dependencies, and keeps what COPY needs. */
export function dockerignoreProblems(dockerignore: string, copySources: string[]): string[] {
  const problems: string[] = [];
  for (const p of REQUIRED_IGNORES) if (!isIgnored(dockerignore, p)) problems.push(`.dockerignore does not exclude ${p}`);
  if (!isIgnored(dockerignore, "services/node_modules")) problems.push(".dockerignore does not exclude nested node_modules");
  for (const s of copySources) if (isIgnored(dockerignore, s)) problems.push(`COPY source ${s} is excluded by .dockerignore`);
  return problems;
}
