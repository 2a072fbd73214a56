// A sync mode as environment variables of the node (DELTASET_GOSSIP_ALGORITHM=alg2 ...), for
// deployments that set node settings through the environment (the kind runner sets them on the
// StatefulSet). Derived from the settings table, so a flag and its variable never disagree.
import { SETTINGS } from "../../node/settings.js";
import { MODE_FLAGS, type SyncMode } from "./grid.js";

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
