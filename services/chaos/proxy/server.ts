// Starting and stopping a Toxiproxy-compatible server in-process: the HTTP API plus the proxies it
// manages. The same experiment code can then drive this server or a real Toxiproxy.

import http from "node:http";
import type { AddressInfo } from "node:net";

import { bindHost, formatHostPort } from "./address.js";
import { createApiHandler } from "./http-api.js";
import { ProxyCollection } from "./proxy-collection.js";
import { systemClock } from "./system-clock.js";

/** The Toxiproxy release whose API this server follows, tagged so a client can tell them apart. */
export const TOXIPROXY_COMPAT_VERSION = "2.12.0-deltaset";

export const DEFAULT_API_HOST = "127.0.0.1";
export const DEFAULT_API_PORT = 8474;

export interface ToxiproxyServerOptions {
  /** API listen host; default 127.0.0.1. */
  host?: string;
  /** API port; default 8474, 0 picks a free one. */
  port?: number;
  /** Random source for toxicity draws, latency jitter and slice sizes; default Math.random. */
  random?: () => number;
  /** Version reported by GET /version. */
  version?: string;
}

export interface ToxiproxyServer {
  /** Base URL for a client, e.g. new Toxiproxy(server.url). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Stops every proxy (closing its connections) and the API server. Idempotent. */
  close(): Promise<void>;
}

export async function startToxiproxyServer(options: ToxiproxyServerOptions = {}): Promise<ToxiproxyServer> {
  const collection = new ProxyCollection(systemClock(options.random));
  const handler = createApiHandler(collection, { version: options.version ?? TOXIPROXY_COMPAT_VERSION });
  const server = http.createServer(handler);
  const requestedHost = bindHost(options.host ?? DEFAULT_API_HOST);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: requestedHost, port: options.port ?? DEFAULT_API_PORT }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const hostPort = formatHostPort(address.address, address.port);
  let closing: Promise<void> | undefined;
  return {
    url: `http://${hostPort}`,
    host: address.address,
    port: address.port,
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections(); // keep-alive client connections would hold close() open
        await collection.serialize(() => collection.clear());
        await stopped;
      })();
      return closing;
    },
  };
}
