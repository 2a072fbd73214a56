// `deltaset cluster --nodes N`: N node processes on 127.0.0.11, 127.0.0.12, ... (one loopback
// address each, like separate hosts), each with its own data directory, joined through seeds.
// Prints how to reach them; Ctrl-C (or SIGTERM) stops them all gracefully. The nodes share a
// cluster key (DIR/cluster.key, made on first use, mode 0600): peers authenticate each other even
// here on loopback, as they must elsewhere.
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
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

export async function clusterCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      nodes: { type: "string", default: "3" },
      port: { type: "string", default: "7070" },
      dir: { type: "string", default: ".deltaset/cluster" },
      "first-host": { type: "string", default: "11" },
      // Peer links through per-link fault proxies: a Toxiproxy-compatible server in this process
      // (127.0.0.1:8474), or the Toxiproxy API given by --toxiproxy.
      chaos: { type: "boolean", default: false },
      toxiproxy: { type: "string" },
    },
    allowPositionals: true,
    strict: false,
  });
  // Anything after `--` (or unknown flags) goes to every node, e.g. --gossip-interval-ms 100.
  const extra = args.includes("--") ? args.slice(args.indexOf("--") + 1) : positionals;
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
  const ready = specs.map(
    (s) =>
      new Promise<void>((resolve, reject) => {
        const log = createWriteStream(s.logFile, { flags: "a" });
        const child = spawn(process.execPath, [BIN, "node", ...s.args], { stdio: ["ignore", "pipe", "pipe"] });
        children.push(child);
        child.stderr!.pipe(log);
        child.stdout!.on("data", (d: Buffer) => {
          log.write(d);
          if (d.toString().includes('"event":"listening"')) resolve();
        });
        child.once("exit", (code) => {
          if (!stopping) process.stderr.write(`node ${s.nodeId} exited with ${code}; its log: ${s.logFile}\n`);
          reject(new Error(`node ${s.nodeId} exited with ${code}`));
        });
      }),
  );
  let stopping = false;
  const stopAll = async (why: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`\n${why}: stopping ${children.length} nodes...\n`);
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            c.once("exit", () => r());
            c.kill("SIGTERM");
          }),
      ),
    );
    await proxyServer?.close();
    process.stdout.write("all nodes stopped\n");
    process.exit(0);
  };
  process.once("SIGINT", () => void stopAll("interrupted"));
  process.once("SIGTERM", () => void stopAll("terminated"));
  try {
    await Promise.all(ready);
  } catch (err) {
    await stopAll((err as Error).message);
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
