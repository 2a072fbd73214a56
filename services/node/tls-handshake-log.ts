// Failed TLS handshakes on the receiving side. grpc-js drops them silently (a trace line at
// most), so a peer with an expired, wrongly signed or missing certificate would show up only in
// its own log. This attaches to the TLS servers grpc-js created for a bound address and reports
// each failure (counted, and logged at warn with the reason and the remote address, rate-limited).
import type * as grpc from "@grpc/grpc-js";
import type { TLSSocket } from "node:tls";
import type { EventEmitter } from "node:events";
import type { Logger } from "../common/logger.js";
import { RateLimitedWarn } from "./peer-interceptors.js";

export interface HandshakeFailure {
  /** OpenSSL's code when there is one (e.g. ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE), else the error name. */
  reason: string;
  message: string;
  remote: string;
}

/** The http2 servers behind a grpc-js Server; grpc-js keeps them in a private map. */
function http2ServersOf(server: grpc.Server): EventEmitter[] {
  const map = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  if (!(map instanceof Map)) throw new Error("this @grpc/grpc-js version does not keep its http2 servers where expected: TLS handshake failures cannot be observed");
  return [...map.keys()];
}

/** What the common reasons mean, for the operator reading the log. */
const HINTS: Record<string, string> = {
  // Node's TLS clients check the server certificate after the handshake and just hang up.
  ECONNRESET: "the client hung up during the handshake: it probably does not trust this node's certificate (CA, name or expiry)",
  ERR_SSL_WRONG_VERSION_NUMBER: "the client does not speak TLS (a plaintext client, or a plaintext peer)",
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: "the client rejected this node's certificate",
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: "the client does not trust the CA that signed this node's certificate",
  ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED: "the client says a certificate has expired",
  ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE: "the client sent no certificate",
};

type HandshakeSocket = Pick<TLSSocket, "remoteAddress" | "remotePort"> & { _parent?: { _peername?: { address?: string; port?: number } } };

export function describeHandshakeError(err: Error & { code?: string }, socket: HandshakeSocket | undefined): HandshakeFailure {
  // A socket the client already reset has lost its address; the raw socket under it kept the
  // copy read when the connection was accepted (see the "connection" listener below).
  const peer = socket?.remoteAddress !== undefined ? { address: socket.remoteAddress, port: socket.remotePort } : socket?._parent?._peername;
  const remote = peer?.address !== undefined ? `${peer.address}:${peer.port ?? "?"}` : "unknown";
  const reason = err.code ?? err.name;
  return { reason, message: HINTS[reason] ?? err.message, remote };
}

/**
 * Report every failed TLS handshake on the server's secure listeners (call after binding).
 * Returns how many listeners are watched (0 without TLS).
 */
export function watchTlsHandshakes(server: grpc.Server, log: Logger, onFailure?: (f: HandshakeFailure) => void, now: () => number = Date.now): number {
  const warn = new RateLimitedWarn(log, now);
  let watched = 0;
  for (const http2 of http2ServersOf(server)) {
    // Only secure servers emit tlsClientError; a plaintext listener has nothing to watch.
    if (typeof (http2 as { setSecureContext?: unknown }).setSecureContext !== "function") continue;
    // Reading the address now makes the raw socket cache it before a reset can lose it.
    http2.prependListener("connection", (raw: { remoteAddress?: string }) => void raw.remoteAddress);
    http2.on("tlsClientError", (err: Error & { code?: string }, socket: TLSSocket) => {
      const f = describeHandshakeError(err, socket);
      onFailure?.(f);
      warn.warn(`tls ${f.reason}`, "a TLS handshake with this node failed", { reason: f.reason, detail: f.message, remote: f.remote });
    });
    watched++;
  }
  return watched;
}
