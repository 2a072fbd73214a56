// The tables every call passes through do not make V8 promote what they held. A long-lived Map
// that takes a new key and drops an old one per call does, once a full collection has run: the
// backing stores it leaves in the old generation keep what they held alive through
// young-generation collections (common/key-table.ts). Each table runs in its own process (test/fixtures/churn-gc.ts) with V8's
// collection trace; the plain Map is the control that shows the churn reproduces the effect.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, it } from "node:test";
import { REPO } from "../helpers/node-process.ts";

/** KiB promoted by the scavenges after the forced full collection, and how many there were. */
async function promotedAfterFullCollection(table: string): Promise<{ kib: number; scavenges: number }> {
  const child = spawn(process.execPath, ["--expose-gc", "--trace-gc-nvp", "--import", "./bin/register-ts.mjs", "test/fixtures/churn-gc.ts", table], { cwd: REPO, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const [code] = await once(child, "exit");
  assert.equal(code, 0, `churn-gc ${table} exited ${code}`);
  const lines = out.split("\n");
  const marker = lines.indexOf("forced-full-collection");
  assert.ok(marker >= 0 && lines.includes("done"), `churn-gc ${table} did not run through:\n${out.slice(-500)}`);
  const scavenges = lines.slice(marker + 1).filter((l) => / gc=s /.test(l));
  const bytes = scavenges.reduce((sum, l) => sum + Number(/ promoted=(\d+)/.exec(l)?.[1] ?? NaN), 0);
  assert.ok(Number.isFinite(bytes), `unparsed trace lines for ${table}`);
  return { kib: bytes / 1024, scavenges: scavenges.length };
}

describe("tables turned over per call, and functions bound per call, after a full collection", () => {
  it("promote next to nothing, where a Map taking a new key per call promotes what passes through it", async () => {
    const tables = ["map", "key-table", "identity-set", "active-calls", "write-overlay", "key-lock", "async-resource-bind"];
    const results = await Promise.all(tables.map(promotedAfterFullCollection));
    const by = Object.fromEntries(tables.map((t, i) => [t, results[i]!]));
    const summary = JSON.stringify(by);
    for (const t of tables) assert.ok(by[t].scavenges >= 5, `too few scavenges to judge ${t}: ${summary}`);
    // The control: megabytes (on the order of everything the churn allocated after the collection).
    assert.ok(by.map.kib > 20_000, `the Map control promoted only ${by.map.kib.toFixed(0)} KiB: ${summary}`);
    for (const t of tables.slice(1)) assert.ok(by[t].kib < 1024, `${t} promoted ${by[t].kib.toFixed(0)} KiB after the full collection: ${summary}`);
  });
});
