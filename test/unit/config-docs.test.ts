// The configuration tables (services/node/settings.ts) are the one source of `deltaset node --help`,
// docs/configuration.md and the README's table: this fails when either file drifts from them (run
// npm run gen:config), when a setting lacks a description, or when a setting has no row.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_MEMBERSHIP_CONFIG } from "../../services/membership/config.ts";
import { configurationDoc, withReadmeTable } from "../../services/node/config-docs.ts";
import { DEFAULT_CONFIG, configFlags } from "../../services/node/config.ts";
import { CONFIG_FILE_SETTING, SETTINGS, SETTING_GROUPS } from "../../services/node/settings.ts";
import { REPO, runCli } from "../helpers/node-process.ts";

const FIX = "run `npm run gen:config` to regenerate it";

/** Dotted paths of every value in an object (arrays and empty objects are values). */
function leaves(obj: Record<string, unknown>, prefix = ""): string[] {
  return Object.entries(obj).flatMap(([k, v]) =>
    v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0
      ? leaves(v as Record<string, unknown>, `${prefix}${k}.`)
      : [`${prefix}${k}`],
  );
}

describe("configuration documentation", () => {
  it("docs/configuration.md is what the tables generate", () => {
    assert.equal(readFileSync(join(REPO, "docs/configuration.md"), "utf8"), configurationDoc(), `docs/configuration.md is stale: ${FIX}`);
  });

  it("the README's configuration table is what the tables generate", () => {
    const readme = readFileSync(join(REPO, "README.md"), "utf8");
    assert.equal(readme, withReadmeTable(readme), `README.md's configuration table is stale: ${FIX}`);
  });

  it("every setting has a description, a DELTASET_ variable and a unique flag, variable and path", () => {
    const all = [CONFIG_FILE_SETTING, ...SETTINGS];
    for (const s of all) {
      assert.ok(s.description.trim().length > 10, `--${s.flag} has no description`);
      assert.match(s.env, /^DELTASET_[A-Z0-9_]+$/, `--${s.flag}`);
      assert.doesNotMatch(s.description, /\n/, `--${s.flag}: one line`);
    }
    const flags = all.flatMap((s) => [s.flag, ...(s.aliases?.flags ?? [])]);
    const envs = all.flatMap((s) => [s.env, ...(s.aliases?.envs ?? [])]);
    assert.equal(new Set(flags).size, flags.length, "a flag is declared twice");
    assert.equal(new Set(envs).size, envs.length, "an environment variable is declared twice");
    assert.equal(new Set(SETTINGS.map((s) => s.path)).size, SETTINGS.length, "a path is declared twice");
    for (const g of SETTING_GROUPS) assert.ok(g.about.length > 0 && g.settings.length > 0, g.name);
  });

  it("every value of DEFAULT_CONFIG is a setting, and every setting a place in NodeConfig", () => {
    const paths = new Set(SETTINGS.map((s) => s.path));
    for (const leaf of leaves(DEFAULT_CONFIG as unknown as Record<string, unknown>)) {
      if (leaf === "tls") continue; // optional fields only: tls.cert, tls.key, tls.ca, tls.mutual
      assert.ok(paths.has(leaf), `DEFAULT_CONFIG.${leaf} has no row in services/node/settings.ts`);
    }
    for (const s of SETTINGS) {
      const parent = s.path.split(".").slice(0, -1).reduce<unknown>((o, k) => (o as Record<string, unknown>)?.[k], DEFAULT_CONFIG);
      assert.ok(parent !== null && typeof parent === "object", `${s.path} is not in NodeConfig`);
    }
  });

  it("every setting of the membership core is settable, under the core's own name", () => {
    const paths = new Set(SETTINGS.map((s) => s.path));
    for (const key of Object.keys(DEFAULT_MEMBERSHIP_CONFIG)) assert.ok(paths.has(`membership.${key}`), `membership.${key} cannot be set`);
    assert.deepEqual(DEFAULT_CONFIG.membership, DEFAULT_MEMBERSHIP_CONFIG);
  });

  it("`deltaset node --help` and `-h` exit 0 and list every flag with its variable", async () => {
    for (const arg of ["--help", "-h"]) {
      const { code, stdout, stderr } = await runCli(["node", arg]);
      assert.equal(code, 0, stderr);
      for (const s of [CONFIG_FILE_SETTING, ...SETTINGS]) {
        assert.match(stdout, new RegExp(`^  --${s.flag}\\b`, "m"), `--${s.flag} missing from --help`);
        assert.ok(stdout.includes(s.env), `${s.env} missing from --help`);
      }
      for (const flag of Object.keys(configFlags())) assert.ok(stdout.includes(`--${flag}`), `--${flag} missing from --help`);
    }
  });
});
