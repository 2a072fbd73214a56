// Secret files readable by every user of the host are warned about, at start and after a reload:
// the check the node runs (NodeCredentials) on a tokens file and a cluster key file with real
// permission bits. Group-readable files (Kubernetes Secrets with defaultMode 0440) are fine.
import { strict as assert } from "node:assert";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createLogger } from "../../services/common/logger.ts";
import { generateClusterKey } from "../../services/node/cluster-keys.ts";
import { DEFAULT_CONFIG, type NodeConfig } from "../../services/node/config.ts";
import { NodeCredentials } from "../../services/node/credential-reload.ts";
import { worldReadable } from "../../services/node/secret-files.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-secret-files-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string, mode: number): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  chmodSync(p, mode); // explicit: writeFileSync's mode is masked by the umask
  return p;
}

describe("secret files", () => {
  it("names the files every user may read, with their mode, and skips private, group-readable and missing ones", () => {
    const open = file("open.key", "x", 0o644);
    const found = worldReadable([
      { what: "a", path: open },
      { what: "b", path: file("private.key", "x", 0o600) },
      { what: "c", path: file("group.key", "x", 0o440) },
      { what: "d", path: join(dir, "missing") },
      { what: "e", path: undefined },
    ]);
    assert.deepEqual(found, [{ what: "a", path: open, mode: "644" }]);
  });

  it("the node's credentials warn at start and after a reload while a file stays open, and stop once it is not", () => {
    const tokens = file("tokens", "some-client-token-1234\n", 0o644);
    const key = file("cluster.key", `${generateClusterKey()}\n`, 0o604);
    const lines: string[] = [];
    const creds = new NodeCredentials({ ...structuredClone(DEFAULT_CONFIG), authTokensFile: tokens, clusterKeyFile: key } as NodeConfig, createLogger("error"));
    const log = createLogger("info", {}, (l) => lines.push(l));
    const warnings = () => lines.filter((l) => /"level":"warn".*readable by every user/.test(l));
    creds.useLogger(log);
    assert.equal(warnings().length, 2);
    assert.ok(warnings().some((l) => l.includes("auth tokens file") && l.includes('"mode":"644"')));
    assert.ok(warnings().some((l) => l.includes("cluster key file") && l.includes('"mode":"604"')));
    assert.ok(!lines.join("\n").includes("some-client-token-1234"), "a secret reached the log");
    chmodSync(tokens, 0o600);
    lines.length = 0;
    creds.reload("test");
    assert.deepEqual(warnings().map((l) => JSON.parse(l).path), [key]);
    chmodSync(key, 0o440);
    lines.length = 0;
    creds.reload("test");
    assert.equal(warnings().length, 0);
  });
});
