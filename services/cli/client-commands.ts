// Client commands: add, remove, query, scan, incr, members (export and import: transfer-commands.ts).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { byteLines } from "./byte-lines.js";
import * as grpc from "@grpc/grpc-js";
import { ReplicaClient, ScanChunk } from "../gen/deltaset/v1/replica.js";
import { MemberState } from "../gen/deltaset/v1/membership.js";
import { UnionStrategy } from "../gen/deltaset/v1/types.js";
import { INT64_MAX, INT64_MIN, ObjectType, TYPE_BY_NAME, contextFromProto, inInt64 } from "../crdt/index.js";
import { bar, createOutput, elementShower, percent } from "./output.js";
import { call, membershipClient, replicaClient } from "../client/rpc.js";
import { addStream } from "../client/add-stream.js";
import { TokenError, resolveToken } from "./token.js";

const COMMON = {
  addr: { type: "string", default: process.env.DELTASET_ADDR ?? "127.0.0.1:7070" },
  json: { type: "boolean", default: false },
  hex: { type: "boolean", default: false },
  timeout: { type: "string", default: "10000" },
  // TLS: trust this CA for the node's certificate; a bearer token for nodes that require one.
  "tls-ca": { type: "string", default: process.env.DELTASET_TLS_CA },
  // The token: --token-file, $DELTASET_TOKEN_FILE or $DELTASET_TOKEN are preferred (see token.ts).
  token: { type: "string" },
  "token-file": { type: "string" },
} as const;

export type Values = Record<string, string | boolean | undefined>;
export type OptionSpec = Record<string, { type: "string" | "boolean"; default?: string | boolean }>;

/** --help or -h before any --: the command prints its usage and these options (main.ts), and does nothing. */
export class HelpRequested extends Error {
  constructor(readonly options: OptionSpec) {
    super("help requested");
  }
}

/** --help or -h among the arguments before any -- (after it they are arguments like any other). */
export function wantsHelp(args: readonly string[]): boolean {
  const own = args.includes("--") ? args.slice(0, args.indexOf("--")) : args;
  return own.includes("--help") || own.includes("-h");
}

export function parse(args: string[], extra: OptionSpec = {}): { values: Values; positionals: string[] } {
  const options = { ...COMMON, ...extra };
  if (wantsHelp(args)) throw new HelpRequested(options);
  const r = parseArgs({ args, options, allowPositionals: true, strict: true });
  const timeout = r.values.timeout;
  // A deadline that is not a positive whole number of ms would make every call fail at once.
  if (typeof timeout === "string" && !/^[1-9]\d*$/.test(timeout)) throw new UsageError(`--timeout "${timeout}" is not a positive whole number of milliseconds`);
  return { values: r.values as Values, positionals: r.positionals };
}

function elementsFrom(values: string[], hex: boolean): Buffer[] {
  // Arguments reach the process decoded as UTF-8: bytes that are not UTF-8 arrive as U+FFFD, and
  // what would be sent is no longer what was typed. Said once; --hex gives exact bytes.
  if (!hex && values.some((v) => v.includes("\ufffd"))) {
    process.stderr.write("deltaset: an element holds U+FFFD, the character that stands for bytes that are not UTF-8 in an argument; it is sent as that character: give exact bytes with --hex\n");
  }
  return values.map((v) => {
    if (!hex) return Buffer.from(v, "utf8");
    const clean = v.replace(/^0x/, "");
    if (!/^([0-9a-fA-F]{2})+$/.test(clean)) throw new UsageError(`"${v}" is not hex bytes`);
    return Buffer.from(clean, "hex");
  });
}

export class UsageError extends Error {}

/** Channel credentials and per-call metadata from --tls-ca, --token and --token-file. */
export function connection(values: Values): { creds: grpc.ChannelCredentials; metadata: () => grpc.Metadata } {
  const ca = values["tls-ca"] as string | undefined;
  let creds = grpc.credentials.createInsecure();
  if (ca !== undefined && ca !== "") {
    try {
      creds = grpc.credentials.createSsl(readFileSync(ca));
    } catch (err) {
      throw new UsageError(`--tls-ca ${ca}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  let token: string | undefined;
  try {
    token = resolveToken({
      flag: values.token as string | undefined,
      file: values["token-file"] as string | undefined,
      env: process.env,
      readFile: (path) => readFileSync(path, "utf8"),
      warn: (line) => process.stderr.write(`${line}\n`),
    });
  } catch (err) {
    if (err instanceof TokenError) throw new UsageError(err.message);
    throw err;
  }
  const metadata = () => {
    const md = new grpc.Metadata();
    if (token !== undefined) md.set("authorization", `Bearer ${token}`);
    return md;
  };
  return { creds, metadata };
}

export function needKey(positionals: string[], usage: string): string {
  const key = positionals[0];
  if (key === undefined) throw new UsageError(`usage: ${usage}`);
  return key;
}

/**
 * Refuse arguments past the most a command takes: they would be dropped unread. After '--' every
 * argument is one of them, options too (`incr k -- -3 --addr X` would not go to X).
 */
export function atMost(positionals: string[], most: number, usage: string): void {
  if (positionals.length <= most) return;
  const extra = positionals.slice(most).map((a) => JSON.stringify(a)).join(" ");
  throw new UsageError(`unexpected argument(s) ${extra} (options go before '--'); usage: ${usage}`);
}

/** Types an Add may create, as --type takes them (counters are created by Increment). */
const ADD_TYPES = Object.fromEntries(Object.entries(TYPE_BY_NAME).filter(([, t]) => t !== ObjectType.COUNTER));

/** A non-negative number flag (0 when absent: the node's default). */
function numberFlag(values: Values, name: string): number {
  const raw = values[name] as string | undefined;
  if (raw === undefined) return 0;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${name} ${raw} is not a non-negative number`);
  return n;
}

const UINT64_MAX = 2n ** 64n - 1n;

/** A non-negative whole-number flag sent as a uint64 (--capacity, --bits); 0 when absent. */
function uint64Flag(values: Values, name: string): bigint {
  const n = BigInt(Math.floor(numberFlag(values, name)));
  if (n > UINT64_MAX) throw new UsageError(`--${name} ${values[name] as string} is above ${UINT64_MAX}, the largest the field (uint64) holds`);
  return n;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration: a number of ms, or a number with a unit (ms, s, m, h, d), e.g. 30s, 1.5h. */
export function durationMs(raw: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw.trim());
  const ms = m === null ? NaN : Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? "ms"]!);
  if (!(ms >= 1 && Number.isSafeInteger(ms))) throw new UsageError(`${flag} ${raw}: a duration such as 500 (ms), 30s, 5m, 2h or 1d`);
  return ms;
}

/** --copies N: the write concern (a positive integer), undefined when not given. */
export function copiesFlag(values: Values): number | undefined {
  const raw = values.copies as string | undefined;
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 0xffffffff) throw new UsageError(`--copies ${raw}: a positive integer (nodes that must hold the write before the answer, this one included)`);
  return Number(raw);
}

/** An answer that confirms fewer copies than asked comes from a node that ignores the field (an earlier version). */
export function checkCopies(asked: number | undefined, copies: number): void {
  if (asked !== undefined && asked > 1 && copies < asked) {
    throw new Error(`the node answered without confirming the ${asked} copies asked (it reports ${copies}: an earlier version that ignores --copies?); the write is made on that node`);
  }
}

/** The copies an answer reports, for --json (none when the call asked for none). */
export const copiesField = (copies: number): { copies?: number } => (copies > 0 ? { copies } : {});
export const copiesText = (copies: number): string => (copies > 0 ? `; durable on ${copies} node(s)` : "");

/** --ttl: a duration, or 0 for none (as ttl_ms 0 means in the API); undefined when not given. */
function ttlFlag(raw: string | undefined): number | undefined {
  if (raw === undefined || /^\s*0+(ms|s|m|h|d)?\s*$/.test(raw)) return undefined;
  return durationMs(raw, "--ttl");
}

const STRATEGIES: Record<string, UnionStrategy> = {
  "whole-filter": UnionStrategy.UNION_STRATEGY_WHOLE_FILTER,
  "active-slices": UnionStrategy.UNION_STRATEGY_ACTIVE_SLICES,
  "current-generation": UnionStrategy.UNION_STRATEGY_CURRENT_GENERATION,
};

/** --strategy of an awset-prob key's tombstone filter (unspecified: the node's default). */
function strategyFlag(raw: string | undefined): UnionStrategy {
  if (raw === undefined) return UnionStrategy.UNION_STRATEGY_UNSPECIFIED;
  const s = STRATEGIES[raw.toLowerCase()];
  if (s === undefined) throw new UsageError(`--strategy ${raw}: one of ${Object.keys(STRATEGIES).join(", ")}`);
  return s;
}

export async function addCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, {
    type: { type: "string" },
    capacity: { type: "string" },
    fpr: { type: "string" },
    hashes: { type: "string" },
    bits: { type: "string" },
    "fingerprint-bits": { type: "string" },
    "bucket-size": { type: "string" },
    level: { type: "string" },
    "age-slices": { type: "string" },
    strategy: { type: "string" },
    ttl: { type: "string" },
    "request-id": { type: "string" },
    copies: { type: "string" },
    stdin: { type: "boolean", default: false },
    batch: { type: "string" },
  });
  const conn = connection(values);
  if (values.stdin === true) return addFromStdin(positionals, values, conn);
  const key = needKey(
    positionals,
    "deltaset add KEY ELEMENT... [--ttl 30s|5m|2h|1d|MS] [--type awset|awset-prob|gbf|gcf|orcf|scgbf|scgcf|scorcf] [--capacity N] [--fpr RATE] [--hashes K --bits M] [--fingerprint-bits L] [--bucket-size C] [--level 0-5] [--age-slices L] [--strategy whole-filter|active-slices|current-generation] [--request-id ID] [--copies N] [--addr HOST:PORT] [--hex] [--json]",
  );
  const elements = elementsFrom(positionals.slice(1), values.hex as boolean);
  if (elements.length === 0) throw new UsageError("give at least one element");
  const typeName = values.type as string | undefined;
  const type = typeName === undefined ? undefined : ADD_TYPES[typeName.toLowerCase()];
  if (typeName !== undefined && type === undefined) throw new UsageError(`--type ${typeName}: one of ${Object.keys(ADD_TYPES).join(", ")}`);
  const params = {
    capacity: uint64Flag(values, "capacity"),
    falsePositiveRate: numberFlag(values, "fpr"),
    hashes: numberFlag(values, "hashes"),
    bits: uint64Flag(values, "bits"),
    fingerprintBits: numberFlag(values, "fingerprint-bits"),
    bucketSize: numberFlag(values, "bucket-size"),
    level: values.level === undefined ? undefined : numberFlag(values, "level"),
    ageSlices: numberFlag(values, "age-slices"),
    unionStrategy: strategyFlag(values.strategy as string | undefined),
  };
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const ttl = ttlFlag(values.ttl as string | undefined);
    const ttlMs = ttl === undefined ? undefined : BigInt(ttl);
    const requestId = values["request-id"] as string | undefined;
    const copies = copiesFlag(values);
    const res = await call(client, client.add, { key, elements, texts: [], type, params, ttlMs, requestId, copies }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
    checkCopies(copies, res.copies);
    const out = createOutput(values.json as boolean);
    out.result(
      { key, added: res.added, dots: res.counters.map((counter) => ({ replica: res.replica, counter })), duplicate: res.duplicate, ...copiesField(res.copies) },
      (res.duplicate ? `request ${requestId} was applied to "${key}" before: not added again` : `added ${res.added} new element(s) to "${key}" (${elements.length} given)`) + copiesText(res.copies),
    );
  } finally {
    client.close();
  }
}

/** deltaset add KEY --stdin: one element per line of stdin, streamed (AddStream) in batches. */
async function addFromStdin(positionals: string[], values: Values, conn: ReturnType<typeof connection>): Promise<void> {
  const key = needKey(positionals, "deltaset add KEY --stdin [--batch N] [--copies N] [--addr HOST:PORT] [--hex] [--json]  (one element per line)");
  if (positionals.length > 1) throw new UsageError("with --stdin the elements come from stdin, not the command line");
  if (values.type !== undefined) throw new UsageError("--stdin adds to add-wins sets only (no --type)");
  if (values["request-id"] !== undefined) throw new UsageError("--request-id names one Add call; --stdin streams many (add-wins sets need none)");
  const batchSize = values.batch === undefined ? 1000 : numberFlag(values, "batch");
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new UsageError("--batch must be a positive integer");
  if (process.stdin.isTTY) throw new UsageError("stdin is a terminal: pipe or redirect one element per line into it");
  const hex = values.hex as boolean;
  /** The stdin line number each batch sent ends on, in order: batch b's is batchEnds[b - 1]. */
  const batchEnds: number[] = [];
  /** The stdin line of each element of the batches not yet acknowledged (a refusal names one). */
  const batchLines: Array<number[] | undefined> = [];
  let acked = { batches: 0, elements: 0 };
  async function* batches(): AsyncGenerator<Buffer[]> {
    let batch: Buffer[] = [];
    let lines: number[] = [];
    let lineNo = 0;
    for await (const line of byteLines(process.stdin)) {
      lineNo++;
      if (line.length === 0) continue;
      // Without --hex a line is the element's exact bytes, UTF-8 or not.
      batch.push(hex ? elementsFrom([line.toString("latin1")], true)[0]! : Buffer.from(line));
      lines.push(lineNo);
      if (batch.length >= batchSize) {
        batchEnds.push(lineNo);
        batchLines.push(lines);
        yield batch;
        batch = [];
        lines = [];
      }
    }
    if (batch.length > 0) {
      batchEnds.push(lineNo);
      batchLines.push(lines);
      yield batch;
    }
  }
  const tty = process.stderr.isTTY === true;
  const started = performance.now();
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const res = await addStream(client, key, batches(), {
      metadata: conn.metadata(),
      stallMs: Number(values.timeout),
      ttlMs: ttlFlag(values.ttl as string | undefined),
      copies: copiesFlag(values),
      onAck: (a) => {
        for (let b = acked.batches; b < a.batches; b++) batchLines[b] = undefined;
        acked = a;
        if (!tty) return;
        const rate = a.elements / ((performance.now() - started) / 1000);
        process.stderr.write(`\r\x1b[2K${a.elements} element(s) durable, ${a.added} new, ${rate.toFixed(0)}/s`);
      },
    });
    if (tty) process.stderr.write("\r\x1b[2K");
    const seconds = (performance.now() - started) / 1000;
    createOutput(values.json as boolean).result(
      { key, elements: res.elements, added: res.added, batches: res.batches, seconds: Number(seconds.toFixed(3)) },
      `added ${res.added} new element(s) to "${key}" (${res.elements} streamed in ${res.batches} batch(es), ${seconds.toFixed(1)} s)`,
    );
  } catch (err) {
    // What is durable, so a script knows where to resend from (adds are idempotent).
    if (tty) process.stderr.write("\r\x1b[2K");
    const through = acked.batches === 0 ? 0 : batchEnds[acked.batches - 1]!;
    process.stderr.write(
      acked.batches === 0
        ? `deltaset add: no element of stdin was acknowledged; resend it all\n`
        : `deltaset add: ${acked.elements} element(s) acknowledged durable, stdin lines 1-${through}; resend from line ${through + 1}\n`,
    );
    // The node names a refused element by batch and index: say which stdin line that is.
    const e = err as { details?: unknown };
    const at = typeof e.details === "string" ? /^batch seq (\d+): element (\d+)\b/.exec(e.details) : null;
    const line = at === null ? undefined : batchLines[Number(at[1]) - 1]?.[Number(at[2])];
    if (line !== undefined) e.details = `${e.details as string} (stdin line ${line})`;
    throw err;
  } finally {
    client.close();
  }
}

export async function removeCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { copies: { type: "string" } });
  const conn = connection(values);
  const key = needKey(positionals, "deltaset remove KEY ELEMENT... [--copies N] [--addr HOST:PORT] [--hex] [--json]");
  const elements = elementsFrom(positionals.slice(1), values.hex as boolean);
  if (elements.length === 0) throw new UsageError("give at least one element");
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const copies = copiesFlag(values);
    const res = await call(client, client.remove, { key, elements, texts: [], copies }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
    checkCopies(copies, res.copies);
    createOutput(values.json as boolean).result({ key, removed: res.removed, ...copiesField(res.copies) }, `removed ${res.removed} element(s) from "${key}"` + copiesText(res.copies));
  } finally {
    client.close();
  }
}

export async function queryCommand(args: string[]): Promise<void> {
  // No page size unless asked: the node's default then, and a COUNTER key (which takes none) reads too.
  const { values, positionals } = parse(args, { "page-size": { type: "string" }, all: { type: "boolean", default: false } });
  const pageSize = numberFlag(values, "page-size");
  const conn = connection(values);
  const key = needKey(positionals, "deltaset query KEY [ELEMENT...] [--page-size N] [--all] [--addr HOST:PORT] [--hex] [--json]");
  const elements = elementsFrom(positionals.slice(1), values.hex as boolean);
  const showElement = elementShower(values.hex as boolean);
  const client = replicaClient(values.addr as string, conn.creds);
  const out = createOutput(values.json as boolean);
  try {
    const timeoutMs = Number(values.timeout);
    if (elements.length > 0) {
      const res = await call(client, client.query, { key, elements, texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }, { timeoutMs, metadata: conn.metadata() });
      const present = res.probabilistic ? "maybe present" : "present";
      const filter = res.filter === undefined ? undefined : { ...res.filter, estimatedCount: Number(res.filter.estimatedCount), parameters: JSON.parse(res.filter.parameters || "null") };
      const lines = res.presence.map((p) => `${p.present ? present : "absent".padEnd(present.length)}  ${showElement(p.element)}`);
      if (filter !== undefined) lines.push(`(${ObjectType[res.type]}: about ${filter.estimatedCount} elements, estimated false-positive rate ${percent(filter.estimatedFalsePositiveRate)})`);
      out.result({ key, type: ObjectType[res.type], presence: res.presence.map((p) => ({ element: showElement(p.element), present: p.present })), probabilistic: res.probabilistic, filter }, lines.join("\n"));
      return;
    }
    let token: Buffer = Buffer.alloc(0);
    const members: string[] = [];
    let first = await call(client, client.query, { key, elements: [], texts: [], pageSize, pageToken: token, withText: false }, { timeoutMs, metadata: conn.metadata() });
    const type = first.type;
    const size = first.size;
    const counter = first.counterValue;
    const ctx = first.context;
    const pendingRemoves = first.pendingRemoves;
    for (;;) {
      members.push(...first.members.map((m) => showElement(m.element)));
      token = first.nextPageToken;
      if (!values.all || token.length === 0) break;
      out.progress(`${bar(members.length, Number(size))} ${members.length}/${size} members`);
      first = await call(client, client.query, { key, elements: [], texts: [], pageSize, pageToken: token, withText: false }, { timeoutMs, metadata: conn.metadata() });
    }
    out.done();
    const typeName = type === ObjectType.OBJECT_TYPE_UNSPECIFIED ? "none" : (ObjectType[type] ?? String(type));
    if (typeName === "COUNTER") {
      out.result({ key, type: typeName, value: counter }, `${key} (COUNTER) = ${counter}`);
      return;
    }
    const vv = contextFromProto(ctx);
    // A probabilistic set has no causal context: its tombstone filter is what it reports.
    const filter = first.filter === undefined ? undefined : { ...first.filter, estimatedCount: Number(first.filter.estimatedCount), parameters: JSON.parse(first.filter.parameters || "null") };
    const about = filter === undefined ? `context over ${vv.replicas().length} replica(s)` : `tombstone filter ${JSON.stringify(filter.parameters)}, estimated false-positive rate ${percent(filter.estimatedFalsePositiveRate)}`;
    out.result(
      { key, type: typeName, size, members, more: token.length > 0, context: ctx, pendingRemoves, ...(filter === undefined ? {} : { filter }) },
      [`${key} (${typeName}, ${size} member(s), ${about}${pendingRemoves > 0 ? `, ${pendingRemoves} remove(s) waiting for adds not yet received` : ""})`, ...members.map((m) => `  ${m}`), ...(token.length > 0 ? ["  ... (--all for every page, or use scan)"] : [])].join("\n"),
    );
  } finally {
    client.close();
  }
}

export async function scanCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { chunk: { type: "string", default: "1000" }, count: { type: "boolean", default: false }, "start-after": { type: "string" } });
  const conn = connection(values);
  const usage = "deltaset scan KEY [--chunk N] [--count] [--start-after ELEMENT] [--addr HOST:PORT] [--hex] [--json]";
  const key = needKey(positionals, usage);
  atMost(positionals, 1, usage);
  const showElement = elementShower(values.hex as boolean);
  const client = replicaClient(values.addr as string, conn.creds);
  const out = createOutput(values.json as boolean);
  const after = values["start-after"] as string | undefined;
  const startAfter = after === undefined ? Buffer.alloc(0) : elementsFrom([after], values.hex as boolean)[0]!;
  /** The last member received: where a failed scan resumes. */
  let last: Uint8Array | undefined;
  try {
    const stream = client.scan({ key, chunkSize: Number(values.chunk), startAfter, withText: false }, conn.metadata());
    let n = 0;
    for await (const chunk of stream as AsyncIterable<ScanChunk>) {
      for (const m of chunk.members) {
        last = m.element;
        if (!values.count) {
          const s = showElement(m.element);
          // JSON names what the second field holds: the exact bytes in hex with --hex, else the element as shown.
          process.stdout.write((values.json ? JSON.stringify({ element: Buffer.from(m.element).toString("base64"), [values.hex ? "hex" : "text"]: s }) : s) + "\n");
        }
      }
      n += chunk.members.length;
      out.progress(`${bar(Number(chunk.sent), Number(chunk.total))} ${chunk.sent}/${chunk.total}`);
    }
    out.done();
    if (values.count) out.result({ key, count: n }, String(n));
  } catch (err) {
    if (last !== undefined) process.stderr.write(`deltaset scan: resume after the last member received with --hex --start-after ${Buffer.from(last).toString("hex")}\n`);
    throw err;
  } finally {
    client.close();
  }
}

export async function incrCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { "request-id": { type: "string" }, copies: { type: "string" } });
  const conn = connection(values);
  const usage = "deltaset incr KEY [AMOUNT] [--request-id ID] [--copies N] [--addr HOST:PORT] [--json]  (AMOUNT defaults to 1; a negative one after '--')";
  const key = needKey(positionals, usage);
  atMost(positionals, 2, usage);
  const raw = positionals[1] ?? "1";
  if (!/^-?\d+$/.test(raw)) throw new UsageError(`amount "${raw}" is not an integer`);
  // Increment's amount is a sint64: a larger one would fail in serialisation, not as a usage error.
  if (!inInt64(BigInt(raw))) throw new UsageError(`amount "${raw}" is outside the int64 range (${INT64_MIN} to ${INT64_MAX})`);
  // The same id on a retry (to any node) is applied once within the key's retention window.
  const requestId = (values["request-id"] as string | undefined) ?? "";
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const copies = copiesFlag(values);
    const res = await call(client, client.increment, { key, amount: BigInt(raw), requestId, copies }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
    checkCopies(copies, res.copies);
    createOutput(values.json as boolean).result(
      { key, value: res.value, duplicate: res.duplicate, ...copiesField(res.copies) },
      (res.duplicate ? `${key} = ${res.value} (request ${requestId} was applied before: not counted again)` : `${key} = ${res.value}`) + copiesText(res.copies),
    );
  } finally {
    client.close();
  }
}

export async function membersCommand(args: string[]): Promise<void> {
  const { values } = parse(args, { all: { type: "boolean", default: false } });
  const conn = connection(values);
  const client = membershipClient(values.addr as string, conn.creds);
  try {
    const res = await call(client, client.members, { includeDeparted: values.all as boolean }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
    createOutput(values.json as boolean).result(
      {
        self: res.self,
        members: res.members.map((m) => ({ nodeId: m.nodeId, address: m.address, state: MemberState[m.state], incarnation: m.incarnation })),
      },
      [`members seen by ${res.self}:`, ...res.members.map((m) => `  ${m.nodeId.padEnd(16)} ${m.address.padEnd(22)} ${MemberState[m.state]?.padEnd(8)} inc ${m.incarnation}`)].join("\n"),
    );
  } finally {
    client.close();
  }
}

export async function ownersCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args);
  const conn = connection(values);
  const key = needKey(positionals, "deltaset owners KEY [--addr HOST:PORT] [--json]");
  if (positionals.length > 1) throw new UsageError("deltaset owners takes one key");
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const res = await call(client, client.owners, { key }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
    createOutput(values.json as boolean).result(
      { key, partition: res.partition, replicationFactor: res.replicationFactor, local: res.local, owners: res.owners },
      [
        `"${key}" is in partition ${res.partition} (replication factor ${res.replicationFactor}); ${res.local ? "this node owns it" : "this node forwards its calls"}`,
        ...res.owners.map((o) => `  ${o.nodeId.padEnd(16)} ${o.address}`),
      ].join("\n"),
    );
  } finally {
    client.close();
  }
}

export type { ReplicaClient, grpc };

export async function keysCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { prefix: { type: "string", default: "" }, "page-size": { type: "string", default: "100" }, all: { type: "boolean", default: false } });
  if (positionals.length > 0) throw new UsageError("deltaset keys [--prefix P] [--page-size N] [--all] [--addr HOST:PORT] [--json]");
  const conn = connection(values);
  const client = replicaClient(values.addr as string, conn.creds);
  const out = createOutput(values.json as boolean);
  try {
    const keys: Array<{ key: string; type: string; size: number; stateDigest?: string }> = [];
    let token: Buffer = Buffer.alloc(0);
    do {
      const res = await call(client, client.keys, { prefix: values.prefix as string, pageSize: numberFlag(values, "page-size"), pageToken: token }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
      keys.push(
        ...res.keys.map((k) => ({
          key: k.key,
          type: ObjectType[k.type] ?? String(k.type),
          size: Number(k.size),
          ...(k.stateDigest.length > 0 ? { stateDigest: Buffer.from(k.stateDigest).toString("hex") } : {}),
        })),
      );
      token = res.nextPageToken;
    } while (values.all === true && token.length > 0);
    const more = token.length > 0 ? "\n(more: --all lists every page)" : "";
    const listed = keys.map((k) => `${k.key}  ${k.type}${k.type === "AWSET" || k.type === "AWSET_PROB" ? `  ${k.size} element(s)` : ""}${k.stateDigest === undefined ? "" : `  state ${k.stateDigest}`}`).join("\n");
    const none = `(no keys${values.prefix === "" ? "" : ` starting with "${values.prefix}"`})`;
    out.result({ keys, more: token.length > 0 }, (keys.length === 0 ? none : listed) + more);
  } finally {
    client.close();
  }
}

export async function deleteCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { copies: { type: "string" } });
  const conn = connection(values);
  const key = needKey(positionals, "deltaset delete KEY [--copies N] [--addr HOST:PORT] [--json]  (removes every element this node has seen)");
  if (positionals.length > 1) throw new UsageError("deltaset delete takes one key");
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const copies = copiesFlag(values);
    const res = await call(client, client.delete, { key, copies }, { timeoutMs: Number(values.timeout), metadata: conn.metadata() });
    checkCopies(copies, res.copies);
    createOutput(values.json as boolean).result({ key, removed: Number(res.removed), ...copiesField(res.copies) }, `removed ${res.removed} element(s) from "${key}"` + copiesText(res.copies));
  } finally {
    client.close();
  }
}
