// Settings a node refuses at start, from outside (real `deltaset node` processes): a size or time
// spelled otherwise than in decimal digits, a period short enough to keep it busy, mutual TLS
// without a CA and a CA file holding no certificate each stop it with one line naming the setting
// (exit 2 for a bad setting, 1 for an unusable file, as the other TLS checks), and nothing starts.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { makeCa } from "../helpers/certs.ts";
import { runCli } from "../helpers/node-process.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-start-refusals-"));
after(() => rmSync(root, { recursive: true, force: true }));

/** Start a node that must not start (killed after 20 s if it does); its exit code and its `deltaset node:` lines. */
async function refusedStart(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; lines: string[]; stderr: string }> {
  const r = await runCli(["node", "--listen", "127.0.21.1:0", "--data-dir", join(root, `d${Math.random().toString(36).slice(2)}`), ...args], env, 20_000);
  return { code: r.code, lines: r.stderr.split("\n").filter((l) => l.startsWith("deltaset node:")), stderr: r.stderr };
}

describe("start-up refusals", () => {
  it("a size or time not in decimal digits, from a flag or the environment, exits 2 naming the setting", async () => {
    for (const [args, env, pattern] of [
      [["--partitions", "1e3"], {}, /--partitions: "1e3" is not a non-negative integer/],
      [["--partitions", "0x40"], {}, /--partitions: "0x40" is not a non-negative integer/],
      [[], { DELTASET_PARTITIONS: " 12 " }, /DELTASET_PARTITIONS: " 12 " is not a non-negative integer/],
      [["--gossip-interval-ms", "1e2"], {}, /--gossip-interval-ms: "1e2" is not a non-negative integer/],
    ] as const) {
      const r = await refusedStart([...args], env);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.lines.length, 1, r.stderr);
      assert.match(r.lines[0]!, pattern);
    }
  });

  it("--gossip-interval-ms 0 exits 2: an idle node would spin", async () => {
    const r = await refusedStart(["--gossip-interval-ms", "0"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.lines[0] ?? "", /gossip\.intervalMs \(--gossip-interval-ms\) must be an integer of at least 10 \(ms\)/);
  });

  it("mutual TLS without a CA, and a CA file holding only a key, stop start-up with one line", async () => {
    const ca = makeCa(root, "ca");
    const node = ca.issue("n1", ["127.0.21.1"]);
    const mutual = await refusedStart(["--tls-cert", node.cert, "--tls-key", node.key, "--tls-mutual", "true"]);
    assert.equal(mutual.code, 2, mutual.stderr);
    assert.match(mutual.lines[0] ?? "", /tls\.mutual \(--tls-mutual\) needs tls\.ca \(--tls-ca\)/);
    const keyAsCa = await refusedStart(["--tls-cert", node.cert, "--tls-key", node.key, "--tls-ca", node.key]);
    assert.equal(keyAsCa.code, 1, keyAsCa.stderr);
    assert.equal(keyAsCa.lines.length, 1, keyAsCa.stderr);
    assert.match(keyAsCa.lines[0]!, /tls\.ca .*n1\.key holds no certificate/);
    assert.doesNotMatch(keyAsCa.stderr, /^\s+at /m, "no stack trace");
  });
});
