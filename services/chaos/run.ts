// One chaos run: start a cluster whose peer links go through per-link fault proxies (or use an
// external one), wait for membership, run the workload through the fault plan, heal everything,
// keep the workload going briefly, stop it, read every node until the reads are identical (or
// a bound passes), and check the history against those reads. Processes, proxies and data are
// cleaned up on every path, including an abort (Ctrl-C).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { MemberState, MembershipClient } from "../gen/deltaset/v1/membership.js";
import { call } from "../client/rpc.js";
import { seededRandom } from "../common/prng.js";
import { startToxiproxyServer, type ToxiproxyServer } from "./proxy/index.js";
import { type CheckReport, checkHistory } from "./checker.js";
import { type QueryMismatch, queryMismatches, readUntilIdentical, statesUntilIdentical } from "./final-reads.js";
import { GossipBytesMeter } from "./gossip-bytes.js";
import { HistoryRecorder, type Op } from "./history.js";
import { LinkTable, type LinkNode, precreateLinkProxies, silentLinks } from "./links.js";
import { LocalCluster } from "./local-cluster.js";
import { type FaultAction, type FaultPlan, describeAction, planScenario } from "./plan.js";
import { Workload, type WorkloadNode } from "./workload.js";

export interface RunOptions {
  scenario: string;
  nodes: number;
  /** Length of the fault phase (ms). */
  faultMs: number;
  clients: number;
  seed: number;
  /** Parent of the run's data directory (a fresh temporary directory when unset). */
  workDir?: string;
  /** Keep node data and logs after the run (default: removed when the run is valid). */
  keepData?: boolean;
  firstHost?: number;
  /** The first three octets of the local node addresses (default 127.0.0). */
  network?: string;
  port?: number;
  /** Node flags for timings etc. (local mode). */
  nodeArgs?: string[];
  /** An existing Toxiproxy API for a local run (default: a server in this process on a free port). */
  toxiproxy?: string;
  /** Run against running nodes: their addresses and the Toxiproxy API(s) of their peer links. */
  external?: { addresses: string[]; toxiproxy: string[] };
  keys?: number;
  /** Workload after the heal (ms). */
  postHealMs?: number;
  /** Longest wait for identical final reads after the workload stopped (ms). */
  settleBoundMs?: number;
  opTimeoutMs?: number;
  thinkMs?: number;
  /** Repeat a Remove that answered removed = 0 at the read's node (default true). */
  retryRemoveAtReadNode?: boolean;
  signal?: AbortSignal;
  /** Progress: fraction of the expected run time done, and what is happening. */
  onProgress?: (fraction: number, phase: string) => void;
  /** Diagnostic lines (steps carried out, phases). */
  log?: (line: string) => void;
}

export interface ExecutedStep {
  atMs: number;
  plannedAtMs: number;
  action: string;
  error?: string;
}

export interface RunResult {
  scenario: string;
  nodes: number;
  params: Record<string, unknown>;
  plan: FaultPlan;
  steps: ExecutedStep[];
  timeline: { workloadStart: number; faultStart: number; healAt: number; workloadStop: number; identicalAt: number | null; end: number };
  check: CheckReport;
  /**
   * The run's verdict: the checker's, and also identical states (digests) within the bound, every
   * final Query answer agreeing with the Scan, and traffic through every link's proxy.
   */
  valid: boolean;
  /** Why the run is not valid beyond the checker's own report (empty when it is). */
  problems: string[];
  /** Final Query answers (every element ever added, at every node) against each node's Scan. */
  finalQueries: { checked: number; mismatchCount: number; mismatches: QueryMismatch[] };
  /**
   * Bytes through each link's proxy during the run: links that passed nothing in some direction
   * (their traffic bypassed the proxies, so no fault reached it). measured: false when an API
   * serves no /metrics (a real Toxiproxy without -proxy-metrics).
   */
  linkTraffic: { measured: boolean; silentLinks: string[] };
  /** Heal to identical final reads (ms), null if they never became identical within the bound. */
  convergenceFromHealMs: number | null;
  /** Workload stop to identical final reads (ms). */
  convergenceFromStopMs: number | null;
  /**
   * Heal to identical states, causal contexts included (the keys' state digests, read once the
   * reads were identical); null if not within the bound, "unknown" if the nodes list no digests.
   */
  statesFromHealMs: number | null | "unknown";
  finalReadRounds: number;
  gossipBytes: number | null;
  gossipBytesPerNode: Record<string, number | null>;
  gossipBytesNote: string;
  /** Acknowledged and indeterminate operations per 500 ms bucket since the workload started. */
  series: { bucketMs: number; ok: number[]; info: number[] };
  dataDir: string | null;
}

/** Short membership and gossip timings so that a run of a few tens of seconds sees detection and recovery. */
export const CHAOS_NODE_ARGS = [
  "--gossip-interval-ms", "100",
  "--probe-interval-ms", "300",
  "--probe-timeout-ms", "150",
  "--reap-after-ms", "5000",
  "--gossip-rpc-timeout-ms", "2000",
  "--log-level", "info",
];

class Aborted extends Error {
  constructor() {
    super("chaos run aborted");
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Aborted());
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Aborted());
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Nodes as their Members answer names them (id and advertised address), for external runs. */
export async function discoverNodes(addresses: string[]): Promise<WorkloadNode[]> {
  const out: WorkloadNode[] = [];
  for (const address of addresses) {
    const c = new MembershipClient(address, grpc.credentials.createInsecure());
    try {
      const reply = await call(c, c.members, { includeDeparted: false }, { timeoutMs: 5000 });
      const self = reply.members.find((m) => m.nodeId === reply.self);
      out.push({ nodeId: reply.self, address: self?.address ?? address });
    } finally {
      c.close();
    }
  }
  return out;
}

/** Whether every node sees every node ALIVE. */
export async function membershipConverged(dial: WorkloadNode[], ids: string[]): Promise<boolean> {
  for (const n of dial) {
    const c = new MembershipClient(n.address, grpc.credentials.createInsecure());
    try {
      const reply = await call(c, c.members, { includeDeparted: false }, { timeoutMs: 2000 });
      const alive = new Set(reply.members.filter((m) => m.state === MemberState.ALIVE).map((m) => m.nodeId));
      if (!ids.every((id) => alive.has(id))) return false;
    } catch {
      return false;
    } finally {
      c.close();
    }
  }
  return true;
}

function buckets(ops: Op[], start: number, end: number, bucketMs: number): { ok: number[]; info: number[] } {
  const n = Math.max(1, Math.ceil((end - start) / bucketMs));
  const ok = new Array<number>(n).fill(0);
  const info = new Array<number>(n).fill(0);
  for (const o of ops) {
    if (o.kind === "read") continue;
    const i = Math.min(n - 1, Math.max(0, Math.floor((o.end - start) / bucketMs)));
    if (o.outcome === "ok") ok[i]!++;
    else if (o.outcome === "info") info[i]!++;
  }
  return { ok, info };
}

export async function runScenario(o: RunOptions): Promise<RunResult> {
  const log = o.log ?? (() => {});
  const random = seededRandom(o.seed);
  const external = o.external !== undefined;
  const postHealMs = o.postHealMs ?? 2000;
  const settleBoundMs = o.settleBoundMs ?? 30_000;
  const keys = Array.from({ length: o.keys ?? 4 }, (_, i) => `chaos-${i}`);
  const expectedMs = o.faultMs + postHealMs + 8000;
  const t0 = Date.now();
  const progress = (phase: string) => o.onProgress?.(Math.min(0.99, (Date.now() - t0) / expectedMs), phase);

  let server: ToxiproxyServer | undefined;
  let cluster: LocalCluster | undefined;
  let workload: Workload | undefined;
  let links: LinkTable | undefined;
  let dataDir: string | null = null;
  let valid = false;
  try {
    // ---- topology
    let nodes: WorkloadNode[];
    let linkNodes: LinkNode[];
    if (o.external) {
      nodes = await discoverNodes(o.external.addresses);
      const apis = o.external.toxiproxy;
      if (apis.length !== 1 && apis.length !== nodes.length) throw new Error(`--toxiproxy: give one API or one per node (${nodes.length}), not ${apis.length}`);
      linkNodes = nodes.map((n, i) => ({ ...n, toxiproxy: apis.length === 1 ? apis[0]! : apis[i]! }));
    } else {
      const parent = o.workDir ?? tmpdir();
      mkdirSync(parent, { recursive: true });
      dataDir = mkdtempSync(join(parent, `chaos-${o.scenario}-${o.nodes}n-`));
      let api = o.toxiproxy;
      if (api === undefined) {
        server = await startToxiproxyServer({ host: "127.0.0.1", port: 0 });
        api = server.url;
      }
      cluster = new LocalCluster({
        nodes: o.nodes,
        dir: dataDir,
        firstHost: o.firstHost ?? 111,
        network: o.network,
        port: o.port ?? 7070,
        nodeArgs: [...(o.nodeArgs ?? CHAOS_NODE_ARGS), "--peer-proxy", api],
        metricsPort: (o.port ?? 7070) + 1,
      });
      nodes = cluster.specs.map((s) => ({ nodeId: s.nodeId, address: s.address }));
      linkNodes = nodes.map((n) => ({ ...n, toxiproxy: api! }));
      progress("creating link proxies");
      await precreateLinkProxies(linkNodes);
      progress("starting nodes");
      await cluster.startAll();
    }
    const ids = nodes.map((n) => n.nodeId);
    // Placement (a replication factor below the node count): only a key's owners hold it. Not
    // known for an external cluster: checked as if it might place keys (the looser checks).
    const placement = external ? true : replicationBelowAll(o.nodeArgs ?? CHAOS_NODE_ARGS, ids.length);
    links = new LinkTable(linkNodes);
    const plan = planScenario(o.scenario, { nodes: ids, faultMs: o.faultMs, random, processFaults: !external });
    log(`plan ${plan.scenario}: ${plan.steps.map((s) => `@${s.atMs}ms ${describeAction(s.action)}`).join("; ")}`);

    // ---- wait for membership and for every link's proxy
    const convergeUntil = Date.now() + 30_000;
    while (!(await membershipConverged(nodes, ids))) {
      if (Date.now() > convergeUntil) throw new Error("membership did not converge within 30 s");
      progress("waiting for membership");
      await sleep(200, o.signal);
    }
    const table = links;
    const linksUntil = Date.now() + 30_000;
    for (let missing = await table.missing(); missing.length > 0; missing = await table.missing()) {
      if (Date.now() > linksUntil) throw new Error(`no proxy for links ${missing.map(([a, b]) => `${a}->${b}`).join(", ")} within 30 s`);
      progress("waiting for link proxies");
      await sleep(200, o.signal);
    }

    const bytesBefore = await table.bytesByLink();

    // ---- workload and faults
    const meter = new GossipBytesMeter((id) => cluster?.metricsAddress(id));
    await meter.begin(ids);
    const history = new HistoryRecorder();
    workload = new Workload({ nodes, clients: o.clients, keys, history, random, opTimeoutMs: o.opTimeoutMs ?? 1000, thinkMs: o.thinkMs ?? 5, retryRemoveAtReadNode: o.retryRemoveAtReadNode });
    const workloadStart = Date.now();
    workload.start();
    const faultStart = Date.now();
    const steps: ExecutedStep[] = [];
    const perform = async (a: FaultAction): Promise<void> => {
      switch (a.kind) {
        case "cut":
          await table.cut(a.links);
          return;
        case "toxic":
          await table.toxic(a.links, a.toxic);
          return;
        case "heal-links":
          await table.heal();
          return;
        case "kill":
          await meter.beforeRestart(a.node);
          await cluster!.kill(a.node);
          return;
        case "leave":
          await meter.beforeRestart(a.node);
          await cluster!.stopNode(a.node);
          return;
        case "restart":
        case "rejoin":
          await cluster!.startNode(a.node);
          return;
        case "pause":
          cluster!.pause(a.node);
          return;
        case "resume":
          cluster!.resume(a.node);
          return;
      }
    };
    for (const s of plan.steps) {
      while (Date.now() - faultStart < s.atMs) {
        progress(`fault phase (${plan.scenario})`);
        await sleep(Math.min(250, s.atMs - (Date.now() - faultStart)), o.signal);
      }
      const at = Date.now() - faultStart;
      try {
        await perform(s.action);
        steps.push({ atMs: at, plannedAtMs: s.atMs, action: describeAction(s.action) });
      } catch (err) {
        steps.push({ atMs: at, plannedAtMs: s.atMs, action: describeAction(s.action), error: (err as Error).message });
        log(`step failed: ${describeAction(s.action)}: ${(err as Error).message}`);
      }
    }
    while (Date.now() - faultStart < o.faultMs) {
      progress(`fault phase (${plan.scenario})`);
      await sleep(Math.min(250, o.faultMs - (Date.now() - faultStart)), o.signal);
    }

    // ---- heal everything
    progress("healing");
    await table.heal();
    if (cluster) {
      for (const id of cluster.paused()) cluster.resume(id);
      for (const id of cluster.down()) await cluster.startNode(id);
    }
    const healAt = Date.now();
    steps.push({ atMs: healAt - faultStart, plannedAtMs: o.faultMs, action: "heal everything" });
    while (Date.now() - healAt < postHealMs) {
      progress("workload after heal");
      await sleep(Math.min(250, postHealMs - (Date.now() - healAt)), o.signal);
    }
    progress("stopping workload");
    await workload.stop();
    const workloadStop = Date.now();

    // ---- final reads and check
    const final = await readUntilIdentical(nodes, keys, { boundMs: settleBoundMs, onRound: () => progress("final reads") });
    progress("final states");
    const statesAt = final.identicalAt === null ? null : await statesUntilIdentical(nodes, keys, { boundMs: Math.max(0, settleBoundMs - (Date.now() - workloadStop)), placement });
    const gossip = await meter.end(ids);
    const ops = history.ops();
    const check = checkHistory(ops, final.reads, { localReads: !placement });
    progress("final queries");
    const queries = await queryMismatches(nodes, final.reads, addedElements(ops));
    const bytesAfter = bytesBefore === undefined ? undefined : await table.bytesByLink();
    const silent = bytesBefore === undefined || bytesAfter === undefined ? undefined : silentLinks(bytesBefore, bytesAfter);
    const problems: string[] = [];
    if (statesAt === null && final.identicalAt !== null) problems.push("the nodes' states (causal contexts included) never became identical within the bound");
    if (queries.mismatches.length > 0) problems.push(`${queries.mismatches.length} final Query answers disagree with the node's own Scan`);
    if (silent !== undefined && silent.length > 0) problems.push(`no traffic went through the proxies of links ${silent.join(", ")}: faults could not reach them`);
    const end = Date.now();
    valid = check.valid && problems.length === 0;
    if (dataDir !== null && (o.keepData || !valid)) {
      // For investigation: the whole history and the final reads, next to the node logs.
      writeFileSync(join(dataDir, "history.jsonl"), ops.map((op) => JSON.stringify(op)).join("\n") + "\n");
      writeFileSync(join(dataDir, "final-reads.json"), JSON.stringify(final.reads));
    }
    const s = buckets(ops, workloadStart, workloadStop, 500);
    return {
      scenario: plan.scenario,
      nodes: ids.length,
      params: {
        scenario: plan.scenario,
        nodes: ids.length,
        faultMs: o.faultMs,
        postHealMs,
        settleBoundMs,
        clients: o.clients,
        seed: o.seed,
        keys: keys.length,
        opTimeoutMs: o.opTimeoutMs ?? 1000,
        retryRemoveAtReadNode: o.retryRemoveAtReadNode ?? true,
        external,
        nodeArgs: external ? null : (o.nodeArgs ?? CHAOS_NODE_ARGS),
      },
      plan,
      steps,
      timeline: { workloadStart, faultStart, healAt, workloadStop, identicalAt: final.identicalAt, end },
      check,
      valid,
      problems,
      finalQueries: { checked: queries.checked, mismatchCount: queries.mismatches.length, mismatches: queries.mismatches.slice(0, 20) },
      linkTraffic: { measured: silent !== undefined, silentLinks: silent ?? [] },
      convergenceFromHealMs: final.identicalAt === null ? null : final.identicalAt - healAt,
      convergenceFromStopMs: final.identicalAt === null ? null : final.identicalAt - workloadStop,
      statesFromHealMs: statesAt === "unknown" ? "unknown" : statesAt === null ? null : statesAt - healAt,
      finalReadRounds: final.rounds,
      gossipBytes: gossip.total,
      gossipBytesPerNode: gossip.perNode,
      gossipBytesNote:
        gossip.total === null
          ? "not measured: some node has no metrics endpoint or did not answer (external nodes need --metrics-listen)"
          : "anti-entropy payload bytes sent by all nodes during the workload (deltaset_gossip_sent_bytes_total: delta + state + ack; without gRPC framing)",
      series: { bucketMs: 500, ...s },
      dataDir: o.keepData || !valid ? dataDir : null,
    };
  } finally {
    // Every path: stop the clients, heal and stop the nodes, close the proxy server.
    if (workload) {
      await Promise.race([workload.stop(), sleep(5000).catch(() => {})]);
      workload.close();
    }
    // An external cluster keeps running: leave its links healed.
    if (external && links) await links.heal().catch((err) => log(`heal after the run failed: ${(err as Error).message}`));
    if (cluster) await cluster.stopAll();
    if (server) await server.close();
    if (dataDir !== null && valid && !o.keepData) rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Every element an add was invoked for, by key (what the final Query check asks each node). */
function addedElements(ops: readonly Op[]): Map<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const op of ops) {
    if (op.kind !== "add") continue;
    const set = out.get(op.key) ?? new Set<string>();
    set.add(op.element);
    out.set(op.key, set);
  }
  return new Map([...out].map(([k, v]) => [k, [...v].sort()]));
}

/** Whether node flags give a replication factor below the node count. */
function replicationBelowAll(args: readonly string[], nodes: number): boolean {
  let factor: string | undefined;
  args.forEach((a, i) => {
    if (a === "--replication-factor") factor = args[i + 1];
    else if (a.startsWith("--replication-factor=")) factor = a.slice("--replication-factor=".length);
  });
  return factor !== undefined && factor !== "all" && Number(factor) < nodes;
}
