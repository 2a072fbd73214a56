// A named proxy: a TCP listener, the connections it accepted, and its toxics. Starting listens on
// `listen` (port 0 picks a free port, and `listen` then reports the real one); stopping closes the
// listener and every connection, so no byte passes while disabled; changing listen or upstream
// restarts it. The semantics follow Toxiproxy's Proxy.Update.

import net from "node:net";

import { AddressError, bindHost, formatHostPort, normalListen, parseHostPort } from "./address.js";
import { ErrToxicNotFound, internalError } from "./api-error.js";
import { type ByteCounts, newByteCounts } from "./byte-counts.js";
import { ProxiedConnection, type ToxicSnapshot } from "./connection.js";
import type { LinkClock } from "./stage.js";
import { toxicJson, type Direction, type ToxicJson, type ToxicSpec } from "./toxic-spec.js";

export interface ProxyJson {
  name: string;
  listen: string;
  upstream: string;
  enabled: boolean;
  toxics: ToxicJson[];
}

export interface ProxySettings {
  listen: string;
  upstream: string;
  enabled: boolean;
}

/** Toxics per direction in the order they were added; names are unique across both directions. */
class ToxicChain {
  private readonly byDirection: Record<Direction, ToxicSpec[]> = { upstream: [], downstream: [] };

  all(): ToxicSpec[] {
    return [...this.byDirection.upstream, ...this.byDirection.downstream];
  }

  snapshot(): ToxicSnapshot {
    return { upstream: [...this.byDirection.upstream], downstream: [...this.byDirection.downstream] };
  }

  get(name: string): ToxicSpec | undefined {
    return this.all().find((t) => t.name === name);
  }

  add(spec: ToxicSpec): void {
    this.byDirection[spec.direction].push(spec);
  }

  replace(spec: ToxicSpec): void {
    const list = this.byDirection[spec.direction];
    const index = list.findIndex((t) => t.name === spec.name);
    if (index >= 0) list[index] = spec;
  }

  remove(name: string): ToxicSpec | undefined {
    for (const list of Object.values(this.byDirection)) {
      const index = list.findIndex((t) => t.name === name);
      if (index >= 0) return list.splice(index, 1)[0];
    }
    return undefined;
  }
}

/** Go's wording for listen failures ("listen tcp 127.0.0.1:80: bind: address already in use"). */
function listenErrorMessage(address: string, error: NodeJS.ErrnoException): string {
  const reasons: Record<string, string> = {
    EADDRINUSE: "bind: address already in use",
    EADDRNOTAVAIL: "bind: cannot assign requested address",
    EACCES: "bind: permission denied",
    ENOTFOUND: "no such host",
  };
  const reason = (error.code && reasons[error.code]) ?? error.message;
  return `listen tcp ${address}: ${reason}`;
}

export class TcpProxy {
  private server: net.Server | undefined;
  private readonly connections = new Set<ProxiedConnection>();
  private readonly toxics = new ToxicChain();
  private enabledFlag = false;
  /** Bytes through this proxy since it was created (kept across disable/enable, like Toxiproxy's counters). */
  readonly bytes: ByteCounts = newByteCounts();

  constructor(
    readonly name: string,
    private listenAddress: string,
    private upstreamAddress: string,
    private readonly clock: LinkClock,
  ) {}

  get listen(): string {
    return this.listenAddress;
  }

  get upstream(): string {
    return this.upstreamAddress;
  }

  get enabled(): boolean {
    return this.enabledFlag;
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  toJSON(): ProxyJson {
    return {
      name: this.name,
      listen: this.listenAddress,
      upstream: this.upstreamAddress,
      enabled: this.enabledFlag,
      toxics: this.toxics.all().map(toxicJson),
    };
  }

  /** Starts listening; a no-op when already started. Throws an ApiError (500) when it cannot listen. */
  async start(): Promise<void> {
    if (this.enabledFlag) return;
    const requested = this.listenAddress === "" ? "127.0.0.1:0" : this.listenAddress;
    let host: string;
    let port: number;
    try {
      ({ host, port } = parseHostPort(requested));
    } catch (error) {
      throw internalError(`listen tcp ${requested}: ${(error as Error).message}`);
    }
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) =>
      this.accept(socket),
    );
    await new Promise<void>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => reject(internalError(listenErrorMessage(requested, error)));
      server.once("error", onError);
      server.listen({ host: bindHost(host), port }, () => {
        server.off("error", onError);
        resolve();
      });
    });
    server.on("error", () => {}); // accept errors (EMFILE and the like) must not crash the server
    const address = server.address() as net.AddressInfo;
    this.listenAddress = formatHostPort(address.address, address.port);
    this.server = server;
    this.enabledFlag = true;
  }

  /** Closes the listener and every connection through it. */
  async stop(): Promise<void> {
    if (!this.enabledFlag) return;
    this.enabledFlag = false;
    const server = this.server;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server?.close(() => resolve()) ?? resolve());
    for (const connection of [...this.connections]) connection.destroy();
    this.connections.clear();
    await closed;
  }

  /** Whether new settings name another listen address or upstream (which restarts the proxy). */
  differs(listen: string, upstream: string): boolean {
    let wanted: string;
    try {
      wanted = normalListen(listen === "" ? "127.0.0.1:0" : listen);
    } catch (error) {
      if (error instanceof AddressError) throw internalError(error.message);
      throw error;
    }
    return wanted !== this.listenAddress || upstream !== this.upstreamAddress;
  }

  async update(settings: ProxySettings): Promise<void> {
    if (this.differs(settings.listen, settings.upstream)) {
      await this.stop();
      this.listenAddress = settings.listen;
      this.upstreamAddress = settings.upstream;
    }
    if (settings.enabled !== this.enabledFlag) {
      if (settings.enabled) await this.start();
      else await this.stop();
    }
  }

  getToxic(name: string): ToxicSpec | undefined {
    return this.toxics.get(name);
  }

  listToxics(): ToxicSpec[] {
    return this.toxics.all();
  }

  /** Adds a toxic; live connections get it too, at the end of their chain for its direction. */
  addToxic(spec: ToxicSpec): void {
    this.toxics.add(spec);
    for (const connection of this.connections) connection.link(spec.direction)?.addToxic(spec);
  }

  updateToxic(spec: ToxicSpec): void {
    this.toxics.replace(spec);
    for (const connection of this.connections) connection.link(spec.direction)?.updateToxic(spec);
  }

  removeToxic(name: string): void {
    const removed = this.toxics.remove(name);
    if (!removed) throw ErrToxicNotFound;
    for (const connection of [...this.connections]) connection.link(removed.direction)?.removeToxic(name);
  }

  removeAllToxics(): void {
    for (const spec of this.toxics.all()) this.removeToxic(spec.name);
  }

  private accept(socket: net.Socket): void {
    if (!this.enabledFlag) {
      socket.destroy();
      return;
    }
    const connection = new ProxiedConnection(
      socket,
      this.upstreamAddress,
      () => this.toxics.snapshot(),
      this.clock,
      (gone) => this.connections.delete(gone),
      this.bytes,
    );
    this.connections.add(connection);
    connection.start();
  }
}
