// `deltaset chaos proxy`: runs the Toxiproxy-compatible server until SIGINT/SIGTERM.
//
//   deltaset chaos proxy [--listen 127.0.0.1:8474] [--config proxies.json]
//
// --host/--port are accepted too (toxiproxy-server's flags). --config names a JSON array of
// {name, listen, upstream, enabled?} created at start, like toxiproxy-server -config.

import { readFile } from "node:fs/promises";

import { parseHostPort } from "./address.js";
import { DEFAULT_API_HOST, DEFAULT_API_PORT, startToxiproxyServer, type ToxiproxyServer } from "./server.js";

export const PROXY_CLI_USAGE = `usage: deltaset chaos proxy [--listen HOST:PORT] [--config FILE]

Runs a Toxiproxy-compatible fault proxy (HTTP API, default ${DEFAULT_API_HOST}:${DEFAULT_API_PORT}).
  --listen HOST:PORT   API listen address (port 0 picks a free port)
  --host HOST          API host (alternative to --listen)
  --port PORT          API port (alternative to --listen)
  --config FILE        JSON array of proxies to create at start, as POST /populate takes
  --help               this text
`;

export interface ProxyCliOptions {
  host: string;
  port: number;
  config?: string;
  help: boolean;
}

export function parseProxyCliArgs(args: readonly string[]): ProxyCliOptions {
  const options: ProxyCliOptions = { host: DEFAULT_API_HOST, port: DEFAULT_API_PORT, help: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const [flag, inline] = arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = (): string => {
      const v = inline ?? args[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--listen": {
        const { host, port } = parseHostPort(value());
        options.host = host === "" ? DEFAULT_API_HOST : host;
        options.port = port;
        break;
      }
      case "--host":
        options.host = value();
        break;
      case "--port": {
        const text = value();
        const port = Number(text);
        if (!/^\d+$/.test(text) || port > 65535) throw new Error(`--port: invalid port ${text}`);
        options.port = port;
        break;
      }
      case "--config":
        options.config = value();
        break;
      case "--help":
      case "-h":
        options.help = true;
        break;
      default:
        throw new Error(`unknown argument ${arg}\n${PROXY_CLI_USAGE}`);
    }
  }
  return options;
}

async function populateFromFile(server: ToxiproxyServer, file: string): Promise<number> {
  const body = await readFile(file, "utf8");
  const res = await fetch(`${server.url}/populate`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`populating from ${file} failed: HTTP ${res.status} ${text.trim()}`);
  return (JSON.parse(text) as { proxies: unknown[] }).proxies.length;
}

export interface ProxyCliIo {
  /** Stops the server when aborted (in addition to SIGINT/SIGTERM). */
  signal?: AbortSignal;
  log?: (line: string) => void;
  /** Called once the API listens, with its base URL. */
  onListening?: (url: string) => void;
}

/** Runs the server until SIGINT, SIGTERM or `io.signal`; resolves once everything is closed. */
export async function runProxyServerCli(args: readonly string[], io: ProxyCliIo = {}): Promise<void> {
  const log = io.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const options = parseProxyCliArgs(args);
  if (options.help) {
    log(PROXY_CLI_USAGE.trimEnd());
    return;
  }
  const server = await startToxiproxyServer({ host: options.host, port: options.port });
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const onSignal = () => stop();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  io.signal?.addEventListener("abort", onSignal, { once: true });
  try {
    if (options.config) {
      const count = await populateFromFile(server, options.config);
      log(`created ${count} proxies from ${options.config}`);
    }
    log(`toxiproxy-compatible API listening on ${server.url}`);
    io.onListening?.(server.url);
    if (io.signal?.aborted) stop();
    await stopped;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    io.signal?.removeEventListener("abort", onSignal);
    await server.close();
  }
}
