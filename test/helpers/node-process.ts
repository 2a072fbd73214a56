// Start real deltaset node processes for integration tests and wait until they listen.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const REPO = fileURLToPath(new URL("../../", import.meta.url));
export const BIN = fileURLToPath(new URL("../../bin/deltaset.mjs", import.meta.url));
/**
 * Extra Node.js flags for every node process started here, e.g. DELTASET_NODE_FLAGS="--cpu-prof
 * --cpu-prof-dir=/tmp/prof" to profile the nodes of a benchmark (Node refuses --cpu-prof in
 * NODE_OPTIONS).
 */
const NODE_FLAGS = (process.env.DELTASET_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "");

export interface NodeProcess {
  child: ChildProcess;
  nodeId: string;
  address: string;
  /** Everything the node logged on stderr so far. */
  logs(): string;
  /** SIGTERM and wait for exit; returns the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

/**
 * Start a node; with fileSizeLimitKiB, under that limit on the size of any file it writes (the
 * shell's ulimit -f, RLIMIT_FSIZE): a write past it fails with EFBIG (Node ignores SIGXFSZ), the
 * way a write fails on a full disk.
 */
export async function startNodeProcess(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 30_000, fileSizeLimitKiB?: number): Promise<NodeProcess> {
  const argv = [...NODE_FLAGS, BIN, "node", ...args];
  // exec: the node is the shell's process itself, so its pid is the node's (for signals).
  const [command, commandArgs] =
    fileSizeLimitKiB === undefined ? [process.execPath, argv] : ["bash", ["-c", `ulimit -f ${fileSizeLimitKiB} && exec "$0" "$@"`, process.execPath, ...argv]];
  const child = spawn(command, commandArgs, {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const lines = createInterface({ input: child.stdout! });
  const listening = new Promise<{ nodeId: string; address: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`node did not start within ${timeoutMs} ms:\n${stderr}`)), timeoutMs);
    lines.on("line", (line) => {
      try {
        const ev = JSON.parse(line) as { event?: string; nodeId: string; address: string };
        if (ev.event === "listening") {
          clearTimeout(timer);
          resolve(ev);
        }
      } catch {
        // not an event line
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`node exited with ${code} before listening:\n${stderr}`));
    });
  });
  let ev: { nodeId: string; address: string };
  try {
    ev = await listening;
  } catch (err) {
    // A node that did not come up in time must not outlive the caller.
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    throw err;
  }
  const exited = once(child, "exit");
  return {
    child,
    nodeId: ev.nodeId,
    address: ev.address,
    logs: () => stderr,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const [code] = await exited;
      return code as number | null;
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/**
 * Start nodes at the same time (each may wait for the others, e.g. as its seeds); if any fails to
 * start, the others are killed and the first failure is thrown.
 */
export async function startNodesTogether(argLists: string[][]): Promise<NodeProcess[]> {
  const all = await Promise.allSettled(argLists.map((args) => startNodeProcess(args)));
  const failed = all.find((r) => r.status === "rejected");
  if (failed === undefined) return all.map((r) => (r as PromiseFulfilledResult<NodeProcess>).value);
  await Promise.all(all.map((r) => (r.status === "fulfilled" ? r.value.kill() : undefined)));
  throw (failed as PromiseRejectedResult).reason;
}

/** Run the CLI and capture its output; with timeoutMs, a run still going then is killed (code null). */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs?: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...NODE_FLAGS, BIN, ...args], { cwd: REPO, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const [code] = await once(child, "exit");
  clearTimeout(timer);
  return { code: code as number | null, stdout, stderr };
}
