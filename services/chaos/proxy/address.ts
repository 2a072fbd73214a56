// "host:port" strings as Toxiproxy's API carries them: parsing, formatting, and the normal form a
// listening proxy reports (the bound IP and real port, IPv6 in brackets).

export interface HostPort {
  host: string;
  port: number;
}

export class AddressError extends Error {}

/** Parses "127.0.0.1:8474", "[::1]:8474", "localhost:0". The port must be 0..65535. */
export function parseHostPort(text: string): HostPort {
  let host: string;
  let portText: string;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close < 0) throw new AddressError(`address ${text}: missing ']' in address`);
    host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (!rest.startsWith(":")) throw new AddressError(`address ${text}: missing port in address`);
    portText = rest.slice(1);
  } else {
    const colon = text.lastIndexOf(":");
    if (colon < 0) throw new AddressError(`address ${text}: missing port in address`);
    host = text.slice(0, colon);
    if (host.includes(":")) throw new AddressError(`address ${text}: too many colons in address`);
    portText = text.slice(colon + 1);
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw new AddressError(`address ${text}: invalid port`);
  }
  return { host, port: Number(portText) };
}

export function formatHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * The host a listener binds for a requested host. "localhost" means IPv4 loopback, as Go's resolver
 * picks it; an empty host (":port") also binds loopback here (Toxiproxy would bind every interface,
 * but this server keeps test traffic on loopback).
 */
export function bindHost(host: string): string {
  if (host === "" || host === "localhost") return "127.0.0.1";
  return host;
}

/** The listen string a request names, in the form a started proxy would report (port 0 stays 0). */
export function normalListen(text: string): string {
  const { host, port } = parseHostPort(text);
  return formatHostPort(bindHost(host), port);
}
