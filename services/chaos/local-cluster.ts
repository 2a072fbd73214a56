// The node processes of a local chaos run: started like `deltaset cluster` (planCluster: one
// loopback address per node, every other node a seed), and killed, paused, stopped gracefully
// and restarted one by one. Every child is killed when this process exits, however it exits.
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { type ClusterNodeSpec, planCluster } from "../node/cluster-plan.js";

/**
 * Extra Node.js flags for every node process, e.g. DELTASET_NODE_FLAGS="--cpu-prof
 * --cpu-prof-dir=/tmp/prof" to profile the nodes of a chaos run or an eval cell (Node refuses
 * --cpu-prof in NODE_OPTIONS).
 */
const NODE_FLAGS = (process.env.DELTASET_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "");

const BIN = fileURLToPath(new URL("../../bin/deltaset.mjs", import.meta.url));

export interface LocalClusterOptions {
  nodes: number;
  dir: string;
  firstHost: number;
  /** The first three octets of the node addresses (default 127.0.0). */
  network?: string;
  port: number;
  /** Extra node flags (timings, --peer-proxy, ...). */
  nodeArgs: string[];
  /** Port of each node's metrics endpoint on its own address (0: no metrics). */
  metricsPort?: number;
  startTimeoutMs?: number;
}

interface Running {
  child: ChildProcess;
  exited: Promise<void>;
  paused: boolean;
}

/** Children of every LocalCluster in this process, killed on exit. */
const everyChild = new Set<ChildProcess>();
let exitHook = false;
function killOnExit(child: ChildProcess): void {
  everyChild.add(child);
  child.once("exit", () => everyChild.delete(child));
  if (exitHook) return;
  exitHook = true;
  process.once("exit", () => {
    for (const c of everyChild) {
      try {
        c.kill("SIGCONT");
        c.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
  });
}

export class LocalCluster {
  readonly specs: ClusterNodeSpec[];
  private readonly running = new Map<string, Running>();
  private readonly logs = new Map<string, WriteStream>();

  constructor(private readonly o: LocalClusterOptions) {
    const specs = planCluster({ nodes: o.nodes, port: o.port, dir: o.dir, firstHost: o.firstHost, network: o.network, extra: o.nodeArgs });
    this.specs = specs.map((s) => {
      if (!o.metricsPort) return s;
      const host = s.address.slice(0, s.address.lastIndexOf(":"));
      return { ...s, args: [...s.args, "--metrics-listen", `${host}:${o.metricsPort}`] };
    });
  }

  get nodeIds(): string[] {
    return this.specs.map((s) => s.nodeId);
  }

  spec(nodeId: string): ClusterNodeSpec {
    const s = this.specs.find((x) => x.nodeId === nodeId);
    if (s === undefined) throw new Error(`no node ${nodeId}`);
    return s;
  }

  /** host:port of a node's metrics endpoint, if metrics are on. */
  metricsAddress(nodeId: string): string | undefined {
    if (!this.o.metricsPort) return undefined;
    const a = this.spec(nodeId).address;
    return `${a.slice(0, a.lastIndexOf(":"))}:${this.o.metricsPort}`;
  }

  /** The process id of a running node. */
  pid(nodeId: string): number | undefined {
    return this.running.get(nodeId)?.child.pid;
  }

  isUp(nodeId: string): boolean {
    return this.running.has(nodeId);
  }

  isPaused(nodeId: string): boolean {
    return this.running.get(nodeId)?.paused === true;
  }

  async startAll(): Promise<void> {
    mkdirSync(this.o.dir, { recursive: true });
    await Promise.all(this.specs.map((s) => this.startNode(s.nodeId)));
  }

  /** Start (or restart) one node and wait until it listens. */
  async startNode(nodeId: string): Promise<void> {
    if (this.running.has(nodeId)) return;
    const s = this.spec(nodeId);
    let log = this.logs.get(nodeId);
    if (log === undefined) {
      log = createWriteStream(s.logFile, { flags: "a" });
      this.logs.set(nodeId, log);
    }
    const child = spawn(process.execPath, [...NODE_FLAGS, BIN, "node", ...s.args], { stdio: ["ignore", "pipe", "pipe"] });
    killOnExit(child);
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const entry: Running = { child, exited, paused: false };
    this.running.set(nodeId, entry);
    child.stderr!.pipe(log, { end: false });
    const lines = createInterface({ input: child.stdout! });
    const timeoutMs = this.o.startTimeoutMs ?? 30_000;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`node ${nodeId} did not listen within ${timeoutMs} ms (log: ${s.logFile})`)), timeoutMs);
        lines.on("line", (line) => {
          log!.write(line + "\n");
          if (line.includes('"event":"listening"')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once("exit", (code, signal) => {
          clearTimeout(timer);
          reject(new Error(`node ${nodeId} exited (${code ?? signal}) before listening (log: ${s.logFile})`));
        });
      });
    } catch (err) {
      await this.kill(nodeId);
      throw err;
    }
    void exited.then(() => {
      if (this.running.get(nodeId) === entry) this.running.delete(nodeId);
    });
  }

  /** SIGKILL and wait for the exit. */
  async kill(nodeId: string): Promise<void> {
    const r = this.running.get(nodeId);
    if (r === undefined) return;
    r.child.kill("SIGKILL");
    await r.exited;
    this.running.delete(nodeId);
  }

  /** SIGTERM (the node leaves the cluster gracefully and drains); SIGKILL after the bound. */
  async stopNode(nodeId: string, boundMs = 20_000): Promise<void> {
    const r = this.running.get(nodeId);
    if (r === undefined) return;
    if (r.paused) this.resume(nodeId);
    r.child.kill("SIGTERM");
    const timer = setTimeout(() => r.child.kill("SIGKILL"), boundMs);
    await r.exited;
    clearTimeout(timer);
    this.running.delete(nodeId);
  }

  pause(nodeId: string): void {
    const r = this.running.get(nodeId);
    if (r === undefined || r.paused) return;
    r.child.kill("SIGSTOP");
    r.paused = true;
  }

  resume(nodeId: string): void {
    const r = this.running.get(nodeId);
    if (r === undefined || !r.paused) return;
    r.child.kill("SIGCONT");
    r.paused = false;
  }

  /** Nodes that are not running (killed or left). */
  down(): string[] {
    return this.nodeIds.filter((id) => !this.running.has(id));
  }

  paused(): string[] {
    return this.nodeIds.filter((id) => this.isPaused(id));
  }

  /** Stop every node gracefully (bounded), then close the log files. */
  async stopAll(): Promise<void> {
    for (const id of this.paused()) this.resume(id);
    await Promise.all([...this.running.keys()].map((id) => this.stopNode(id, 10_000)));
    for (const l of this.logs.values()) l.end();
    this.logs.clear();
  }
}
