// Where a node finds members to join through, and the loop that keeps trying until it is in a
// cluster. Seeds come from a static list, or from a DNS name resolved again every refreshMs (a
// Kubernetes headless Service answers with the addresses of the ready pods). The loop retries with
// capped exponential backoff and jitter until joined, and starts again whenever the node finds
// itself alone, so a cluster re-forms after every node restarted at once.
import { promises as dns } from "node:dns";
import { sample } from "../common/prng.js";
import { isValidAddress } from "./validate.js";

/** Addresses (host:port) to join through. */
export type SeedProvider = () => Promise<string[]>;

/** A fixed list of seed addresses. Throws RangeError on a malformed one. */
export function staticSeeds(addresses: readonly string[]): SeedProvider {
  for (const address of addresses) {
    if (!isValidAddress(address)) throw new RangeError(`seed address must be host:port, got ${JSON.stringify(address)}`);
  }
  const list = [...new Set(addresses)];
  return async () => list.slice();
}

/** One answer of a DNS lookup, as node's dns.promises.lookup(name, { all: true }) gives it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

export type Resolver = (name: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo, so /etc/hosts and the cluster DNS both work). */
export const systemResolver: Resolver = (name) => dns.lookup(name, { all: true, verbatim: true });

export interface DnsSeedOptions {
  /** The name to resolve, e.g. deltaset-headless.default.svc.cluster.local. */
  name: string;
  /** The gRPC port every node listens on. */
  port: number;
  resolve?: Resolver;
  /** Reuse an answer for this long. */
  refreshMs?: number;
  /** Clock for the cache (injected in tests). */
  now?: () => number;
}

/** host:port, with brackets around an IPv6 host. */
export function formatAddress(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Seeds from a DNS name, re-resolved at most every refreshMs. When a lookup fails the last good
 * answer is used; with none, the error propagates (the join loop backs off and retries).
 */
export function dnsSeeds(options: DnsSeedOptions): SeedProvider {
  const resolve = options.resolve ?? systemResolver;
  const refreshMs = options.refreshMs ?? 5000;
  const now = options.now ?? Date.now;
  if (!Number.isInteger(options.port) || options.port <= 0 || options.port > 65535) {
    throw new RangeError(`seed port must be 1..65535, got ${options.port}`);
  }
  let cached: string[] | undefined;
  let cachedAt = -Infinity;
  return async () => {
    if (cached && now() - cachedAt < refreshMs) return cached.slice();
    try {
      const answers = await resolve(options.name);
      const addresses = [...new Set(answers.map((a) => formatAddress(a.address, options.port)))].filter(isValidAddress).sort();
      cached = addresses;
      cachedAt = now();
      return addresses.slice();
    } catch (error) {
      if (cached) return cached.slice();
      throw error;
    }
  };
}

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  /** Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]. */
  jitter: number;
}

export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = Object.freeze({ initialMs: 500, maxMs: 30_000, multiplier: 2, jitter: 0.2 });

/** Delay before retry number `attempt` (0 = first retry). */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number): number {
  const base = Math.min(options.maxMs, options.initialMs * options.multiplier ** Math.max(0, attempt));
  const factor = 1 - options.jitter + 2 * options.jitter * random();
  return Math.max(0, Math.round(base * factor));
}

export interface SeedJoinerOptions {
  seeds: SeedProvider;
  /** This node's own address, never used as a seed. */
  self: string;
  /** Try to join through these addresses; resolves true when the node is in a cluster. */
  attempt: (addresses: string[]) => Promise<boolean>;
  /** True while the node should (re)join: not joined yet, or alone in its view. */
  needsJoin: () => boolean;
  /** Sleep that ends early when the signal aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  random?: () => number;
  backoff?: Partial<BackoffOptions>;
  /** While joined, how often to check whether the node became alone. */
  recheckMs?: number;
  /** Seeds tried per attempt, chosen at random (a DNS answer may list the whole cluster). */
  fanout?: number;
  /**
   * While joined: the seed addresses that are not live members of this node's view. Every
   * reconcileMs the loop joins through some of them, so that two sides of a healed network
   * partition (each of which declared the other dead) find each other again.
   */
  notLive?: (seeds: string[]) => string[];
  reconcileMs?: number;
  now?: () => number;
  onError?: (message: string, error?: unknown) => void;
  /**
   * Joins through seeds have failed this many times in a row (the 3rd, then every 10th): no seed
   * answers, and the node serves alone meanwhile. A misspelled seed list is otherwise silent.
   */
  onStillAlone?: (failures: number, tried: string[]) => void;
}

/** The join loop. start() runs it in the background; stop() ends it. */
export class SeedJoiner {
  private readonly options: SeedJoinerOptions;
  private readonly backoff: BackoffOptions;
  private controller: AbortController | undefined;
  private loop: Promise<void> | undefined;
  /** Join attempts made so far (for tests and metrics). */
  attempts = 0;
  private settleFirst: () => void = () => {};
  /** Settles once the first join attempt has ended, joined or not (or there was none to make), or on stop. */
  readonly firstAttempt = new Promise<void>((resolve) => (this.settleFirst = resolve));

  constructor(options: SeedJoinerOptions) {
    this.options = options;
    this.backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
  }

  start(): void {
    if (this.loop) return;
    this.controller = new AbortController();
    this.loop = this.run(this.controller.signal);
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    await this.loop;
    this.loop = undefined;
    this.settleFirst();
  }

  /** Join through seeds that are not live members (partition healing); failures are only logged. */
  private async reconcile(random: () => number, signal: AbortSignal): Promise<void> {
    try {
      const candidates = (await this.options.seeds()).filter((a) => a !== this.options.self);
      const missing = this.options.notLive!(candidates);
      if (missing.length === 0 || signal.aborted) return;
      this.attempts++;
      await this.options.attempt(sample(missing, this.options.fanout ?? 3, random));
    } catch (error) {
      this.options.onError?.("reconciling through seeds failed", error);
    }
  }

  private async run(signal: AbortSignal): Promise<void> {
    const sleep = this.options.sleep ?? abortableSleep;
    const random = this.options.random ?? Math.random;
    let failures = 0;
    const now = this.options.now ?? Date.now;
    let lastReconcile = now();
    while (!signal.aborted) {
      if (!this.options.needsJoin()) {
        this.settleFirst();
        failures = 0;
        await sleep(this.options.recheckMs ?? 5000, signal);
        if (this.options.notLive !== undefined && now() - lastReconcile >= (this.options.reconcileMs ?? 15_000)) {
          lastReconcile = now();
          await this.reconcile(random, signal);
        }
        continue;
      }
      let joined = false;
      try {
        const candidates = (await this.options.seeds()).filter((a) => a !== this.options.self);
        const addresses = sample(candidates, this.options.fanout ?? 3, random);
        if (signal.aborted) return;
        if (addresses.length === 0) {
          this.options.onError?.("no seed addresses other than this node");
        } else {
          this.attempts++;
          joined = await this.options.attempt(addresses);
          if (!joined) {
            this.options.onError?.(`join through ${addresses.join(", ")} failed`);
            const inRow = failures + 1;
            if (inRow === 3 || (inRow > 3 && (inRow - 3) % 10 === 0)) this.options.onStillAlone?.(inRow, addresses);
          }
        }
      } catch (error) {
        this.options.onError?.("seed lookup failed", error);
      }
      this.settleFirst();
      if (joined) {
        failures = 0;
        continue;
      }
      await sleep(backoffDelay(failures++, this.backoff, random), signal);
    }
  }
}

/** setTimeout as a promise that resolves early (not rejects) when the signal aborts. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    timer.unref?.();
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
