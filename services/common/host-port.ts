// The host part of a "host:port" address (IPv6 hosts in brackets), shared by the places that check
// certificates or loopback-ness of a peer address.

/** "10.0.0.1:7070" → "10.0.0.1", "[::1]:7070" → "::1". */
export function hostOf(hostPort: string): string {
  return hostPort.slice(0, hostPort.lastIndexOf(":")).replace(/^\[|\]$/g, "");
}
