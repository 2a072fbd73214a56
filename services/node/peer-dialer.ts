// How a node dials its peers: directly, or through a per-link fault proxy (chaos runs).
//
// With a peer proxy, every directed link <self> → <peer> gets its own proxy in a Toxiproxy (or
// compatible) server, created through the Toxiproxy HTTP API and named `<self>-to-<peer>`; the
// node then dials the proxy's listen address instead of the peer. An experiment can so cut, slow
// or reset any pair or group of links independently, and gossip and failure detection see the
// same faults. When the API fails the dialer retries with backoff and never falls back to a
// direct connection: a fault must not be bypassed by the very traffic it is meant to stop.
import { Toxiproxy, type Proxy } from "toxiproxy-node-client";
import { withTimeout } from "../common/with-timeout.js";

export interface PeerDialer {
  /** The address to dial for a peer (nodeId may be "" when only the address is known, e.g. a seed). */
  dial(nodeId: string, address: string): Promise<string> | string;
}

export interface ToxiproxyDialerOptions {
  /** The Toxiproxy API: a URL (http://127.0.0.1:8474) or host:port. */
  api: string;
  /** This node's id (the `<self>` of proxy names). */
  self: string;
  /** Host the proxies listen on (default 127.0.0.1; the server picks the port). */
  listenHost?: string;
  /** Retry backoff of failed API calls (default 100 ms doubling up to 5 s). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Deadline of one API request (default 5 s). */
  requestTimeoutMs?: number;
  /** Diagnostics: API failures (each retry) and proxies created. */
  log?: (level: "info" | "warn", message: string, fields: Record<string, unknown>) => void;
}

/** The base URL of a Toxiproxy API given as a URL or as host:port. */
export function toxiproxyUrl(api: string): string {
  const trimmed = api.trim().replace(/\/+$/, "");
  return /^https?:\/\//i.test(trimmed) ? trimmed : `http://${trimmed}`;
}

/** A proxy name part from a node id or an address (Toxiproxy puts names into URLs unescaped). */
export function proxyNamePart(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]/g, "_");
}

/** The proxy name of the directed link self → peer (peer: its node id, else its address). */
export function linkProxyName(self: string, peerId: string, address: string): string {
  return `${proxyNamePart(self)}-to-${proxyNamePart(peerId !== "" ? peerId : address)}`;
}

/** The HTTP status of a toxiproxy-node-client error ("Request failed with status code 409"). */
export function toxiproxyStatus(err: unknown): number | undefined {
  const m = /status code (\d{3})/.exec(String((err as Error)?.message ?? ""));
  return m ? Number(m[1]) : undefined;
}

/**
 * Dials each peer through its own proxy. Proxies are keyed by the peer's address (the proxy's
 * upstream): one per directed link, whichever name it was first created under. An existing proxy
 * of this node for that upstream (a restart of the node) is reused as it is, disabled or with
 * toxics: a restart must not heal a fault the experiment set.
 */
export class ToxiproxyDialer implements PeerDialer {
  readonly url: string;
  private readonly tp: Toxiproxy;
  private readonly ready = new Map<string, string>();
  private readonly pending = new Map<string, Promise<string>>();
  private readonly sleepers = new Set<() => void>();
  private closed = false;
  private apiFailures = 0;

  constructor(private readonly o: ToxiproxyDialerOptions) {
    this.url = toxiproxyUrl(o.api);
    this.tp = new Toxiproxy(this.url);
  }

  /** API calls that failed and were retried (for tests and diagnostics). */
  get failures(): number {
    return this.apiFailures;
  }

  dial(nodeId: string, address: string): Promise<string> | string {
    const known = this.ready.get(address);
    if (known !== undefined) return known;
    let p = this.pending.get(address);
    if (p === undefined) {
      p = this.ensure(nodeId, address);
      this.pending.set(address, p);
      void p.then((listen) => {
        this.ready.set(address, listen);
        this.pending.delete(address);
      });
    }
    return p;
  }

  /** Stop retrying. Dials still waiting never resolve (their callers give up on their own deadlines). */
  close(): void {
    this.closed = true;
    for (const wake of [...this.sleepers]) wake();
  }

  /** Find or create the proxy for this upstream; retries until it succeeds or the dialer closes. */
  private ensure(nodeId: string, address: string): Promise<string> {
    return new Promise<string>((resolve) => {
      const attempt = async (backoff: number): Promise<void> => {
        if (this.closed) return;
        try {
          resolve(await this.findOrCreate(nodeId, address));
          return;
        } catch (err) {
          this.apiFailures++;
          this.o.log?.("warn", "peer proxy API failed; retrying (the peer is not dialed directly)", {
            api: this.url,
            peer: nodeId || address,
            retryInMs: backoff,
            err: (err as Error).message,
          });
        }
        await this.sleep(backoff);
        void attempt(Math.min(backoff * 2, this.o.maxBackoffMs ?? 5000));
      };
      void attempt(this.o.initialBackoffMs ?? 100);
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      this.sleepers.add(wake);
    });
  }

  private async findOrCreate(nodeId: string, address: string): Promise<string> {
    const timeout = this.o.requestTimeoutMs ?? 5000;
    const prefix = `${proxyNamePart(this.o.self)}-to-`;
    const all = await withTimeout(this.tp.getAll(), timeout, "GET /proxies");
    const mine = Object.values(all)
      .filter((p) => p.name.startsWith(prefix) && p.upstream === address)
      .sort((a, b) => a.name.localeCompare(b.name));
    if (mine.length > 0) return this.listenOf(mine[0]!);
    const name = linkProxyName(this.o.self, nodeId, address);
    let proxy: Proxy;
    try {
      proxy = await withTimeout(
        this.tp.createProxy({ name, listen: `${this.o.listenHost ?? "127.0.0.1"}:0`, upstream: address }),
        timeout,
        "POST /proxies",
      );
      this.o.log?.("info", "peer proxy created", { name, listen: proxy.listen, upstream: address });
    } catch (err) {
      if (toxiproxyStatus(err) !== 409) throw err;
      // The name exists for another upstream (the peer moved): point it at the peer's address,
      // keeping its listen port and its enabled state.
      const existing = await withTimeout(this.tp.get(name), timeout, `GET /proxies/${name}`);
      proxy = existing.upstream === address
        ? existing
        : await withTimeout(existing.update({ enabled: existing.enabled, listen: existing.listen, upstream: address }), timeout, `POST /proxies/${name}`);
    }
    return this.listenOf(proxy);
  }

  /** The address to dial for a proxy's listen address (a wildcard host is reached on loopback). */
  private listenOf(proxy: Proxy): string {
    const i = proxy.listen.lastIndexOf(":");
    const host = proxy.listen.slice(0, i);
    const port = proxy.listen.slice(i + 1);
    if (host === "" || host === "0.0.0.0" || host === "[::]" || host === "::") return `127.0.0.1:${port}`;
    return proxy.listen;
  }
}
