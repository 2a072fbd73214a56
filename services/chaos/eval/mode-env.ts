// A sync mode as environment variables of the node (DELTASET_GOSSIP_ALGORITHM=alg2 ...), for
// deployments that set node settings through the environment (the kind runner sets them on the
// StatefulSet). Derived from the settings table, so a flag and its variable never disagree.
import { SETTINGS } from "../../node/settings.js";
import { type LatencyLevel, MODE_FLAGS, type SyncMode, membershipTiming } from "./grid.js";

export function modeEnv(mode: SyncMode): Record<string, string> {
  const flags = MODE_FLAGS[mode];
  const out: Record<string, string> = {};
  for (let i = 0; i < flags.length; i += 2) {
    const flag = flags[i]!.replace(/^--/, "");
    const setting = SETTINGS.find((s) => s.flag === flag);
    if (setting === undefined) throw new Error(`mode ${mode}: no node setting has the flag --${flag}`);
    out[setting.env] = flags[i + 1]!;
  }
  return out;
}

/** Membership probe timing for links of this latency (grid.ts membershipTiming), as node environment. */
export function membershipEnv(latency: Pick<LatencyLevel, "latencyMs" | "jitterMs">): Record<string, string> {
  const m = membershipTiming(latency);
  const env = (flag: string) => SETTINGS.find((s) => s.flag === flag)!.env;
  return { [env("probe-timeout-ms")]: String(m.probeTimeoutMs), [env("probe-interval-ms")]: String(m.probeIntervalMs) };
}
