// The peer links of a cluster as proxies in one or more Toxiproxy APIs, driven only through
// toxiproxy-node-client (so the same code drives real Toxiproxy sidecars in Kubernetes).
//
// Node X's proxy for its link to Y is named `X-to-...` and has Y's advertised address as its
// upstream; a link is found by that prefix and upstream, not by the full name, because a node
// names a proxy by the peer's address when it dials a seed before knowing the peer's id.
import { Toxiproxy, type Proxy } from "toxiproxy-node-client";
import { ToxiproxyDialer, proxyNamePart, toxiproxyStatus, toxiproxyUrl } from "../node/peer-dialer.js";
import type { LinkRef, ToxicDef } from "./plan.js";
import { withTimeout } from "../common/with-timeout.js";
import { SENT_BYTES_METRIC } from "./proxy/byte-counts.js";
import { getText, sumSamples } from "./eval/counters.js";

export interface LinkNode {
  nodeId: string;
  /** The node's advertised address (what its peers dial). */
  address: string;
  /** The Toxiproxy API that holds this node's outgoing proxies. */
  toxiproxy: string;
}

export interface LinkProxy {
  from: string;
  to: string;
  proxy: Proxy;
}

/** Retry an API call a few times (bounded) before giving up. */
async function retry<T>(what: string, fn: () => Promise<T>, attempts = 5): Promise<T> {
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      return await withTimeout(fn(), 5000, what);
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 100 * 2 ** i));
    }
  }
  throw new Error(`${what}: ${(last as Error).message}`);
}

/**
 * Create the proxy of every directed link ahead of time, named `<from>-to-<to>` by node id (a
 * node finds and uses it instead of creating one named after a seed address).
 */
export async function precreateLinkProxies(nodes: readonly LinkNode[]): Promise<void> {
  for (const a of nodes) {
    const dialer = new ToxiproxyDialer({ api: a.toxiproxy, self: a.nodeId, initialBackoffMs: 100, maxBackoffMs: 1000 });
    try {
      for (const b of nodes) {
        if (b === a) continue;
        const dialed = dialer.dial(b.nodeId, b.address);
        await withTimeout(Promise.resolve(dialed), 15_000, `proxy ${a.nodeId}-to-${b.nodeId}`);
      }
    } finally {
      dialer.close();
    }
  }
}

export class LinkTable {
  private readonly apis = new Map<string, Toxiproxy>();
  /** Toxics this table added: proxy path → toxic names. */
  private readonly added = new Map<string, { proxy: Proxy; names: Set<string> }>();
  private toxicSeq = 0;

  constructor(private nodes: LinkNode[]) {
    for (const n of nodes) {
      const url = toxiproxyUrl(n.toxiproxy);
      if (!this.apis.has(url)) this.apis.set(url, new Toxiproxy(url));
    }
  }

  /** Every proxy that belongs to a link between known nodes. */
  async list(): Promise<LinkProxy[]> {
    const out: LinkProxy[] = [];
    const ids = [...this.nodes].sort((a, b) => b.nodeId.length - a.nodeId.length);
    for (const [url, tp] of this.apis) {
      const all = await retry(`GET ${url}/proxies`, () => tp.getAll());
      for (const proxy of Object.values(all)) {
        const from = ids.find((n) => toxiproxyUrl(n.toxiproxy) === url && proxy.name.startsWith(`${proxyNamePart(n.nodeId)}-to-`));
        const to = this.nodes.find((n) => n.address === proxy.upstream);
        if (from !== undefined && to !== undefined && from !== to) out.push({ from: from.nodeId, to: to.nodeId, proxy });
      }
    }
    return out;
  }

  /** Links without a proxy yet (nodes create them when they first dial a peer). */
  async missing(): Promise<LinkRef[]> {
    const have = new Set((await this.list()).map((l) => `${l.from}\u0000${l.to}`));
    const out: LinkRef[] = [];
    for (const a of this.nodes) for (const b of this.nodes) if (a !== b && !have.has(`${a.nodeId}\u0000${b.nodeId}`)) out.push([a.nodeId, b.nodeId]);
    return out;
  }

  private async select(links: readonly LinkRef[]): Promise<LinkProxy[]> {
    const want = new Set(links.map(([a, b]) => `${a}\u0000${b}`));
    return (await this.list()).filter((l) => want.has(`${l.from}\u0000${l.to}`));
  }

  /** Disable the proxies of these links: no byte passes, open connections are closed. */
  async cut(links: readonly LinkRef[]): Promise<number> {
    const selected = await this.select(links);
    for (const l of selected) {
      const p = l.proxy;
      await retry(`disable ${p.name}`, () => p.update({ enabled: false, listen: p.listen, upstream: p.upstream }));
    }
    return selected.length;
  }

  /** Add a toxic to these links (one per stream). */
  async toxic(links: readonly LinkRef[], def: ToxicDef): Promise<number> {
    const selected = await this.select(links);
    for (const l of selected) {
      for (const stream of def.streams) {
        const name = `chaos-${def.type}-${stream}-${++this.toxicSeq}`;
        await retry(`add ${def.type} to ${l.proxy.name}`, () =>
          l.proxy.addToxic({ name, type: def.type, stream, toxicity: def.toxicity ?? 1, attributes: def.attributes as never }),
        );
        const key = l.proxy.getPath();
        const entry = this.added.get(key) ?? { proxy: l.proxy, names: new Set<string>() };
        entry.names.add(name);
        this.added.set(key, entry);
      }
    }
    return selected.length;
  }

  /** Remove the toxics this table added and enable every disabled link proxy. */
  async heal(): Promise<void> {
    for (const [key, { proxy, names }] of this.added) {
      for (const name of names) {
        try {
          const t = await withTimeout(proxy.getToxic(name), 5000, `GET toxic ${name}`);
          await retry(`remove toxic ${name}`, () => t.remove());
        } catch (err) {
          if (toxiproxyStatus(err) !== 404) throw err;
        }
      }
      this.added.delete(key);
    }
    for (const l of await this.list()) {
      const p = l.proxy;
      if (!p.enabled) await retry(`enable ${p.name}`, () => p.update({ enabled: true, listen: p.listen, upstream: p.upstream }));
    }
  }

  /**
   * Bytes each link's proxy has passed on so far, by direction ("from->to" → counts), read from
   * each API's /metrics (this project's proxy always serves it; a real Toxiproxy only with
   * -proxy-metrics). Undefined when some API serves none: then nothing can be said.
   */
  async bytesByLink(): Promise<Map<string, { upstream: number; downstream: number }> | undefined> {
    const texts = new Map<string, string>();
    for (const url of this.apis.keys()) {
      try {
        texts.set(url, await getText(`${url}/metrics`, 5000));
      } catch {
        return undefined;
      }
    }
    const out = new Map<string, { upstream: number; downstream: number }>();
    for (const l of await this.list()) {
      const text = texts.get(toxiproxyUrl(this.nodes.find((n) => n.nodeId === l.from)!.toxiproxy)) ?? "";
      const sent = (direction: string) => sumSamples(text, SENT_BYTES_METRIC, { proxy: l.proxy.name, direction });
      const prev = out.get(`${l.from}->${l.to}`) ?? { upstream: 0, downstream: 0 };
      out.set(`${l.from}->${l.to}`, { upstream: prev.upstream + sent("upstream"), downstream: prev.downstream + sent("downstream") });
    }
    return out;
  }
}

/**
 * Links whose proxy passed nothing in some direction between two bytesByLink readings: traffic
 * between those nodes did not go through their proxies, so no fault reached it.
 */
export function silentLinks(before: ReadonlyMap<string, { upstream: number; downstream: number }>, after: ReadonlyMap<string, { upstream: number; downstream: number }>): string[] {
  const out: string[] = [];
  for (const [link, a] of after) {
    const b = before.get(link) ?? { upstream: 0, downstream: 0 };
    if (a.upstream - b.upstream <= 0 || a.downstream - b.downstream <= 0) out.push(link);
  }
  return out.sort();
}
