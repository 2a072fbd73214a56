// Whether an address stays on this machine: settings that are safe only on loopback (plain-HTTP
// metrics, unauthenticated peers) ask here.
import { hostOf } from "../common/host-port.js";

/** host:port (IPv6 in brackets) whose host is a loopback address or "localhost". */
export function isLoopbackHost(hostPort: string): boolean {
  const host = hostOf(hostPort);
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host === "::1" || host === "localhost";
}
