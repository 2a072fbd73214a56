// A sync mode as environment variables of the node (DELTASET_GOSSIP_ALGORITHM=alg2 ...), for
// deployments that set node settings through the environment (the kind runner sets them on the
// StatefulSet). Derived from the settings table, so a flag and its variable never disagree.
import { SETTINGS } from "../../node/settings.js";
import { type LatencyLevel, MODE_FLAGS, type SyncMode, membershipFlags } from "./grid.js";

export function modeEnv(mode: SyncMode): Record<string, string> {
  return flagsEnv(MODE_FLAGS[mode], `mode ${mode}`);
}

/** Membership probe timing for links of this latency (grid.ts membershipFlags), as node environment. */
export function membershipEnv(latency: Pick<LatencyLevel, "latencyMs" | "jitterMs">): Record<string, string> {
  return flagsEnv(membershipFlags(latency), "membership timing");
}

/** Node flags (--flag value pairs) as the environment variables of the same settings. */
function flagsEnv(flags: readonly string[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < flags.length; i += 2) {
    const flag = flags[i]!.replace(/^--/, "");
    const setting = SETTINGS.find((s) => s.flag === flag);
    if (setting === undefined) throw new Error(`${what}: no node setting has the flag --${flag}`);
    out[setting.env] = flags[i + 1]!;
  }
  return out;
}
