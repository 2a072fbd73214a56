// Keeps the per-call tables of this process's outgoing gRPC connections off V8's Map and Set: a
// node's calls to its peers (forwarded client calls above all) each pass through their HTTP/2
// session's table of open streams (node:http2's, a Map) and their grpc-js connection's set of
// active calls (a Set). Once a full collection has moved those to the old generation they keep
// every call alive through young-generation collections (common/key-table.ts). Each connection
// grpc-js opens gets a KeyTable for its streams (http2-stream-table.ts) and an IdentitySet for its
// calls. With async-resource-bind.ts as well, a grpc-js client promoted 16 KiB per young-generation
// collection instead of about 2.7 MB (docs/results/replica-history.md); either alone did not help.
//
// grpc-js creates connections in its transport module's Http2SubchannelConnector.createSession,
// not exported from the package's index (grpc-js 1.14); when a release moves it this does nothing
// and says so (the connections keep their Map and Set).
import { createRequire } from "node:module";
import type { Http2Session } from "node:http2";
import { IdentitySet } from "../common/identity-set.js";
import { useStreamTable } from "./http2-stream-table.js";

const requireHere = createRequire(import.meta.url);
const PATCHED = Symbol.for("deltaset.grpcClientTables");

interface Connector {
  createSession(...args: unknown[]): Promise<unknown>;
  [PATCHED]?: true;
}

/** Connections given both tables so far, in this process. */
let tabled = 0;

export function tabledConnections(): number {
  return tabled;
}

/** Give one new connection (grpc-js's Http2Transport) its tables; both must still be empty. */
function tableConnection(transport: unknown): void {
  const t = transport as { session?: Http2Session; activeCalls?: unknown } | null;
  if (t === null || typeof t !== "object") return;
  const streams = t.session !== undefined && useStreamTable(t.session);
  const calls = t.activeCalls instanceof Set && t.activeCalls.size === 0;
  if (calls) t.activeCalls = new IdentitySet<object>();
  if (streams && calls) tabled++;
}

/**
 * From now on every connection this process's grpc-js clients open gets its tables. Idempotent;
 * false when grpc-js's connector is not where this expects it.
 */
export function useClientCallTables(): boolean {
  let connector: { prototype: Connector } | undefined;
  try {
    connector = (requireHere("@grpc/grpc-js/build/src/transport.js") as { Http2SubchannelConnector?: { prototype: Connector } }).Http2SubchannelConnector;
  } catch {
    return false;
  }
  const proto = connector?.prototype;
  if (proto === undefined || typeof proto.createSession !== "function") return false;
  if (proto[PATCHED]) return true;
  const createSession = proto.createSession;
  proto.createSession = function (this: Connector, ...args: unknown[]) {
    return createSession.apply(this, args).then((transport) => {
      tableConnection(transport);
      return transport;
    });
  };
  proto[PATCHED] = true;
  return true;
}
