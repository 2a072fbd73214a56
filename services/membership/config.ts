// Membership protocol settings, their defaults, and the formulas that scale timeouts with the
// cluster size. The defaults follow memberlist's LAN profile (probe 1 s, timeout 500 ms, 3 indirect
// checks, suspicion multiplier 4, retransmit multiplier 4), see shared/notes/anchors.md section 5.

/** Every timing of the protocol. All durations are milliseconds. */
export interface MembershipConfig {
  /** Period between two probes started by this node. */
  probeIntervalMs: number;
  /** How long a direct ping may take before indirect probes are sent. */
  probeTimeoutMs: number;
  /** How many other members are asked to probe the target when the direct ping fails (k). */
  indirectChecks: number;
  /**
   * How long the prober waits for indirect answers. Each helper is told to wait for the target
   * for 80% of this, so that its negative answer arrives before the prober gives up.
   */
  indirectTimeoutMs: number;
  /** Suspicion timeout = suspicionMult * max(1, log10(n + 1)) * probeIntervalMs. */
  suspicionMult: number;
  /** A piggybacked update is sent at most retransmitMult * ceil(log10(n + 1)) times by each node. */
  retransmitMult: number;
  /** Most updates piggybacked on one message. */
  maxPiggyback: number;
  /** DEAD and LEFT members are forgotten (reaped) this long after their state changed. */
  reapAfterMs: number;
  /** Period of the full-view pull from a random member (repairs missed updates); 0 disables. */
  pushPullIntervalMs: number;
  /** Deadline of Join and Leave calls and of push/pull. */
  requestTimeoutMs: number;
  /** How many live members a leaving node tells directly. */
  leaveFanout: number;
  /**
   * Largest number of updates or members accepted in one inbound message; it also bounds the view a
   * Join reply can carry, so it must exceed the cluster size.
   */
  maxUpdatesPerMessage: number;
}

export const DEFAULT_MEMBERSHIP_CONFIG: Readonly<MembershipConfig> = Object.freeze({
  probeIntervalMs: 1000,
  probeTimeoutMs: 500,
  indirectChecks: 3,
  indirectTimeoutMs: 500,
  suspicionMult: 4,
  retransmitMult: 4,
  maxPiggyback: 32,
  reapAfterMs: 30_000,
  pushPullIntervalMs: 10_000,
  requestTimeoutMs: 3000,
  leaveFanout: 5,
  maxUpdatesPerMessage: 16_384,
});

/** Defaults overlaid with the given fields; throws RangeError on a value that cannot work. */
export function resolveConfig(partial: Partial<MembershipConfig> = {}): MembershipConfig {
  const config: MembershipConfig = { ...DEFAULT_MEMBERSHIP_CONFIG };
  for (const [key, value] of Object.entries(partial)) {
    if (value === undefined) continue;
    if (!(key in DEFAULT_MEMBERSHIP_CONFIG)) throw new RangeError(`unknown membership setting ${key}`);
    (config as unknown as Record<string, number>)[key] = value as number;
  }
  const positive: (keyof MembershipConfig)[] = [
    "probeIntervalMs", "probeTimeoutMs", "indirectTimeoutMs", "suspicionMult", "retransmitMult",
    "maxPiggyback", "requestTimeoutMs", "maxUpdatesPerMessage",
  ];
  for (const key of positive) {
    if (!Number.isFinite(config[key]) || config[key] <= 0) {
      throw new RangeError(`membership setting ${key} must be a positive number, got ${config[key]}`);
    }
  }
  const nonNegative: (keyof MembershipConfig)[] = ["indirectChecks", "reapAfterMs", "pushPullIntervalMs", "leaveFanout"];
  for (const key of nonNegative) {
    if (!Number.isFinite(config[key]) || config[key] < 0) {
      throw new RangeError(`membership setting ${key} must be zero or more, got ${config[key]}`);
    }
  }
  return config;
}

/** Cluster-size factor of the suspicion timeout: max(1, log10(n + 1)). */
export function sizeScale(n: number): number {
  return Math.max(1, Math.log10(Math.max(n, 1) + 1));
}

/** How long a member stays SUSPECT before it is declared DEAD, for a view of n live members. */
export function suspicionTimeoutMs(config: MembershipConfig, n: number): number {
  return Math.round(config.suspicionMult * sizeScale(n) * config.probeIntervalMs);
}

/** How many times each node piggybacks one update, for a view of n live members. */
export function retransmitLimit(config: MembershipConfig, n: number): number {
  return config.retransmitMult * Math.max(1, Math.ceil(Math.log10(Math.max(n, 1) + 1)));
}

/** Time from the start of a probe until the prober gives up on the target. */
export function probeDurationMs(config: MembershipConfig): number {
  return config.probeTimeoutMs + (config.indirectChecks > 0 ? config.indirectTimeoutMs : 0);
}

/**
 * Worst case from a silent stop until some member suspects it, when no message is lost: with
 * round-robin probing, a prober reaches any member within 2(n - 1) - 1 probe intervals (end of one
 * shuffled round, end of the next), and the probe then fails after probeDurationMs.
 */
export function detectionBoundMs(config: MembershipConfig, n: number): number {
  const others = Math.max(1, n - 1);
  return (2 * others) * config.probeIntervalMs + probeDurationMs(config);
}

/** Worst case, without loss, until the first member declares a silent node DEAD. */
export function deathBoundMs(config: MembershipConfig, n: number): number {
  return detectionBoundMs(config, n) + suspicionTimeoutMs(config, n);
}
