// `deltaset export` and `deltaset import`: a key's state (or its delta since a context) as a
// length-delimited binary stream of ExportChunk messages on stdout, and such a stream read from
// stdin and applied to a key, so `deltaset export s --addr A | deltaset import s --addr B` moves a
// set between clusters.
import { readFileSync, writeFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { once } from "node:events";
import { ExportChunk, type ImportResponse, type KeyEvent } from "../gen/deltaset/v1/replica.js";
import { type AWSet, CausalContext as CrdtContext, ObjectType, contextFromProto, latticeFor } from "../crdt/index.js";
import { catchUpSlice } from "../client/watch.js";
import { CausalContext } from "../gen/deltaset/v1/types.js";
import { replicaClient } from "../client/rpc.js";
import { UsageError, checkCopies, connection, copiesField, copiesFlag, copiesText, needKey, parse } from "./client-commands.js";
import { DelimitedStreamError, delimited, readDelimited } from "./delimited.js";
import { createOutput, elementShower } from "./output.js";

/** Largest message read from a stream (the client's own message limit). */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Streams may run long: the default deadline of export and import, in ms. */
const STREAM_TIMEOUT = "600000";

/**
 * A since file: a CausalContext as JSON, or the output of `deltaset query KEY --json` (its
 * context). A file that does not exist yet (the first of a series of exports): no since, the
 * whole state, which is always correct to import.
 */
export function readSince(path: string, fallback: "exporting" | "watching from"): CausalContext | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      process.stderr.write(`--since-file ${path} does not exist: ${fallback} the whole state\n`);
      return undefined;
    }
    throw new UsageError(`--since-file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    const obj = JSON.parse(text) as { context?: unknown };
    return CausalContext.fromJSON(obj.context ?? obj);
  } catch (err) {
    throw new UsageError(`--since-file ${path}: not a context as JSON (${(err as Error).message})`);
  }
}

export async function exportCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, {
    "since-file": { type: "string" },
    "next-since-file": { type: "string" },
    chunk: { type: "string", default: "0" },
    "chunk-bytes": { type: "string", default: "0" },
    timeout: { type: "string", default: STREAM_TIMEOUT },
  });
  const key = needKey(positionals, "deltaset export KEY [--since-file F] [--next-since-file G] [--chunk N] [--chunk-bytes B] [--addr HOST:PORT] > FILE");
  if (process.stdout.isTTY) throw new UsageError("stdout is a terminal: pipe the export to `deltaset import KEY --addr ...` or redirect it to a file");
  const conn = connection(values);
  const since = values["since-file"] === undefined ? undefined : readSince(values["since-file"] as string, "exporting");
  const client = replicaClient(values.addr as string, conn.creds);
  let chunks = 0;
  let nextSince: CausalContext | undefined;
  try {
    const stream = client.export(
      { key, maxEntries: Number(values.chunk), maxBytes: Number(values["chunk-bytes"]), since },
      conn.metadata(),
      { deadline: Date.now() + Number(values.timeout) },
    );
    for await (const chunk of stream as AsyncIterable<ExportChunk>) {
      if (chunks === 0) nextSince = chunk.nextSince;
      chunks++;
      if (!process.stdout.write(delimited(ExportChunk.encode(chunk).finish()))) await once(process.stdout, "drain");
    }
  } finally {
    client.close();
  }
  // Written only once the whole export is out: rename it over the since file after the import succeeded.
  if (values["next-since-file"] !== undefined && nextSince !== undefined) {
    writeFileSync(values["next-since-file"] as string, JSON.stringify(CausalContext.toJSON(nextSince)) + "\n");
  }
  process.stderr.write(`exported "${key}" in ${chunks} chunk(s)${since === undefined ? "" : " (delta since the given context)"}\n`);
}

export async function importCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { timeout: { type: "string", default: STREAM_TIMEOUT }, copies: { type: "string" } });
  const key = needKey(positionals, "deltaset import KEY [--copies N] [--addr HOST:PORT] < FILE");
  const copies = copiesFlag(values);
  if (process.stdin.isTTY) throw new UsageError("stdin is a terminal: pipe `deltaset export KEY --addr ...` into it or redirect a file");
  const conn = connection(values);
  const client = replicaClient(values.addr as string, conn.creds);
  try {
    const res = await new Promise<ImportResponse>((resolve, reject) => {
      const call = client.import(conn.metadata(), { deadline: Date.now() + Number(values.timeout) }, (err, r) => (err ? reject(err) : resolve(r)));
      void (async () => {
        let first = true;
        for await (const bytes of readDelimited(process.stdin, MAX_MESSAGE_BYTES)) {
          let chunk: ExportChunk;
          try {
            chunk = ExportChunk.decode(bytes);
          } catch (err) {
            throw new UsageError(`stdin: a message is not an ExportChunk (${(err as Error).message}): is this the output of deltaset export?`);
          }
          // The stream goes to KEY, whatever key it was exported from.
          chunk.key = first ? key : "";
          // The write concern is the first chunk's, whatever the export carried.
          chunk.copies = first ? copies : undefined;
          first = false;
          if (!call.write(chunk)) await once(call, "drain");
        }
        call.end();
      })().catch((err: unknown) => {
        call.cancel();
        reject(err instanceof DelimitedStreamError ? new UsageError(`stdin: ${err.message}`) : err);
      });
    });
    checkCopies(copies, res.copies);
    createOutput(values.json as boolean).result(
      { key, changed: res.changed, chunks: res.chunks, size: res.size, ...copiesField(res.copies) },
      `imported ${res.chunks} chunk(s) into "${key}": ${res.changed ? "changed" : "nothing new"}, ${res.size} member(s)` + copiesText(res.copies),
    );
  } finally {
    client.close();
  }
}

/**
 * deltaset watch KEY [--since-file F] | --prefix P: one line per event (JSON with --json). With a
 * since file the watch resumes from the context it holds, and the file is rewritten after every
 * event with the context to resume from next time. A key watch the node ends with UNAVAILABLE (it
 * stops, or no longer owns the key) is watched again through the same address from the last
 * event's context, after a pause, up to --resumes times in a row without an event between.
 */
export async function watchCommand(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { prefix: { type: "string" }, "since-file": { type: "string" }, resumes: { type: "string" } });
  const conn = connection(values);
  const prefix = values.prefix as string | undefined;
  const key = prefix === undefined ? needKey(positionals, "deltaset watch KEY [--since-file F] | deltaset watch --prefix P  [--addr HOST:PORT] [--hex] [--json]") : "";
  if (prefix !== undefined && positionals.length > 0) throw new UsageError("give a key or --prefix, not both");
  const sinceFile = values["since-file"] as string | undefined;
  if (sinceFile !== undefined && prefix !== undefined) throw new UsageError("--since-file applies to a key watch only");
  const resumesText = (values.resumes as string | undefined) ?? String(WATCH_RESUMES);
  if (!/^\d+$/.test(resumesText)) throw new UsageError(`--resumes "${resumesText}" is not a whole number`);
  const maxResumes = prefix === undefined ? Number(resumesText) : 0;
  let since = sinceFile === undefined ? undefined : readSince(sinceFile, "watching from");
  const client = replicaClient(values.addr as string, conn.creds);
  const json = values.json === true;
  const show = elementShower(values.hex === true);
  let interrupted = false;
  let cancel: (() => void) | undefined;
  process.once("SIGINT", () => {
    interrupted = true;
    cancel?.();
  });
  try {
    for (let resumes = 0; ; resumes++) {
      let events = 0;
      let catchUpCtx: import("../crdt/index.js").CausalContext | undefined;
      let catchUpNext: KeyEvent["context"];
      const stream = client.watch({ key, prefix: prefix ?? "", since }, conn.metadata());
      cancel = () => stream.cancel();
      const err = await new Promise<grpc.ServiceError | undefined>((resolve) => {
        stream.on("data", (e: KeyEvent) => {
          events++;
          if (e.catchUp?.context !== undefined) catchUpCtx = contextFromProto(e.catchUp.context);
          // The catch-up's next_since comes on its first chunk, and is where to resume only once its
          // last chunk is in (the node sends it as the last chunk's context too).
          if (e.catchUp?.nextSince !== undefined) catchUpNext = e.catchUp.nextSince;
          const line = describeEvent(e, catchUpCtx, show);
          // A catch-up's removed adds are those the saved context covers that are not live now: the
          // context says what was seen, not what was live, so some may have gone before it was saved.
          const gone = line.kind === "catch-up" ? "add(s) seen before are gone" : "add(s) removed";
          process.stdout.write(json ? `${JSON.stringify(line)}\n` : `${line.key}: ${line.kind}${line.added.length ? ` +${line.added.join(" +")}` : ""}${line.removedDots ? ` (${line.removedDots} ${gone})` : ""}\n`);
          const resume = e.catchUp?.last ? (e.context ?? catchUpNext) : e.delta !== undefined ? e.context : undefined;
          if (resume !== undefined) {
            since = resume;
            if (sinceFile !== undefined) writeFileSync(sinceFile, JSON.stringify(CausalContext.toJSON(resume)) + "\n");
          }
        });
        stream.on("error", (e: grpc.ServiceError) => resolve(e));
        stream.on("end", () => resolve(undefined));
      });
      if (err === undefined || interrupted) return;
      if (events > 0) resumes = 0;
      if (err.code !== grpc.status.UNAVAILABLE || resumes >= maxResumes) throw err;
      process.stderr.write(`deltaset: the watch ended (${err.details}); watching again from the last event's context\n`);
      await new Promise((r) => setTimeout(r, WATCH_RESUME_PAUSE_MS));
      if (interrupted) return;
    }
  } finally {
    client.close();
  }
}

/** Times in a row a key watch is watched again after UNAVAILABLE with no event between (--resumes). */
const WATCH_RESUMES = 10;
/** The pause before watching again: a placement change or a restart settles in about that. */
const WATCH_RESUME_PAUSE_MS = 1000;

function describeEvent(e: KeyEvent, catchUpCtx: import("../crdt/index.js").CausalContext | undefined, show: (b: Uint8Array) => string): { key: string; type: string; kind: string; added: string[]; removedDots: number } {
  const type = ObjectType[e.type] ?? String(e.type);
  if (e.type !== ObjectType.AWSET) return { key: e.key, type, kind: e.catchUp ? "catch-up" : "change", added: [], removedDots: 0 };
  const s =
    e.catchUp?.slice !== undefined
      ? catchUpSlice(e.catchUp, catchUpCtx ?? new CrdtContext(), Date.now())
      : e.delta === undefined
        ? undefined
        : (latticeFor(ObjectType.AWSET).decode(e.delta.payload, Date.now()) as AWSet);
  const added = s === undefined ? [] : [...s.entries.keys()].map((k) => show(Buffer.from(k, "latin1")));
  // A resumed watch's catch-up names, on its last chunk (ExportChunk.removed), the adds its context
  // covers that are not live (removed since, or before the context was saved); a live change
  // carries its removes in its delta's context.
  const removedDots = e.catchUp !== undefined ? (e.catchUp.removed === undefined ? 0 : contextFromProto(e.catchUp.removed).dotCount()) : s === undefined ? 0 : removedDots_(s);
  return { key: e.key, type, kind: e.catchUp ? "catch-up" : "change", added, removedDots };
}

function removedDots_(s: AWSet): number {
  let live = 0;
  for (const d of s.entries.values()) live += d.length;
  return s.ctx.dotCount() - live;
}
