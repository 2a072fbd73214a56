// The counters a sweep cell reads before and after it runs: each node's gossip counters (from its
// Prometheus endpoint) and the bytes every link proxy sent on (from the proxy API's /metrics, as
// Toxiproxy serves them with -proxy-metrics). Differences of two readings give the cell's figures.
import { bytesByProxy } from "../proxy/byte-counts.js";

export interface NodeCounters {
  /** Anti-entropy payload bytes sent (delta + state + ack), without gRPC framing. */
  payloadBytes: number;
  /** Frames the engine produced for a neighbour. */
  frames: number;
  /** Sends that failed (RPC error, reset, deadline). */
  rpcErrors: number;
  /** Neighbours a period left out because the previous exchange with them was still running (nothing built). */
  busySkips: number;
  /** Frames the engine produced that were not sent (a full-state push to a busy neighbour, states beside a running stream). */
  framesNotSent: number;
  /** Full states shipped because the delta buffer no longer held what a neighbour lacked. */
  stateFallbacks: number;
}

/** Sum of a metric's samples whose labels include every given label (all samples without filter). */
export function sumSamples(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest !== "" && rest[0] !== "{" && rest[0] !== " ") continue;
    if (!want.every((w) => rest.includes(w))) continue;
    const v = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(v)) sum += v;
  }
  return sum;
}

export function nodeCountersOf(text: string): NodeCounters {
  return {
    payloadBytes: sumSamples(text, "deltaset_gossip_sent_bytes_total"),
    frames: sumSamples(text, "deltaset_gossip_sent_frames_total"),
    rpcErrors: sumSamples(text, "deltaset_gossip_transport_events_total", { event: "rpc_errors" }),
    busySkips: sumSamples(text, "deltaset_gossip_transport_events_total", { event: "busy_skips" }),
    framesNotSent: sumSamples(text, "deltaset_gossip_transport_events_total", { event: "frames_not_sent" }),
    stateFallbacks: sumSamples(text, "deltaset_gossip_state_fallbacks_total"),
  };
}

export function diffCounters(after: NodeCounters, before: NodeCounters): NodeCounters {
  return {
    payloadBytes: after.payloadBytes - before.payloadBytes,
    frames: after.frames - before.frames,
    rpcErrors: after.rpcErrors - before.rpcErrors,
    busySkips: after.busySkips - before.busySkips,
    framesNotSent: after.framesNotSent - before.framesNotSent,
    stateFallbacks: after.stateFallbacks - before.stateFallbacks,
  };
}

export function sumCounters(all: readonly NodeCounters[]): NodeCounters {
  const z: NodeCounters = { payloadBytes: 0, frames: 0, rpcErrors: 0, busySkips: 0, framesNotSent: 0, stateFallbacks: 0 };
  for (const c of all) for (const k of Object.keys(z) as Array<keyof NodeCounters>) z[k] += c[k];
  return z;
}

/**
 * The measured loss of gossip exchanges: the share of sends that were attempted (the frames the
 * engine produced, minus those not sent) and failed. A neighbour left out of a period because it
 * was busy gets no frame at all, so it is no attempt.
 */
export function exchangeLoss(c: NodeCounters): { attempted: number; failed: number; rate: number | null } {
  const attempted = c.frames - c.framesNotSent;
  return { attempted, failed: c.rpcErrors, rate: attempted > 0 ? c.rpcErrors / attempted : null };
}

/**
 * GET a text page. A fresh connection each time ("connection: close"): fetch would otherwise reuse
 * a kept-alive socket that the server may close at the same moment (its idle timeout), and the
 * request then fails with "other side closed".
 */
export async function getText(url: string, timeoutMs: number): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { connection: "close" } });
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res.text();
}

export async function scrapeNode(metricsAddress: string, timeoutMs = 3000): Promise<NodeCounters> {
  return nodeCountersOf(await getText(`http://${metricsAddress}/metrics`, timeoutMs));
}

/** Bytes every proxy of the given Toxiproxy APIs sent on, both directions, summed. */
export async function scrapeProxyBytes(apis: readonly string[], timeoutMs = 3000): Promise<number> {
  let total = 0;
  for (const api of new Set(apis)) {
    const base = api.startsWith("http") ? api : `http://${api}`;
    for (const v of bytesByProxy(await getText(`${base}/metrics`, timeoutMs)).values()) total += v;
  }
  return total;
}

/** CPU seconds (user + system) a local process has used so far, or null when it cannot be read. */
export async function cpuSecondsOf(pid: number | undefined): Promise<number | null> {
  if (pid === undefined) return null;
  try {
    const { readFile } = await import("node:fs/promises");
    const fields = (await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}
