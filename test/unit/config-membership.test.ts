// Membership and gossip settings reach their subsystems under the subsystems' own names, and the
// older names (--indirect-probes, DELTASET_INDIRECT_PROBES, membership.indirectProbes and
// gossip.maxForwardElements in a file) are still accepted.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { DEFAULT_MEMBERSHIP_CONFIG, resolveConfig } from "../../services/membership/config.ts";
import { ConfigError, loadConfig } from "../../services/node/config.ts";
import { MEMBERSHIP_SETTINGS } from "../../services/node/settings.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-config-membership-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(obj: unknown): string {
  const p = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(p, JSON.stringify(obj));
  return p;
}

describe("membership and gossip settings", () => {
  it("every membership setting is settable by flag and by environment, and reaches the core unchanged", () => {
    for (const s of MEMBERSHIP_SETTINGS.settings) {
      const key = s.path.slice("membership.".length) as keyof typeof DEFAULT_MEMBERSHIP_CONFIG;
      const value = DEFAULT_MEMBERSHIP_CONFIG[key] + 7;
      const byFlag = loadConfig({ [s.flag]: String(value) }, {});
      assert.equal(byFlag.membership[key], value, `--${s.flag}`);
      assert.equal(resolveConfig(byFlag.membership)[key], value, `--${s.flag} in the core`);
      assert.equal(loadConfig({}, { [s.env]: String(value) }).membership[key], value, s.env);
    }
  });

  it("older names of indirectChecks still work", () => {
    assert.equal(loadConfig({ "indirect-probes": "5" }, {}).membership.indirectChecks, 5);
    assert.equal(loadConfig({}, { DELTASET_INDIRECT_PROBES: "6" }).membership.indirectChecks, 6);
    assert.equal(loadConfig({ config: file({ membership: { indirectProbes: 2 } }) }, {}).membership.indirectChecks, 2);
    // The current name wins over the older one.
    assert.equal(loadConfig({ "indirect-checks": "1", "indirect-probes": "5" }, {}).membership.indirectChecks, 1);
    assert.equal(loadConfig({}, { DELTASET_INDIRECT_CHECKS: "1", DELTASET_INDIRECT_PROBES: "6" }).membership.indirectChecks, 1);
  });

  it("gossip.maxForwardElements in a file is the setting of --gossip-max-forward-elements", () => {
    assert.equal(loadConfig({ config: file({ gossip: { maxForwardElements: 7 } }) }, {}).gossip.maxBufferedStateElements, 7);
    assert.equal(loadConfig({ "gossip-max-forward-elements": "8" }, {}).gossip.maxBufferedStateElements, 8);
    assert.equal(loadConfig({}, { DELTASET_GOSSIP_MAX_FORWARD_ELEMENTS: "9" }).gossip.maxBufferedStateElements, 9);
  });

  it("refuses a membership value the core cannot run with, naming it", () => {
    assert.throws(() => loadConfig({ "probe-interval-ms": "0" }, {}), (e: Error) => e instanceof ConfigError && /probeIntervalMs/.test(e.message));
    assert.throws(() => loadConfig({ config: file({ membership: { noSuchThing: 1 } }) }, {}), ConfigError);
  });
});
