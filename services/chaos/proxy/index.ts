// A Toxiproxy-compatible fault proxy: Toxiproxy 2.x's HTTP API (as toxiproxy-node-client 4.1.0
// and upstream's own clients call it) in front of TCP forwarders with toxics, for machines without
// the Toxiproxy binary. The same experiment code drives this server locally and real Toxiproxy in
// Kubernetes.
//
// Differences from upstream Toxiproxy (Shopify/toxiproxy 2.12):
// - EOF from one side half-closes the other side after the toxics (upstream closes both
//   directions of the upstream socket on the first EOF).
// - Toxicity is drawn when a connection starts, when a toxic is added to a live connection and
//   when that toxic is updated; upstream also redraws a toxic when a later toxic is added/removed.
// - Updating a latency/bandwidth toxic re-plans the chunk it holds under the new attributes;
//   upstream releases that chunk at once.
// - reset_peer sends RST (socket.resetAndDestroy) even when added to a live connection; upstream
//   sets SO_LINGER 0 only on connections that start with the toxic. Removing an armed reset_peer
//   resets immediately (upstream waits for its timeout first).
// - A timeout toxic that this connection did not draw (toxicity) does not close it on removal.
// - Timers have millisecond resolution: slicer delays under 1000 µs still wait ≥ 1 ms (0 = none).
// - An empty or ":port" listen address binds 127.0.0.1, not every interface; "localhost" is 127.0.0.1.
// - POST /populate with an empty array answers {"proxies": []} (upstream: null); error bodies are
//   sent as application/json (upstream: text/plain with the same JSON).
// - No /metrics endpoint; bad-body error details are this server's wording after the same prefix.

export { startToxiproxyServer, TOXIPROXY_COMPAT_VERSION, type ToxiproxyServer, type ToxiproxyServerOptions } from "./server.js";
export { runProxyServerCli, parseProxyCliArgs, PROXY_CLI_USAGE, type ProxyCliIo } from "./cli.js";
export { ApiError } from "./api-error.js";
export type { ToxicSpec, ToxicJson, ToxicType, Direction } from "./toxic-spec.js";
export type { ProxyJson } from "./tcp-proxy.js";
