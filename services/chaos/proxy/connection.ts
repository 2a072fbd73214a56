// One accepted client and its upstream connection, joined by two links: upstream (client → server)
// and downstream (server → client). EOF travels through the toxics like data and half-closes the
// other side; a toxic's close ends both sockets after flushing; a toxic's reset sends RST on both.
// Reading pauses while a link holds more than HIGH_WATER bytes or its destination is congested.

import net from "node:net";

import { parseHostPort } from "./address.js";
import type { ByteCounts } from "./byte-counts.js";
import { Link, type LinkSink } from "./link.js";
import type { LinkClock } from "./stage.js";
import type { Direction, ToxicSpec } from "./toxic-spec.js";

const HIGH_WATER = 1 << 20;
/** How long a closing socket may take to flush before it is destroyed outright. */
const CLOSE_FLUSH_MS = 2000;

export type ToxicSnapshot = Readonly<Record<Direction, readonly ToxicSpec[]>>;

export class ProxiedConnection {
  private upstream: net.Socket | undefined;
  private links: Record<Direction, Link> | undefined;
  private ending = false;
  private gone = false;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: net.Socket,
    private readonly upstreamAddress: string,
    /** The proxy's toxics at the moment the upstream connection is made. */
    private readonly toxicsNow: () => ToxicSnapshot,
    private readonly clock: LinkClock,
    private readonly onGone: (connection: ProxiedConnection) => void,
    /** The proxy's counters, shared by its connections. */
    private readonly bytes?: ByteCounts,
  ) {}

  start(): void {
    const client = this.client;
    client.on("error", () => this.destroy());
    client.on("close", () => this.socketClosed());
    let target;
    try {
      target = parseHostPort(this.upstreamAddress);
    } catch {
      this.destroy();
      return;
    }
    // Go sockets, and so Toxiproxy's, send without Nagle's delay; do the same on both legs.
    client.setNoDelay(true);
    const upstream = net.connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
    this.upstream = upstream;
    upstream.on("error", () => this.destroy());
    upstream.on("close", () => this.socketClosed());
    upstream.once("connect", () => this.join(upstream));
  }

  link(direction: Direction): Link | undefined {
    return this.links?.[direction];
  }

  /** Ends both sockets at once, without flushing what toxics hold (the proxy is disabled or removed). */
  destroy(): void {
    this.ending = true;
    this.disposeLinks();
    this.client.destroy();
    this.upstream?.destroy();
    this.finish();
  }

  private join(upstream: net.Socket): void {
    if (this.ending) return;
    const client = this.client;
    const toxics = this.toxicsNow();
    const release = () => this.adjustFlow();
    const links: Record<Direction, Link> = {
      upstream: new Link(toxics.upstream, this.sinkFor(upstream, "upstream"), this.clock, release),
      downstream: new Link(toxics.downstream, this.sinkFor(client, "downstream"), this.clock, release),
    };
    this.links = links;
    const bytes = this.bytes;
    client.on("data", (chunk: Buffer) => {
      if (bytes) bytes.received.upstream += chunk.length;
      links.upstream.write(chunk);
      this.adjustFlow();
    });
    client.on("end", () => links.upstream.end());
    upstream.on("data", (chunk: Buffer) => {
      if (bytes) bytes.received.downstream += chunk.length;
      links.downstream.write(chunk);
      this.adjustFlow();
    });
    upstream.on("end", () => links.downstream.end());
    client.on("drain", release);
    upstream.on("drain", release);
    client.resume(); // accepted paused, so nothing was read before the upstream side existed
  }

  private sinkFor(dest: net.Socket, direction: Direction): LinkSink {
    return {
      write: (data) => {
        if (!dest.destroyed && dest.writable) {
          if (this.bytes) this.bytes.sent[direction] += data.length;
          dest.write(data);
        }
      },
      end: () => {
        if (!dest.destroyed && dest.writable) dest.end();
      },
      close: () => this.closeBoth(),
      reset: () => this.resetBoth(),
    };
  }

  /** Pauses a source whose link is full or whose destination is congested, resumes it otherwise. */
  private adjustFlow(): void {
    const links = this.links;
    const upstream = this.upstream;
    if (!links || !upstream || this.ending) return;
    this.adjustOne(this.client, links.upstream, upstream);
    this.adjustOne(upstream, links.downstream, this.client);
  }

  private adjustOne(source: net.Socket, link: Link, dest: net.Socket): void {
    if (source.destroyed || source.readableEnded) return;
    const hold = link.bufferedBytes > HIGH_WATER || dest.writableNeedDrain;
    if (hold && !source.isPaused()) source.pause();
    else if (!hold && source.isPaused()) source.resume();
  }

  /** A toxic closed the connection: flush what was written, send FIN on both sides, then close. */
  private closeBoth(): void {
    if (this.ending) return;
    this.ending = true;
    this.disposeLinks();
    for (const socket of this.sockets()) {
      if (socket.destroyed) continue;
      if (socket.writableFinished) {
        socket.destroy(); // its FIN went out already (the link in that direction had ended)
        continue;
      }
      socket.once("finish", () => socket.destroy());
      socket.end();
      socket.resume(); // read and discard until closed, so unread input does not turn FIN into RST
    }
    this.flushTimer = setTimeout(() => {
      for (const socket of this.sockets()) socket.destroy();
    }, CLOSE_FLUSH_MS);
  }

  /** A toxic reset the connection: RST on both sides (SO_LINGER 0 close). */
  private resetBoth(): void {
    if (this.ending) return;
    this.ending = true;
    this.disposeLinks();
    for (const socket of this.sockets()) {
      if (socket.destroyed) continue;
      try {
        socket.resetAndDestroy();
      } catch {
        socket.destroy();
      }
    }
  }

  private sockets(): net.Socket[] {
    return this.upstream ? [this.client, this.upstream] : [this.client];
  }

  private socketClosed(): void {
    const upstreamClosed = this.upstream === undefined || this.upstream.destroyed;
    if (this.client.destroyed && upstreamClosed) {
      this.disposeLinks();
      this.finish();
    }
  }

  private disposeLinks(): void {
    this.links?.upstream.dispose();
    this.links?.downstream.dispose();
  }

  private finish(): void {
    if (this.gone) return;
    if (this.client.destroyed && (this.upstream === undefined || this.upstream.destroyed)) {
      this.gone = true;
      if (this.flushTimer) clearTimeout(this.flushTimer);
      this.onGone(this);
    }
  }
}
