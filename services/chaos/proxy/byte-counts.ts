// Bytes through a proxy, per direction: received from the source socket and sent on to the
// destination after the toxics (a toxic that drops or holds data makes the two differ). Exposed
// on the API's /metrics in the Prometheus text format under the names Toxiproxy (2.6 and later,
// with -proxy-metrics) uses, so one scraper reads this server and a real Toxiproxy alike.
import type { Direction } from "./toxic-spec.js";

export interface ByteCounts {
  received: Record<Direction, number>;
  sent: Record<Direction, number>;
}

export function newByteCounts(): ByteCounts {
  return { received: { upstream: 0, downstream: 0 }, sent: { upstream: 0, downstream: 0 } };
}

export const RECEIVED_BYTES_METRIC = "toxiproxy_proxy_received_bytes_total";
export const SENT_BYTES_METRIC = "toxiproxy_proxy_sent_bytes_total";

export interface CountedProxy {
  name: string;
  listen: string;
  upstream: string;
  bytes: ByteCounts;
}

const label = (v: string) => JSON.stringify(v); // Prometheus label values escape like JSON strings

/** The Prometheus text exposition of every proxy's byte counters. */
export function byteMetricsText(proxies: readonly CountedProxy[]): string {
  const lines: string[] = [];
  for (const [metric, help, pick] of [
    [RECEIVED_BYTES_METRIC, "Bytes a proxy received from the source of each direction", (b: ByteCounts) => b.received],
    [SENT_BYTES_METRIC, "Bytes a proxy sent on to the destination of each direction, after its toxics", (b: ByteCounts) => b.sent],
  ] as const) {
    lines.push(`# HELP ${metric} ${help}`, `# TYPE ${metric} counter`);
    for (const p of proxies) {
      for (const direction of ["upstream", "downstream"] as const) {
        lines.push(`${metric}{direction=${label(direction)},listener=${label(p.listen)},proxy=${label(p.name)},upstream=${label(p.upstream)}} ${pick(p.bytes)[direction]}`);
      }
    }
  }
  return lines.join("\n") + "\n";
}

/** Per proxy name, the bytes of a metric summed over directions, from a Prometheus text (this server's or Toxiproxy's). */
export function bytesByProxy(text: string, metric: string = SENT_BYTES_METRIC): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${metric}{`)) continue;
    const name = /proxy="((?:[^"\\]|\\.)*)"/.exec(line)?.[1];
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (name === undefined || !Number.isFinite(value)) continue;
    out.set(name, (out.get(name) ?? 0) + value);
  }
  return out;
}
