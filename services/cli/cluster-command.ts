// `deltaset cluster --nodes N`: N node processes on 127.0.0.11, 127.0.0.12, ... (one loopback
// address each, like separate hosts), each with its own data directory, joined through seeds.
// Prints how to reach them; Ctrl-C (or SIGTERM) stops them all gracefully. The nodes share a
// cluster key (DIR/cluster.key, made on first use, mode 0600): peers authenticate each other even
// here on loopback, as they must elsewhere.
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateClusterKey } from "../node/cluster-keys.js";
import { UsageError } from "./client-commands.js";
import { type ClusterNodeSpec, planCluster as plan } from "../node/cluster-plan.js";

/** planCluster, with its refusals as usage errors. */
function planCluster(opts: Parameters<typeof plan>[0]): ClusterNodeSpec[] {
  try {
    return plan(opts);
  } catch (err) {
    if (err instanceof RangeError) throw new UsageError(err.message);
    throw err;
  }
}

const BIN = fileURLToPath(new URL("../../bin/deltaset.mjs", import.meta.url));

/** DIR/cluster.key, with a new random key when it does not exist yet (kept across runs). */
export function ensureClusterKey(dir: string): string {
  const file = join(dir, "cluster.key");
  if (!existsSync(file)) writeFileSync(file, `# deltaset cluster key, made by deltaset cluster (one key per line; the first signs)\n${generateClusterKey()}\n`, { mode: 0o600, flag: "wx" });
  return file;
}

export const CLUSTER_HELP = `usage: deltaset cluster [--nodes N] [--port P] [--dir DIR] [--first-host H] [--chaos | --toxiproxy URL] [NODE FLAGS...]

Runs N node processes on 127.0.0.H, 127.0.0.H+1, ... (port P on each), joined through seeds and
sharing the cluster key DIR/cluster.key; node nI keeps its data in DIR/nI and its log in DIR/nI.log.
Ctrl-C (or SIGTERM) stops every node. Exits 1 when a node fails to start.

  --nodes N        nodes to run (default 3)
  --port P         the port of every node (default 7070)
  --dir DIR        data directories, logs and the cluster key (default .deltaset/cluster)
  --first-host H   the first node listens on 127.0.0.H (default 11)
  --chaos          peer links through per-link fault proxies, with a Toxiproxy-compatible API on 127.0.0.1:8474
  --toxiproxy URL  peer links through per-link proxies of the Toxiproxy API at URL

Every other flag goes to every node as written (deltaset node --help lists them), e.g.
  deltaset cluster --nodes 5 --replication-factor 3 --gossip-interval-ms 100
and so does everything after --.
`;

/** The cluster command's own flags and their kinds; every other argument is the nodes'. */
const CLUSTER_FLAGS: Record<string, "string" | "boolean"> = { nodes: "string", port: "string", dir: "string", "first-host": "string", toxiproxy: "string", chaos: "boolean", help: "boolean" };

/**
 * The cluster's flags (--name V, --name=V, booleans bare or =true/false, -h) and, in order, the
 * arguments for the nodes: any other flag with the value after it, and everything after --.
 */
export function splitClusterArgs(args: readonly string[]): { values: Record<string, string | boolean>; forwarded: string[] } {
  const values: Record<string, string | boolean> = {};
  const forwarded: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      forwarded.push(...args.slice(i + 1));
      break;
    }
    if (a === "-h") {
      values.help = true;
      continue;
    }
    const m = /^--([^=]+)(?:=(.*))?$/s.exec(a);
    const kind = m === null ? undefined : CLUSTER_FLAGS[m[1]!];
    if (m === null || kind === undefined) {
      forwarded.push(a);
      continue;
    }
    const name = m[1]!;
    if (kind === "boolean") {
      if (m[2] !== undefined && m[2] !== "true" && m[2] !== "false") throw new UsageError(`--${name} is true or false, not "${m[2]}"`);
      values[name] = m[2] !== "false";
      continue;
    }
    const v = m[2] ?? args[++i];
    if (v === undefined) throw new UsageError(`--${name} needs a value`);
    values[name] = v;
  }
  return { values, forwarded };
}

export async function clusterCommand(args: string[]): Promise<void> {
  const { values: given, forwarded: extra } = splitClusterArgs(args);
  if (given.help === true) {
    process.stdout.write(CLUSTER_HELP);
    return;
  }
  const values: Record<string, string | boolean | undefined> = { nodes: "3", port: "7070", dir: ".deltaset/cluster", "first-host": "11", chaos: false, ...given };
  let proxyServer: { url: string; close(): Promise<void> } | undefined;
  let peerProxy: string | undefined;
  if (values.chaos === true || values.toxiproxy !== undefined) {
    peerProxy = values.toxiproxy as string | undefined;
    if (peerProxy === undefined) {
      const { startToxiproxyServer } = await import("../chaos/proxy/index.js");
      try {
        proxyServer = await startToxiproxyServer({ host: "127.0.0.1", port: 8474 });
      } catch (err) {
        throw new UsageError(`cannot start the fault proxy API on 127.0.0.1:8474 (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); pass --toxiproxy URL to use a running one`);
      }
      peerProxy = proxyServer.url;
    }
    extra.push("--peer-proxy", peerProxy);
  }
  const specs = planCluster({
    nodes: Number(values.nodes),
    port: Number(values.port),
    dir: String(values.dir),
    firstHost: Number(values["first-host"]),
    extra,
  });
  if (peerProxy !== undefined) {
    // One proxy per directed link, named <from>-to-<to> by node id (the nodes find and use them).
    const { precreateLinkProxies } = await import("../chaos/links.js");
    await precreateLinkProxies(specs.map((s) => ({ nodeId: s.nodeId, address: s.address, toxiproxy: peerProxy! })));
  }
  mkdirSync(String(values.dir), { recursive: true });
  const keyFile = ensureClusterKey(String(values.dir));
  for (const s of specs) s.args.push("--cluster-key-file", keyFile);
  const children: ChildProcess[] = [];
  /** Per node: resolves once it exited and all it printed is in its log file. */
  const logged: Array<Promise<unknown>> = [];
  const ready = specs.map(
    (s) =>
      new Promise<void>((resolve, reject) => {
        const log = createWriteStream(s.logFile, { flags: "a" });
        const child = spawn(process.execPath, [BIN, "node", ...s.args], { stdio: ["ignore", "pipe", "pipe"] });
        children.push(child);
        // Ended below, once both streams are: stdout is copied into the same file.
        child.stderr!.pipe(log, { end: false });
        child.stdout!.on("data", (d: Buffer) => {
          log.write(d);
          if (d.toString().includes('"event":"listening"')) resolve();
        });
        // "close" comes after the process exited and its output ended: the log then holds all of
        // it, so the path printed below (or read after the command exits) shows why it stopped.
        const done = new Promise<number | null>((r) => child.once("close", (code) => log.end(() => r(code))));
        logged.push(done);
        void done.then((code) => {
          if (!stopping) process.stderr.write(`node ${s.nodeId} exited with ${code}; its log: ${s.logFile}\n`);
          reject(new Error(`node ${s.nodeId} exited with ${code}`));
        });
      }),
  );
  let stopping = false;
  const stopAll = async (why: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`\n${why}: stopping ${children.length} nodes...\n`);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM");
    // Every node gone and its log complete before this process exits.
    await Promise.all(logged);
    await proxyServer?.close();
    process.stdout.write("all nodes stopped\n");
    process.exit(exitCode);
  };
  process.once("SIGINT", () => void stopAll("interrupted", 0));
  process.once("SIGTERM", () => void stopAll("terminated", 0));
  try {
    await Promise.all(ready);
  } catch (err) {
    // A node that did not start: the cluster is not what was asked for.
    await stopAll((err as Error).message, 1);
    return;
  }
  const width = Math.max(...specs.map((s) => s.address.length));
  process.stdout.write(
    [
      `deltaset cluster: ${specs.length} nodes running (peers authenticate with the cluster key in ${keyFile})`,
      "",
      ...specs.map((s) => `  ${s.nodeId.padEnd(4)} ${s.address.padEnd(width)}  data ${s.dataDir}  log ${s.logFile}`),
      "",
      "try:",
      `  npx deltaset add fruits apple pear --addr ${specs[0]!.address}`,
      `  npx deltaset query fruits --addr ${specs.at(-1)!.address}`,
      `  npx deltaset members --addr ${specs[0]!.address}`,
      `  grpcurl -plaintext ${specs[0]!.address} list`,
      "",
      ...(peerProxy !== undefined
        ? [`peer links go through per-link fault proxies (n1-to-n2, ...): Toxiproxy API ${peerProxy}`, `  curl ${peerProxy}/proxies`, ""]
        : []),
      "Ctrl-C stops every node.",
      "",
    ].join("\n"),
  );
}
