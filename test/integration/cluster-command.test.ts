// `deltaset cluster` from outside: --help prints its flags and starts nothing; any flag it does not
// know goes to every node with its value; a node that fails to start makes the command exit 1.
import { strict as assert } from "node:assert";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { splitClusterArgs } from "../../services/cli/cluster-command.ts";
import { runCli } from "../helpers/node-process.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-cluster-cmd-"));
after(() => rmSync(root, { recursive: true, force: true }));

describe("deltaset cluster", () => {
  it("--help and -h print the flags and start no node", async () => {
    for (const flag of ["--help", "-h"]) {
      const dir = join(root, `help${flag}`);
      const r = await runCli(["cluster", flag, "--dir", dir]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^usage: deltaset cluster /);
      for (const f of ["--nodes", "--port", "--dir", "--first-host", "--chaos", "--toxiproxy"]) assert.ok(r.stdout.includes(f), f);
      assert.equal(existsSync(dir), false, "nothing was started or written");
    }
  });

  it("exits 1 when a node does not start, naming it and its log", async () => {
    const dir = join(root, "bad");
    const r = await runCli(["cluster", "--nodes", "2", "--first-host", "141", "--port", "7941", "--dir", dir, "--max-message-bytes", "lots"]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const failed = /node (n\d) exited with 2; its log: (\S+)/.exec(r.stderr);
    assert.ok(failed, r.stderr);
    assert.equal(failed[2], join(dir, `${failed[1]}.log`));
    // The log named is complete when the command exits: it says why the node stopped.
    assert.match(readFileSync(failed[2]!, "utf8"), /--max-message-bytes/);
  });

  it("takes its own flags in both forms and passes every other flag, with its value, to the nodes", () => {
    assert.deepEqual(splitClusterArgs(["--nodes", "5", "--replication-factor", "2", "--dir=/d", "--chaos", "--gossip-interval-ms=100", "-h"]), {
      values: { nodes: "5", dir: "/d", chaos: true, help: true },
      forwarded: ["--replication-factor", "2", "--gossip-interval-ms=100"],
    });
    // After --, everything is the nodes', its own flag names included.
    assert.deepEqual(splitClusterArgs(["--port", "7000", "--", "--nodes", "x"]), { values: { port: "7000" }, forwarded: ["--nodes", "x"] });
    assert.deepEqual(splitClusterArgs(["--chaos=false"]).values, { chaos: false });
    assert.throws(() => splitClusterArgs(["--nodes"]), /--nodes needs a value/);
    assert.throws(() => splitClusterArgs(["--chaos=maybe"]), /--chaos is true or false/);
  });
});
