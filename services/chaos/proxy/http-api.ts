// Toxiproxy's HTTP API on node:http: routes, status codes and JSON shapes as in Toxiproxy 2.x
// (api.go). Creating a proxy or populating answers 201, creating a toxic 200 (as upstream), deletes
// and reset 204 with no body; errors are {"error": msg, "status": N}. Browsers are refused (403)
// as upstream does, to keep web pages from driving the API.

import type { IncomingMessage, ServerResponse } from "node:http";

import { ApiError, ErrBadRequestBody, internalError } from "./api-error.js";
import type { JsonBody, ProxyCollection } from "./proxy-collection.js";
import { toxicJson } from "./toxic-spec.js";
import { byteMetricsText } from "./byte-counts.js";

const MAX_BODY_BYTES = 1 << 20;

interface Reply {
  status: number;
  /** Serialised as JSON; undefined means no body. */
  body?: unknown;
  /** A body sent as it is, instead of `body`. */
  raw?: { text: string; contentType: string };
}

type Handler = (params: string[], body: JsonBody) => Promise<Reply> | Reply;

interface Route {
  /** Path segments; ":" marks a parameter (a non-empty segment). */
  pattern: string[];
  methods: Record<string, Handler>;
}

function routes(collection: ProxyCollection, version: string): Route[] {
  const ok = (body: unknown): Reply => ({ status: 200, body });
  const noContent: Reply = { status: 204 };
  return [
    {
      // Byte for byte what Toxiproxy ≥ 2.7 answers; the node client returns it unparsed.
      pattern: ["version"],
      methods: {
        GET: () => ({
          status: 200,
          raw: { text: `{"version": ${JSON.stringify(version)}}\n`, contentType: "application/json;charset=utf-8" },
        }),
      },
    },
    {
      // Toxiproxy serves this with -proxy-metrics; here always.
      pattern: ["metrics"],
      methods: {
        GET: () => ({
          status: 200,
          raw: { text: byteMetricsText(collection.list()), contentType: "text/plain; version=0.0.4; charset=utf-8" },
        }),
      },
    },
    {
      pattern: ["reset"],
      methods: {
        POST: async () => {
          await collection.reset();
          return noContent;
        },
      },
    },
    {
      pattern: ["proxies"],
      methods: {
        GET: () => ok(Object.fromEntries(collection.list().map((p) => [p.name, p.toJSON()]))),
        POST: async (_, body) => ({ status: 201, body: (await collection.create(body)).toJSON() }),
      },
    },
    {
      pattern: ["populate"],
      methods: {
        POST: async (_, body) => {
          const result = await collection.populate(body);
          const proxies = result.proxies.map((p) => p.toJSON());
          if (result.error) return { status: result.error.status, body: { ...result.error.toJSON(), proxies } };
          return { status: 201, body: { proxies } };
        },
      },
    },
    {
      pattern: ["proxies", ":"],
      methods: {
        GET: ([name]) => ok(collection.get(name!).toJSON()),
        POST: async ([name], body) => ok((await collection.update(name!, body)).toJSON()),
        DELETE: async ([name]) => {
          await collection.remove(name!);
          return noContent;
        },
      },
    },
    {
      pattern: ["proxies", ":", "toxics"],
      methods: {
        GET: ([name]) => ok(collection.listToxics(name!).map(toxicJson)),
        POST: ([name], body) => ok(toxicJson(collection.addToxic(name!, body))),
      },
    },
    {
      pattern: ["proxies", ":", "toxics", ":"],
      methods: {
        GET: ([name, toxic]) => ok(toxicJson(collection.getToxic(name!, toxic!))),
        POST: ([name, toxic], body) => ok(toxicJson(collection.updateToxic(name!, toxic!, body))),
        DELETE: ([name, toxic]) => {
          collection.removeToxic(name!, toxic!);
          return noContent;
        },
      },
    },
  ];
}

/** Update routes accept PATCH as well as POST (Toxiproxy ≥ 2.6). */
function handlerFor(route: Route, method: string): Handler | undefined {
  const isUpdateRoute = route.pattern.length === 2 || route.pattern.length === 4;
  if (method === "PATCH" && isUpdateRoute) return route.methods.POST;
  return route.methods[method];
}

function match(route: Route, segments: string[]): string[] | undefined {
  if (route.pattern.length !== segments.length) return undefined;
  const params: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const want = route.pattern[i]!;
    const got = segments[i]!;
    if (want === ":") {
      if (got === "") return undefined;
      params.push(got);
    } else if (want !== got) {
      return undefined;
    }
  }
  return params;
}

function pathSegments(url: string): string[] | undefined {
  const pathname = new URL(url, "http://localhost").pathname;
  try {
    return pathname.slice(1).split("/").map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(ErrBadRequestBody.withDetail("body too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function jsonBody(text: string): JsonBody {
  return () => {
    if (text.trim() === "") throw ErrBadRequestBody.withDetail("EOF");
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      throw ErrBadRequestBody.withDetail((error as Error).message);
    }
  };
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function sendReply(res: ServerResponse, reply: Reply): void {
  if (reply.raw) {
    res.writeHead(reply.status, {
      "Content-Type": reply.raw.contentType,
      "Content-Length": Buffer.byteLength(reply.raw.text),
    });
    res.end(reply.raw.text);
    return;
  }
  if (reply.body === undefined) {
    res.writeHead(reply.status);
    res.end();
    return;
  }
  const text = JSON.stringify(reply.body) + (reply.status >= 400 ? "\n" : "");
  res.writeHead(reply.status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}

export interface ApiHandlerOptions {
  /** Reported by GET /version as {"version": "..."}. */
  version: string;
}

export function createApiHandler(
  collection: ProxyCollection,
  options: ApiHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const table = routes(collection, options.version);
  let requestCount = 0;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader("X-Toxiproxy-Request-Id", `req-${(++requestCount).toString(16)}`);
    if ((req.headers["user-agent"] ?? "").startsWith("Mozilla/")) {
      sendText(res, 403, "User agent not allowed\n");
      req.resume();
      return;
    }
    const segments = pathSegments(req.url ?? "/");
    const method = req.method ?? "GET";
    let params: string[] | undefined;
    let handler: Handler | undefined;
    let pathKnown = false;
    for (const route of segments ? table : []) {
      params = match(route, segments!);
      if (!params) continue;
      pathKnown = true;
      handler = handlerFor(route, method);
      break;
    }
    if (!pathKnown) {
      req.resume();
      sendText(res, 404, "404 page not found\n");
      return;
    }
    if (!handler) {
      req.resume();
      sendText(res, 405, "");
      return;
    }
    let reply: Reply;
    try {
      const text = await readBody(req);
      const run = handler;
      const args = params!;
      reply = await collection.serialize(() => run(args, jsonBody(text)));
    } catch (error) {
      const apiError = error instanceof ApiError ? error : internalError(String((error as Error)?.message ?? error));
      reply = { status: apiError.status, body: apiError.toJSON() };
    }
    sendReply(res, reply);
  }

  return (req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) sendText(res, 500, "internal error\n");
      else res.destroy();
    });
  };
}
