// The set of proxies behind the API, and every operation the API offers on it, with Toxiproxy's
// validation order and errors. Request bodies arrive as a thunk so that, as upstream, a missing
// proxy (404) is reported before a malformed body (400).

import {
  ApiError,
  ErrBadRequestBody,
  ErrMissingField,
  ErrProxyAlreadyExists,
  ErrProxyNotFound,
  ErrToxicNotFound,
} from "./api-error.js";
import type { LinkClock } from "./stage.js";
import { TcpProxy, type ProxySettings } from "./tcp-proxy.js";
import { applyToxicUpdate, parseNewToxic, type ToxicSpec } from "./toxic-spec.js";

/** Reads the request body as JSON; throws ApiError 400 ("bad request body: ...") when it is not. */
export type JsonBody = () => unknown;

interface ProxyInput {
  name: string;
  listen: string;
  upstream: string;
  enabled: boolean | undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function readProxyInput(raw: unknown, defaults: ProxyInput): ProxyInput {
  if (raw === null) return { ...defaults };
  if (!isObject(raw)) throw ErrBadRequestBody.withDetail("expected a JSON object");
  const text = (key: "name" | "listen" | "upstream"): string => {
    const value = raw[key];
    if (value === undefined || value === null) return defaults[key];
    if (typeof value !== "string") throw ErrBadRequestBody.withDetail(`field ${key} must be a string`);
    return value;
  };
  const enabledRaw = raw.enabled;
  if (enabledRaw !== undefined && enabledRaw !== null && typeof enabledRaw !== "boolean") {
    throw ErrBadRequestBody.withDetail("field enabled must be a boolean");
  }
  return {
    name: text("name"),
    listen: text("listen"),
    upstream: text("upstream"),
    enabled: typeof enabledRaw === "boolean" ? enabledRaw : defaults.enabled,
  };
}

const EMPTY_INPUT: ProxyInput = { name: "", listen: "", upstream: "", enabled: undefined };

export interface PopulateResult {
  proxies: TcpProxy[];
  /** Set when populating stopped part way (the proxies before it stay created). */
  error?: ApiError;
}

export class ProxyCollection {
  private readonly proxies = new Map<string, TcpProxy>();
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly clock: LinkClock) {}

  /** Runs API operations one at a time, in arrival order, as Toxiproxy's locks do. */
  serialize<T>(operation: () => Promise<T> | T): Promise<T> {
    const run = this.tail.then(operation, operation);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Proxies sorted by name (Go marshals map keys in sorted order). */
  list(): TcpProxy[] {
    return [...this.proxies.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get(name: string): TcpProxy {
    const proxy = this.proxies.get(name);
    if (!proxy) throw ErrProxyNotFound;
    return proxy;
  }

  async create(body: JsonBody): Promise<TcpProxy> {
    const input = readProxyInput(body(), { ...EMPTY_INPUT, enabled: true });
    if (input.name === "") throw ErrMissingField.withDetail("name");
    if (input.upstream === "") throw ErrMissingField.withDetail("upstream");
    if (this.proxies.has(input.name)) throw ErrProxyAlreadyExists;
    const proxy = new TcpProxy(input.name, input.listen, input.upstream, this.clock);
    if (input.enabled !== false) await proxy.start();
    this.proxies.set(proxy.name, proxy);
    return proxy;
  }

  /**
   * Creates or replaces many proxies. All entries are checked before any is created. An existing
   * proxy with the same listen and upstream is kept as it is; one that differs is replaced.
   */
  async populate(body: JsonBody): Promise<PopulateResult> {
    const raw = body();
    if (raw !== null && !Array.isArray(raw)) throw ErrBadRequestBody.withDetail("expected a JSON array");
    const inputs = (raw ?? []).map((entry: unknown, i: number) => {
      const input = readProxyInput(entry, EMPTY_INPUT);
      if (input.name === "") throw ErrMissingField.withDetail(`name at proxy ${i + 1}`);
      if (input.upstream === "") throw ErrMissingField.withDetail(`upstream at proxy ${i + 1}`);
      return input;
    });
    const proxies: TcpProxy[] = [];
    for (const input of inputs) {
      try {
        proxies.push(await this.addOrReplace(input));
      } catch (error) {
        if (error instanceof ApiError) return { proxies, error };
        throw error;
      }
    }
    return { proxies };
  }

  async update(name: string, body: JsonBody): Promise<TcpProxy> {
    const proxy = this.get(name);
    const current: ProxyInput = {
      name: proxy.name,
      listen: proxy.listen,
      upstream: proxy.upstream,
      enabled: proxy.enabled,
    };
    const input = readProxyInput(body(), current);
    const settings: ProxySettings = {
      listen: input.listen,
      upstream: input.upstream,
      enabled: input.enabled ?? proxy.enabled,
    };
    await proxy.update(settings);
    return proxy;
  }

  async remove(name: string): Promise<void> {
    const proxy = this.get(name);
    await proxy.stop();
    this.proxies.delete(name);
  }

  /** Enables every proxy and removes every toxic. */
  async reset(): Promise<void> {
    for (const proxy of this.list()) {
      await proxy.start();
      proxy.removeAllToxics();
    }
  }

  /** Stops every proxy and forgets them (server shutdown). */
  async clear(): Promise<void> {
    const all = [...this.proxies.values()];
    this.proxies.clear();
    await Promise.all(all.map((p) => p.stop()));
  }

  listToxics(proxyName: string): ToxicSpec[] {
    return this.get(proxyName).listToxics();
  }

  addToxic(proxyName: string, body: JsonBody): ToxicSpec {
    const proxy = this.get(proxyName);
    const spec = parseNewToxic(body(), (name) => proxy.getToxic(name) !== undefined);
    proxy.addToxic(spec);
    return spec;
  }

  getToxic(proxyName: string, toxicName: string): ToxicSpec {
    const toxic = this.get(proxyName).getToxic(toxicName);
    if (!toxic) throw ErrToxicNotFound;
    return toxic;
  }

  updateToxic(proxyName: string, toxicName: string, body: JsonBody): ToxicSpec {
    const proxy = this.get(proxyName);
    const existing = proxy.getToxic(toxicName);
    if (!existing) throw ErrToxicNotFound;
    const spec = applyToxicUpdate(existing, body());
    proxy.updateToxic(spec);
    return spec;
  }

  removeToxic(proxyName: string, toxicName: string): void {
    this.get(proxyName).removeToxic(toxicName);
  }

  private async addOrReplace(input: ProxyInput): Promise<TcpProxy> {
    const existing = this.proxies.get(input.name);
    if (existing) {
      if (!existing.differs(input.listen, input.upstream)) return existing;
      await existing.stop();
    }
    const proxy = new TcpProxy(input.name, input.listen, input.upstream, this.clock);
    if (input.enabled !== false) await proxy.start();
    this.proxies.set(proxy.name, proxy);
    return proxy;
  }
}
