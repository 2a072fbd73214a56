// Node configuration: defaults < JSON config file < environment (DELTASET_*) < command-line flags.
// Every limit is here, so every limit is configurable. Flags and environment names, with a
// description of each setting, are in the per-subsystem tables of settings.ts.
import { KeyTypeRuleSyntaxError, KeyTypeRules } from "../store/key-type-rules.js";
import { readFileSync } from "node:fs";
import { DEFAULT_MEMBERSHIP_CONFIG, type MembershipConfig, resolveConfig } from "../membership/config.js";
import type { Limits } from "../replica/limits.js";
import { isLoopbackHost } from "./loopback.js";
import type { ReplicationFactor } from "../gossip/placement.js";
import { CONFIG_FILE_SETTING, SETTINGS, type Setting } from "./settings.js";

// The request limits belong to the Replica service; the node configures them.
export type { Limits } from "../replica/limits.js";

export interface GossipSettings {
  /** Milliseconds between anti-entropy rounds. */
  intervalMs: number;
  /** 'alg2' (acked delta intervals, the default) or 'alg1' (delta-groups). */
  algorithm: "alg1" | "alg2";
  /** Algorithm 1's choose: ship full state, the delta-group, or the delta-group with a periodic full state. */
  choose: "state" | "delta" | "delta+periodic-state";
  /** Avoid back-propagation of deltas to their origin. */
  bp: boolean;
  /** Buffer only the new part of received deltas. */
  rr: boolean;
  /** Delta buffer size per partition, in bytes, before falling back to full state. */
  maxBufferBytes: number;
  /** Elements per chunk of a full-state transfer. */
  stateChunkEntries: number;
  /** A full-state stream ends after the partition that brings it to this many payload bytes; the rest follow in the next. */
  stateStreamBytes: number;
  /** A full-state stream that moves nothing for this many ms is cancelled. */
  stateStreamStallMs: number;
  /** Ask a neighbour what it holds before pushing a partition's full state, and push only what it lacks. */
  catchUpByContexts: boolean;
  /** Most bytes of a Contexts answer this node gives (keys past it are pushed whole). */
  contextsReplyBytes: number;
  /** How long a neighbour answered Contexts for a partition holds it against other pushers. */
  contextsClaimMs: number;
  /** Partitions of a full-state push whose Contexts question is on its way before the stream reaches them. */
  contextsAhead: number;
  /** Deadline of one gossip RPC, in milliseconds. */
  rpcTimeoutMs: number;
  /** Algorithm 1: forward what was received (the new part of it) as well as local deltas. */
  transitive: boolean;
  /**
   * A received full state whose new part exceeds this many elements is forwarded to the other
   * neighbours by full state instead of being held in the delta buffer (NodeGossip's own name;
   * flag --gossip-max-forward-elements).
   */
  maxBufferedStateElements: number;
  /**
   * Probability (0..1) of dropping each outgoing gossip send, seeded by lossSeed: message loss
   * inside the gossip layer, for tests of the algorithms over lossy channels. 0 in production.
   */
  lossRate: number;
  lossSeed: number;
  /** Algorithm 2: push local changes to every neighbour this many ms after them (0: wait for the period). */
  pushLocalMs: number;
  /** A push whose call failed goes again after this many ms (or pushLocalMs, if longer), doubling per failure up to the period. */
  pushRetryMs: number;
  /** Settle announcements of probabilistic sets: quiet time in ms before a key is sent whole (0: off). */
  settleMs: number;
  /** Largest encoded state a settle announcement sends. */
  settleMaxBytes: number;
  /** A key still changing this many ms after its first unannounced change is announced anyway (0: only once quiet). */
  settleMaxWaitMs: number;
  /** Encoded bytes of settle announcements one gossip period sends, at most (the rest wait). */
  settleBytesPerPeriod: number;
  /** Encoded bytes of refused counter joins held to be joined again once their key changes (gossip/refused-joins.ts). */
  refusedJoinsBytes: number;
  /** Who a node gossips with: every live member, or its fingers in a ring of the live members (gossip/overlay.ts). */
  overlay: "all" | "fingers";
  /** Frames go on one long-lived ExchangeStream per neighbour (false: an Exchange call each). */
  exchangeStream: boolean;
  /** Frames of one incoming ExchangeStream applied at once; past it the stream is paused. */
  streamFramesInFlight: number;
}

/** The membership core's own settings, under the same names (see membership/config.ts). */
export type MembershipSettings = MembershipConfig;

export interface TlsSettings {
  cert?: string;
  key?: string;
  ca?: string;
  /**
   * With a CA: require node certificates of peers (mutual TLS, the default). false: the CA only
   * verifies the peers a node dials (server TLS everywhere); peers then prove themselves with the
   * cluster key, so one certificate may serve every node.
   */
  mutual?: boolean;
}

/** LevelDB settings (see Store.open). */
export interface StorageSettings {
  /** Bytes of writes LevelDB gathers in memory before it sorts them into a file. */
  writeBufferBytes: number;
  /** Bytes of LevelDB's block cache for reads. */
  cacheBytes: number;
  /** Memory for decoded whole states kept between operations, as estimated (store/decoded-states.ts). */
  stateCacheBytes: number;
  /** Memory for the presence filters of add-wins sets, which spare the reads of new elements (store/element-presence.ts). */
  presenceFilterBytes: number;
}

export interface NodeConfig {
  listen: string;
  advertise: string;
  dataDir: string;
  nodeId?: string;
  cluster: string;
  seeds: string[];
  seedsDns?: string;
  /** Static peers (the cluster launcher's list before membership; kept for tests). */
  peers: string[];
  /** Key types fixed by prefix, "PREFIX=TYPE" each (store/key-type-rules.ts). */
  keyTypes: string[];
  partitions: number;
  /** Owners per partition: "all" (full replication) or a positive integer, as text (replicationFactorOf). */
  replicationFactor: string;
  /**
   * How long a forwarded part of a stream waits for an owner (ms): an Import for an owner's
   * connection before trying the next, each add an AddStream forwards for its answer.
   */
  forwardTimeoutMs: number;
  /**
   * The longest a write asking for copies (Add, Remove, Increment, Delete, Merge, Import, an AddStream batch) waits for the other nodes'
   * acknowledgements before it answers DEADLINE_EXCEEDED (ms); the call's deadline, when sooner, wins.
   */
  copiesTimeoutMs: number;
  /**
   * For this long after a partition's owners changed (ms), a Query, Scan or Export that finds its
   * key absent at one owner asks the next (a new owner may not have received the partition yet); 0: never.
   */
  readAfterMoveMs: number;
  /**
   * Reconnecting to a peer after its connection failed: the first wait (ms), growing 1.6x per
   * failure in a row up to peerReconnectMaxMs. Calls to the peer fail at once meanwhile.
   */
  peerReconnectInitialMs: number;
  peerReconnectMaxMs: number;
  sync: "fsync" | "buffered";
  /** Operations queued that start a group commit at once; fewer wait for the end of the event loop's turn. */
  groupCommitStartOperations: number;
  storage: StorageSettings;
  /** The garbage collection of adds whose time to live ran out. */
  ttlSweep: { periodMs: number; batch: number };
  /** host:port (or a port, for 127.0.0.1) of the Prometheus endpoint (path /metrics); metrics are off when unset. */
  metricsListen?: string;
  /** Allow a non-loopback metrics address (plain HTTP, shows the node id). */
  metricsExpose: boolean;
  /** Span exporter: off (default), console (stdout), none (record, export nothing), otlp. */
  tracing: "off" | "console" | "none" | "otlp";
  /** OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces); required by tracing=otlp. */
  otlpEndpoint?: string;
  logLevel: "debug" | "info" | "warn" | "error";
  drainTimeoutMs: number;
  /**
   * On SIGTERM, once running calls ended: how long the node waits for its neighbours to acknowledge
   * what it holds (gossip Algorithm 2) before it leaves the cluster.
   */
  leaveTimeoutMs: number;
  /**
   * Most elements whose Remove waits here for adds its context covers that this node has not
   * received yet (deferred removes, applied when the adds arrive); past it a Remove with such a
   * context answers RESOURCE_EXHAUSTED.
   */
  maxPendingRemoves: number;
  /** Most dots not yet received here that one Remove's context may name. */
  maxRemoveUnseenDots: number;
  /** Most replica ids of adds not received here that one element's deferred remove may wait for. */
  maxRemoveUnseenReplicas: number;
  /** Most bytes of all deferred removes kept here (key, element and unseen context of each). */
  maxPendingRemoveBytes: number;
  /**
   * B: the most any two nodes' clocks are assumed to differ (ms). The retry filters of counters and
   * filter keys remember request ids for (N+1)·P - B; a received filter that puts its sender
   * further away is reported.
   */
  maxClockSkewMs: number;
  limits: Limits;
  gossip: GossipSettings;
  membership: MembershipSettings;
  tls: TlsSettings;
  authTokensFile?: string;
  /** Cluster keys (one per line; the first signs, all verify): peers prove membership with them. */
  clusterKeyFile?: string;
  /**
   * Allow a non-loopback listen address with neither a cluster key nor mutual TLS (peer calls are
   * then unauthenticated: anyone who reaches the port can gossip and change membership).
   */
  insecurePeers: boolean;
  /**
   * Allow a non-loopback listen address without client tokens (the client API is then open to
   * whoever reaches the port: reads, writes, deletes, merges).
   */
  insecureClients: boolean;
  /**
   * Accept unary peer calls whose proof names no body digest in metadata (nodes of an earlier
   * version, during a rolling upgrade): their messages are decoded before the proof is checked.
   */
  peerLegacyProofs: boolean;
  /** HTTP/2 streams (calls) one client connection may have open at once; more wait for one to end. */
  maxConcurrentStreams: number;
  /** Toxiproxy API used to route peer links through per-link proxies (chaos runs). */
  peerProxy?: string;
}

export const DEFAULT_CONFIG: NodeConfig = {
  listen: "127.0.0.1:7070",
  advertise: "",
  dataDir: ".deltaset/data",
  cluster: "deltaset",
  seeds: [],
  keyTypes: [],
  peers: [],
  partitions: 64,
  replicationFactor: "all",
  forwardTimeoutMs: 10_000,
  copiesTimeoutMs: 5000,
  readAfterMoveMs: 30_000,
  peerReconnectInitialMs: 100,
  peerReconnectMaxMs: 2000,
  sync: "fsync",
  groupCommitStartOperations: 16,
  storage: {
    // 4x LevelDB's default: bulk loads then flush and compact a third as often (measured by
    // npm run bench:replica), for up to twice this much memory.
    writeBufferBytes: 16 * 1024 * 1024,
    cacheBytes: 8 * 1024 * 1024,
    stateCacheBytes: 256 * 1024 * 1024,
    presenceFilterBytes: 64 * 1024 * 1024,
  },
  ttlSweep: { periodMs: 1000, batch: 10_000 },
  logLevel: "info",
  tracing: "off",
  drainTimeoutMs: 20_000,
  leaveTimeoutMs: 15_000,
  maxPendingRemoves: 10_000,
  maxRemoveUnseenDots: 1_000_000,
  maxRemoveUnseenReplicas: 4096,
  maxPendingRemoveBytes: 16 * 1024 * 1024,
  maxClockSkewMs: 2000,
  limits: {
    maxKeyBytes: 1024,
    maxElementBytes: 64 * 1024,
    maxElementsPerCall: 10_000,
    maxRequestEntries: 100_000,
    maxMessageBytes: 16 * 1024 * 1024,
    defaultPageSize: 100,
    maxPageSize: 10_000,
    defaultScanChunk: 1000,
    maxScanChunk: 10_000,
    defaultExportChunk: 1000,
    maxExportChunk: 10_000,
    maxExportChunkBytes: 1024 * 1024,
    streamWindow: 1024,
    streamWindowBytes: 8 * 1024 * 1024,
    streamForwardedAdds: 16,
    maxWatchers: 1000,
    watchBuffer: 10_000,
    streamStallMs: 60_000,
    maxFilterBytes: 16 * 1024 * 1024,
    maxStateBytes: 128 * 1024 * 1024,
    maxRequestIdBytes: 128,
  },
  gossip: {
    intervalMs: 200,
    algorithm: "alg2",
    choose: "delta+periodic-state",
    bp: true,
    rr: true,
    maxBufferBytes: 8 * 1024 * 1024,
    stateChunkEntries: 1000,
    stateStreamBytes: 8 * 1024 * 1024,
    stateStreamStallMs: 30_000,
    catchUpByContexts: true,
    contextsReplyBytes: 4 * 1024 * 1024,
    contextsClaimMs: 10_000,
    contextsAhead: 32,
    rpcTimeoutMs: 5000,
    transitive: true,
    maxBufferedStateElements: 10_000,
    lossRate: 0,
    lossSeed: 1,
    pushLocalMs: 0,
    pushRetryMs: 100,
    settleMs: 2000,
    settleMaxBytes: 1024 * 1024,
    settleMaxWaitMs: 30_000,
    settleBytesPerPeriod: 4 * 1024 * 1024,
    refusedJoinsBytes: 16 * 1024 * 1024,
    overlay: "all",
    exchangeStream: true,
    streamFramesInFlight: 32,
  },
  membership: { ...DEFAULT_MEMBERSHIP_CONFIG },
  tls: {},
  insecurePeers: false,
  insecureClients: false,
  peerLegacyProofs: false,
  maxConcurrentStreams: 1000,
  metricsExpose: false,
};

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** The flags `deltaset node` accepts (for parseArgs), each taking a value: pass the arguments through withBoolValues first. */
export function configFlags(): Record<string, { type: "string" }> {
  const out: Record<string, { type: "string" }> = { [CONFIG_FILE_SETTING.flag]: { type: "string" } };
  for (const s of SETTINGS) for (const flag of flagNames(s)) out[flag] = { type: "string" };
  return out;
}

/** A setting's flag and its older names (without the leading --). */
function flagNames(s: Setting): string[] {
  return [s.flag, ...(s.aliases?.flags ?? [])];
}

const BOOL_WORD = /^(1|0|true|false|yes|no|on|off)$/i;

/**
 * Boolean flags alone mean true: `--insecure-peers` becomes `--insecure-peers true`, so every
 * boolean takes `--flag`, `--flag false` and `--flag=false` alike (and a false on the command line
 * wins over a true from the environment or a config file).
 */
export function withBoolValues(args: readonly string[]): string[] {
  const bools = new Set<string>();
  for (const s of SETTINGS) if (s.kind === "bool") for (const flag of flagNames(s)) bools.add(`--${flag}`);
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      out.push(...args.slice(i));
      break;
    }
    out.push(a);
    if (bools.has(a) && !BOOL_WORD.test(args[i + 1] ?? "")) out.push("true");
  }
  return out;
}

/** A setting's value from a flag, or else from its older flag names. */
function fromFlags(s: Setting, flags: Record<string, string | boolean | undefined>): [string, string | boolean] | undefined {
  for (const flag of flagNames(s)) if (flags[flag] !== undefined) return [`--${flag}`, flags[flag]!];
  return undefined;
}

/** A setting's value from its environment variable, or else from its older names. */
function fromEnv(s: Setting, env: NodeJS.ProcessEnv): [string, string] | undefined {
  for (const name of [s.env, ...(s.aliases?.envs ?? [])]) {
    const raw = env[name];
    if (raw !== undefined && raw !== "") return [name, raw];
  }
  return undefined;
}

/** Moves settings a config file gives under an older path to their current one. */
function renameOlderPaths(parsed: Record<string, unknown>): void {
  for (const s of SETTINGS) {
    for (const old of s.aliases?.paths ?? []) {
      const [oldParent, oldKey] = parentOf(parsed, old);
      if (oldParent === undefined || !(oldKey in oldParent)) continue;
      const value = oldParent[oldKey];
      delete oldParent[oldKey];
      const [parent, key] = parentOf(parsed, s.path);
      if (parent !== undefined && !(key in parent)) parent[key] = value;
    }
  }
}

function parentOf(obj: Record<string, unknown>, path: string): [Record<string, unknown> | undefined, string] {
  const parts = path.split(".");
  let cur: unknown = obj;
  for (const p of parts.slice(0, -1)) cur = cur !== null && typeof cur === "object" ? (cur as Record<string, unknown>)[p] : undefined;
  const ok = cur !== null && typeof cur === "object" && !Array.isArray(cur);
  return [ok ? (cur as Record<string, unknown>) : undefined, parts[parts.length - 1]!];
}

/** Sizes and times: decimal digits only (Number() would also take "1e3", "0x40" and " 12 "). */
const PLAIN_INTEGER = /^[0-9]+$/;
/** Fractions: a decimal number, optionally with an exponent (0.5, .25, 1e-3); no hex, no blanks. */
const PLAIN_DECIMAL = /^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/;

function parseValue(kind: string, raw: string, source: string): unknown {
  switch (kind) {
    case "int": {
      const n = Number(raw);
      if (!PLAIN_INTEGER.test(raw) || !Number.isSafeInteger(n)) {
        throw new ConfigError(`${source}: "${raw}" is not a non-negative integer (decimal digits only, at most ${Number.MAX_SAFE_INTEGER})`);
      }
      return n;
    }
    case "fraction": {
      const n = Number(raw);
      if (!PLAIN_DECIMAL.test(raw) || !Number.isFinite(n) || n < 0 || n > 1) throw new ConfigError(`${source}: "${raw}" is not a number from 0 to 1`);
      return n;
    }
    case "bool":
      if (/^(1|true|yes|on)$/i.test(raw)) return true;
      if (/^(0|false|no|off)$/i.test(raw)) return false;
      throw new ConfigError(`${source}: "${raw}" is not a boolean (true/false)`);
    case "list":
      return raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
    default:
      return raw;
  }
}

/**
 * A setting's value as a config file gives it, checked like a flag's: JSON numbers, booleans and
 * arrays as such, or the text a flag would take ("64", "true", "a,b").
 */
function fileValue(s: Setting, value: unknown, source: string): unknown {
  if (value === null || value === undefined) return undefined;
  if (typeof value === "string") return parseValue(s.kind, value, source);
  // A number where text is kept ("replicationFactor": 3) is its text.
  if (s.kind === "string" && typeof value === "number" && Number.isFinite(value)) return String(value);
  const ok =
    s.kind === "int"
      ? Number.isSafeInteger(value) && (value as number) >= 0
      : s.kind === "fraction"
        ? typeof value === "number" && value >= 0 && value <= 1
        : s.kind === "bool"
          ? typeof value === "boolean"
          : s.kind === "list"
            ? Array.isArray(value) && value.every((x) => typeof x === "string")
            : false;
  const want = { int: "a non-negative integer", fraction: "a number from 0 to 1", bool: "a boolean", list: "a list of strings", string: "a string" }[s.kind];
  if (!ok) throw new ConfigError(`${source}: ${JSON.stringify(value)} is not ${want}`);
  return value;
}

function setPath(obj: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split(".");
  let cur = obj;
  for (const p of parts.slice(0, -1)) cur = cur[p] as Record<string, unknown>;
  cur[parts[parts.length - 1]!] = value;
}

function mergeDeep(target: Record<string, unknown>, source: Record<string, unknown>, where: string): void {
  for (const [k, v] of Object.entries(source)) {
    if (!(k in target)) throw new ConfigError(`${where}: unknown setting "${k}"`);
    const t = target[k];
    if (t !== null && typeof t === "object" && !Array.isArray(t) && v !== null && typeof v === "object" && !Array.isArray(v)) {
      mergeDeep(t as Record<string, unknown>, v as Record<string, unknown>, `${where}.${k}`);
    } else {
      target[k] = v;
    }
  }
}

/** Build the effective configuration. flags: parsed --flag values (strings). */
export function loadConfig(flags: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv = process.env): NodeConfig {
  const cfg = structuredClone(DEFAULT_CONFIG) as unknown as Record<string, unknown>;
  // Optional-only fields must exist as keys so that a config file may set them.
  for (const k of ["nodeId", "seedsDns", "metricsListen", "otlpEndpoint", "authTokensFile", "clusterKeyFile", "peerProxy"]) cfg[k] ??= undefined;
  const file = (typeof flags.config === "string" ? flags.config : undefined) ?? env.DELTASET_CONFIG;
  if (file !== undefined && file !== "") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, "utf8"));
    } catch (err) {
      throw new ConfigError(`config file ${file}: ${(err as Error).message}`);
    }
    if (parsed === null || typeof parsed !== "object") throw new ConfigError(`config file ${file}: not a JSON object`);
    renameOlderPaths(parsed as Record<string, unknown>);
    mergeDeep(cfg, parsed as Record<string, unknown>, `config file ${file}`);
    for (const s of SETTINGS) {
      const [parent, key] = parentOf(parsed as Record<string, unknown>, s.path);
      if (parent !== undefined && key in parent) setPath(cfg, s.path, fileValue(s, parent[key], `config file ${file}: ${s.path}`));
    }
  }
  for (const s of SETTINGS) {
    const found = fromEnv(s, env);
    if (found !== undefined) setPath(cfg, s.path, parseValue(s.kind, found[1], found[0]));
  }
  for (const s of SETTINGS) {
    const found = fromFlags(s, flags);
    if (found !== undefined) setPath(cfg, s.path, parseValue(s.kind, String(found[1]), found[0]));
  }
  const c = cfg as unknown as NodeConfig;
  if (c.advertise === "") c.advertise = c.listen;
  validateConfig(c);
  return c;
}

/** Node runs a timer longer than this after 1 ms instead, so no time setting may exceed it. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** The shortest period of a recurring task (a gossip round, a probe, a sweep): below it an idle node spins. */
export const MIN_PERIOD_MS = 10;

/** A setting's value in a configuration, by its dotted path. */
function valueAt(c: NodeConfig, path: string): unknown {
  let cur: unknown = c;
  for (const p of path.split(".")) cur = cur !== null && typeof cur === "object" ? (cur as Record<string, unknown>)[p] : undefined;
  return cur;
}

/** Times (settings named ...Ms) fit a Node timer; periods of recurring tasks are not too short to idle. */
function checkTimes(c: NodeConfig): void {
  for (const s of SETTINGS) {
    if (s.kind !== "int" || !s.path.endsWith("Ms")) continue;
    const v = valueAt(c, s.path);
    if (typeof v === "number" && v > MAX_TIMER_MS) {
      throw new ConfigError(`${s.path} (--${s.flag}) must be at most ${MAX_TIMER_MS} ms (about 24.8 days, the longest timer Node runs), not ${v}`);
    }
  }
  const periods: Array<[string, string, number, boolean]> = [
    ["gossip.intervalMs", "gossip-interval-ms", c.gossip.intervalMs, false],
    ["membership.probeIntervalMs", "probe-interval-ms", c.membership.probeIntervalMs, false],
    ["membership.pushPullIntervalMs", "push-pull-interval-ms", c.membership.pushPullIntervalMs, true],
    ["ttlSweep.periodMs", "ttl-sweep-ms", c.ttlSweep.periodMs, false],
  ];
  for (const [path, flag, v, zeroIsOff] of periods) {
    if (zeroIsOff && v === 0) continue;
    if (!(Number.isInteger(v) && v >= MIN_PERIOD_MS)) {
      throw new ConfigError(`${path} (--${flag}) must be an integer of at least ${MIN_PERIOD_MS} (ms)${zeroIsOff ? ", or 0 (off)" : ""}, not ${v}: a shorter period keeps an idle node busy`);
    }
  }
}

export function validateConfig(c: NodeConfig): void {
  checkTimes(c);
  if (!(Number.isInteger(c.maxClockSkewMs) && c.maxClockSkewMs >= 0)) throw new ConfigError("maxClockSkewMs (--max-clock-skew-ms) must be a non-negative integer");
  const shape = /^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/;
  const isHostPort = (v: string) => shape.test(v) && Number(v.slice(v.lastIndexOf(":") + 1)) <= 65535;
  if (!isHostPort(c.listen)) throw new ConfigError(`listen (--listen) "${c.listen}" is not host:port with a port of 0 to 65535`);
  if (!isHostPort(c.advertise)) throw new ConfigError(`advertise (--advertise) "${c.advertise}" is not host:port with a port of 0 to 65535`);
  for (const s of [...c.seeds, ...c.peers]) if (!isHostPort(s)) throw new ConfigError(`peer/seed "${s}" is not host:port with a port of 0 to 65535`);
  try {
    KeyTypeRules.parse(c.keyTypes);
  } catch (err) {
    if (err instanceof KeyTypeRuleSyntaxError) throw new ConfigError(`${err.message} (--key-types)`);
    throw err;
  }
  if (!Number.isInteger(c.partitions) || c.partitions < 1 || c.partitions > 65535) throw new ConfigError(`partitions must be 1..65535, not ${c.partitions}`);
  replicationFactorOf(c);
  if (!(Number.isInteger(c.forwardTimeoutMs) && c.forwardTimeoutMs > 0)) throw new ConfigError(`forwardTimeoutMs (--forward-timeout-ms) must be a positive integer, not ${c.forwardTimeoutMs}`);
  if (!(Number.isInteger(c.copiesTimeoutMs) && c.copiesTimeoutMs > 0)) throw new ConfigError(`copiesTimeoutMs (--copies-timeout-ms) must be a positive integer, not ${c.copiesTimeoutMs}`);
  if (!(Number.isInteger(c.readAfterMoveMs) && c.readAfterMoveMs >= 0)) throw new ConfigError(`readAfterMoveMs (--read-after-move-ms) must be a non-negative integer, not ${c.readAfterMoveMs}`);
  if (!(Number.isInteger(c.peerReconnectInitialMs) && c.peerReconnectInitialMs > 0)) throw new ConfigError(`peerReconnectInitialMs (--peer-reconnect-initial-ms) must be a positive integer, not ${c.peerReconnectInitialMs}`);
  if (!(Number.isInteger(c.peerReconnectMaxMs) && c.peerReconnectMaxMs >= c.peerReconnectInitialMs)) {
    throw new ConfigError(`peerReconnectMaxMs (--peer-reconnect-max-ms) must be an integer of at least --peer-reconnect-initial-ms (${c.peerReconnectInitialMs}), not ${c.peerReconnectMaxMs}`);
  }
  if (c.sync !== "fsync" && c.sync !== "buffered") throw new ConfigError(`sync must be "fsync" or "buffered", not "${c.sync}"`);
  if (!(Number.isInteger(c.groupCommitStartOperations) && c.groupCommitStartOperations >= 1)) {
    throw new ConfigError(`groupCommitStartOperations (--group-commit-start-operations) must be a positive integer, not ${c.groupCommitStartOperations}`);
  }
  if (!["debug", "info", "warn", "error"].includes(c.logLevel)) throw new ConfigError(`log level "${c.logLevel}" is not debug, info, warn or error`);
  if (c.gossip.algorithm !== "alg1" && c.gossip.algorithm !== "alg2") throw new ConfigError(`gossip algorithm must be alg1 or alg2`);
  if (c.gossip.overlay !== "all" && c.gossip.overlay !== "fingers") throw new ConfigError(`gossip overlay must be all or fingers, not "${c.gossip.overlay}"`);
  if (!(Number.isInteger(c.gossip.settleMs) && c.gossip.settleMs >= 0)) throw new ConfigError(`gossip settleMs (--gossip-settle-ms) must be a non-negative integer, not ${c.gossip.settleMs}`);
  if (!(Number.isInteger(c.gossip.settleMaxWaitMs) && c.gossip.settleMaxWaitMs >= 0)) {
    throw new ConfigError(`gossip settleMaxWaitMs (--gossip-settle-max-wait-ms) must be a non-negative integer, not ${c.gossip.settleMaxWaitMs}`);
  }
  if (!(Number.isInteger(c.gossip.settleBytesPerPeriod) && c.gossip.settleBytesPerPeriod >= 1)) {
    throw new ConfigError(`gossip settleBytesPerPeriod (--gossip-settle-bytes-per-period) must be a positive integer, not ${c.gossip.settleBytesPerPeriod}`);
  }
  if (!(Number.isInteger(c.gossip.refusedJoinsBytes) && c.gossip.refusedJoinsBytes >= 0)) {
    throw new ConfigError(`gossip refusedJoinsBytes (--gossip-refused-joins-bytes) must be a non-negative integer, not ${c.gossip.refusedJoinsBytes}`);
  }
  if (!(Number.isInteger(c.gossip.settleMaxBytes) && c.gossip.settleMaxBytes >= 1)) {
    throw new ConfigError(`gossip settleMaxBytes (--gossip-settle-max-bytes) must be a positive integer, not ${c.gossip.settleMaxBytes}`);
  }
  if (!(Number.isInteger(c.gossip.stateStreamBytes) && c.gossip.stateStreamBytes >= 1)) {
    throw new ConfigError(`gossip stateStreamBytes (--gossip-state-stream-bytes) must be a positive integer, not ${c.gossip.stateStreamBytes}`);
  }
  if (!(Number.isInteger(c.gossip.contextsReplyBytes) && c.gossip.contextsReplyBytes >= 1024)) {
    throw new ConfigError(`gossip contextsReplyBytes (--gossip-contexts-reply-bytes) must be an integer of at least 1024, not ${c.gossip.contextsReplyBytes}`);
  }
  if (!(Number.isInteger(c.maxRemoveUnseenDots) && c.maxRemoveUnseenDots >= 0)) {
    throw new ConfigError(`maxRemoveUnseenDots (--max-remove-unseen-dots) must be a non-negative integer, not ${c.maxRemoveUnseenDots}`);
  }
  if (!(Number.isInteger(c.maxRemoveUnseenReplicas) && c.maxRemoveUnseenReplicas >= 0)) {
    throw new ConfigError(`maxRemoveUnseenReplicas (--max-remove-unseen-replicas) must be a non-negative integer, not ${c.maxRemoveUnseenReplicas}`);
  }
  if (!(Number.isInteger(c.maxPendingRemoveBytes) && c.maxPendingRemoveBytes >= 0)) {
    throw new ConfigError(`maxPendingRemoveBytes (--max-pending-remove-bytes) must be a non-negative integer, not ${c.maxPendingRemoveBytes}`);
  }
  if (!(Number.isInteger(c.maxConcurrentStreams) && c.maxConcurrentStreams >= 1 && c.maxConcurrentStreams <= 2 ** 31 - 1)) {
    throw new ConfigError(`maxConcurrentStreams (--max-concurrent-streams) must be an integer from 1 to 2147483647, not ${c.maxConcurrentStreams}`);
  }
  if (!(Number.isInteger(c.gossip.contextsAhead) && c.gossip.contextsAhead >= 1)) {
    throw new ConfigError(`gossip contextsAhead (--gossip-contexts-ahead) must be a positive integer, not ${c.gossip.contextsAhead}`);
  }
  if (!(Number.isInteger(c.gossip.contextsClaimMs) && c.gossip.contextsClaimMs >= 0)) {
    throw new ConfigError(`gossip contextsClaimMs (--gossip-contexts-claim-ms) must be a non-negative integer, not ${c.gossip.contextsClaimMs}`);
  }
  if (!(Number.isInteger(c.gossip.stateStreamStallMs) && c.gossip.stateStreamStallMs >= 1)) {
    throw new ConfigError(`gossip stateStreamStallMs (--gossip-state-stream-stall-ms) must be a positive integer, not ${c.gossip.stateStreamStallMs}`);
  }
  if (!(Number.isInteger(c.gossip.rpcTimeoutMs) && c.gossip.rpcTimeoutMs >= 1)) {
    throw new ConfigError(`gossip rpcTimeoutMs (--gossip-rpc-timeout-ms) must be a positive integer, not ${c.gossip.rpcTimeoutMs}`);
  }
  if (!(Number.isInteger(c.gossip.stateChunkEntries) && c.gossip.stateChunkEntries >= 1)) {
    throw new ConfigError(`gossip stateChunkEntries (--state-chunk-entries) must be a positive integer, not ${c.gossip.stateChunkEntries}`);
  }
  if (!(Number.isInteger(c.gossip.streamFramesInFlight) && c.gossip.streamFramesInFlight >= 1)) {
    throw new ConfigError(`gossip streamFramesInFlight (--gossip-stream-frames-in-flight) must be a positive integer, not ${c.gossip.streamFramesInFlight}`);
  }
  if (!["state", "delta", "delta+periodic-state"].includes(c.gossip.choose)) {
    throw new ConfigError(`gossip choose must be state, delta or delta+periodic-state, not "${c.gossip.choose}"`);
  }
  for (const [k, v] of Object.entries(c.storage)) {
    if (!(Number.isInteger(v) && v >= 64 * 1024)) throw new ConfigError(`storage.${k} must be an integer of at least 65536 (bytes), not ${v}`);
  }
  for (const [k, v] of Object.entries(c.ttlSweep)) if (!(Number.isInteger(v) && v > 0)) throw new ConfigError(`ttlSweep.${k} must be a positive integer, not ${v}`);
  const l = c.limits;
  for (const [k, v] of Object.entries(l)) if (!(Number.isInteger(v) && v > 0)) throw new ConfigError(`limits.${k} must be a positive integer`);
  if (!(Number.isInteger(c.leaveTimeoutMs) && c.leaveTimeoutMs >= 0 && c.leaveTimeoutMs <= 2 ** 31 - 1)) {
    throw new ConfigError(`leaveTimeoutMs (--leave-timeout-ms) must be an integer from 0 to 2147483647, not ${c.leaveTimeoutMs}`);
  }
  // Node runs a longer timer at once.
  if (l.streamStallMs > 2 ** 31 - 1) throw new ConfigError(`limits.streamStallMs (--stream-stall-ms) must be at most 2147483647 (about 24.8 days), not ${l.streamStallMs}`);
  if (l.maxRequestEntries < l.maxElementsPerCall) throw new ConfigError("limits.maxRequestEntries (--max-request-entries) is below limits.maxElementsPerCall (--max-elements-per-call)");
  if (l.defaultPageSize > l.maxPageSize) throw new ConfigError("limits.defaultPageSize exceeds limits.maxPageSize");
  if (l.defaultScanChunk > l.maxScanChunk) throw new ConfigError("limits.defaultScanChunk exceeds limits.maxScanChunk");
  if (l.defaultExportChunk > l.maxExportChunk) throw new ConfigError("limits.defaultExportChunk exceeds limits.maxExportChunk");
  // The first chunk of an export also carries contexts: half the message is left for them.
  if (l.maxExportChunkBytes > l.maxMessageBytes / 2) throw new ConfigError("limits.maxExportChunkBytes exceeds half of limits.maxMessageBytes");
  if (l.maxStateBytes < l.maxFilterBytes) throw new ConfigError("limits.maxStateBytes (--max-state-bytes) is below limits.maxFilterBytes (--max-filter-bytes): a filter the node may create could not be received");
  try {
    resolveConfig(c.membership);
  } catch (err) {
    if (err instanceof RangeError) throw new ConfigError(err.message);
    throw err;
  }
  if (c.nodeId !== undefined && !/^[A-Za-z0-9._-]{1,128}$/.test(c.nodeId)) {
    throw new ConfigError(`node id "${c.nodeId}" must be 1-128 characters of A-Z a-z 0-9 . _ -`);
  }
  if ((c.tls.cert === undefined) !== (c.tls.key === undefined)) throw new ConfigError("tls.cert and tls.key go together");
  if (c.tls.ca !== undefined && c.tls.cert === undefined) throw new ConfigError("tls.ca (mutual TLS) needs tls.cert and tls.key, the node's own certificate");
  if (c.tls.mutual === true && c.tls.ca === undefined) {
    throw new ConfigError("tls.mutual (--tls-mutual) needs tls.ca (--tls-ca): mutual TLS verifies the peers' node certificates against that CA; give one, or leave --tls-mutual out");
  }
  // A bare port serves metrics on loopback; another host must be asked for (plain HTTP, node id).
  if (c.metricsListen !== undefined && /^\d{1,5}$/.test(c.metricsListen)) c.metricsListen = `127.0.0.1:${c.metricsListen}`;
  if (c.metricsListen !== undefined && c.metricsListen !== "" && !isHostPort(c.metricsListen)) {
    throw new ConfigError(`metrics listen "${c.metricsListen}" is not host:port (or a port, for 127.0.0.1)`);
  }
  if (c.metricsListen !== undefined && c.metricsListen !== "" && !isLoopbackHost(c.metricsListen) && c.metricsExpose !== true) {
    throw new ConfigError(
      `metrics listen "${c.metricsListen}" is not a loopback address: the endpoint is plain HTTP and shows the node id; ` +
        "pass --metrics-expose (DELTASET_METRICS_EXPOSE=true) to serve it there, or give only a port for 127.0.0.1",
    );
  }
  if (!["off", "console", "none", "otlp"].includes(c.tracing)) throw new ConfigError(`tracing must be off, console, none or otlp, not "${c.tracing}"`);
  if (c.tracing === "otlp" && !/^https?:\/\/\S+$/.test(c.otlpEndpoint ?? "")) {
    throw new ConfigError("tracing=otlp needs --otlp-endpoint, an http(s) URL such as http://127.0.0.1:4318/v1/traces");
  }
}

/** The configuration as printed at start (nothing secret is in it: token files are paths). */
export function describeConfig(c: NodeConfig): Record<string, unknown> {
  return JSON.parse(JSON.stringify(c)) as Record<string, unknown>;
}

/** The replication factor of a configuration: "all" or a positive integer. */
export function replicationFactorOf(c: Pick<NodeConfig, "replicationFactor">): ReplicationFactor {
  const v = String(c.replicationFactor);
  if (v === "all") return "all";
  if (/^[1-9][0-9]{0,5}$/.test(v)) return Number(v);
  throw new ConfigError(`replication factor must be "all" or a positive integer, not "${c.replicationFactor}"`);
}
