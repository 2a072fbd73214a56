// Keeps each HTTP/2 server session's table of open streams out of a JavaScript Map.
//
// node:http2 holds a session's open streams in a Map keyed by stream id: one entry added and one
// deleted per call. Once a full collection has moved that Map's backing store to the old
// generation, the stores it leaves behind there keep every stream that passed through it alive
// through young-generation collections, with everything the stream holds (common/key-table.ts says
// how): each call's objects are copied twice and promoted, and that promoted garbage brings the
// next full collection, which starts it over. On a node under unary Adds this cost 13 µs of
// scavenging per call and a full collection every second or two (bench:http2-gc,
// docs/results/replica-history.md). A KeyTable does not; node:http2 uses its get, set, delete,
// size and forEach.
import type * as grpc from "@grpc/grpc-js";
import { KeyTable } from "../common/key-table.js";
import type { Http2Server, Http2Session, ServerHttp2Stream } from "node:http2";

/** node:http2's per-session state object (its symbol is internal): the one holding `streams`. */
function sessionState(session: Http2Session): { streams: unknown } | undefined {
  for (const sym of Object.getOwnPropertySymbols(session)) {
    if (sym.description !== "state") continue;
    const state = (session as unknown as Record<symbol, unknown>)[sym];
    if (typeof state === "object" && state !== null && "streams" in state && "pendingStreams" in state) return state as { streams: unknown };
  }
  return undefined;
}

/**
 * Give a new session a KeyTable for its streams; false when its state is not the shape expected
 * (another Node release) or it already holds streams, and then it keeps its Map.
 */
export function useStreamTable(session: Http2Session): boolean {
  const state = sessionState(session);
  const streams = state?.streams as { size?: unknown; get?: unknown; forEach?: unknown } | undefined;
  if (state === undefined || streams === undefined || streams instanceof KeyTable) return false;
  if (streams.size !== 0 || typeof streams.get !== "function" || typeof streams.forEach !== "function") return false;
  state.streams = new KeyTable<ServerHttp2Stream>();
  return true;
}

/**
 * Every session the server's listeners accept from now on gets a KeyTable for its streams. Call
 * after binding: grpc-js keeps its node:http2 servers in a private field (`http2Servers`, grpc-js
 * 1.14); returns how many were found, 0 when that field is gone (the sessions then keep their Maps).
 */
export function useStreamTables(server: grpc.Server): number {
  const listeners = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(listeners instanceof Map)) return 0;
  let found = 0;
  for (const http2Server of listeners.keys() as Iterable<Http2Server>) {
    if (typeof http2Server?.on !== "function") continue;
    if (TABLED.has(http2Server)) continue;
    TABLED.add(http2Server);
    http2Server.on("session", (session: Http2Session) => useStreamTable(session));
    found++;
  }
  return found;
}

/** Listeners already given the session hook (bind may be called again for another address). */
const TABLED = new WeakSet<object>();
