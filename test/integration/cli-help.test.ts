// `deltaset COMMAND --help` (and -h) for every client command and verify: exit 0, the command's
// usage and its options on stdout, and no call made (the address given would refuse one). A node
// that does not answer is named in one line.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { runCli } from "../helpers/node-process.ts";

const COMMANDS: Record<string, string[]> = {
  add: ["--stdin", "--type", "--ttl", "--strategy"],
  remove: [],
  query: ["--page-size", "--all"],
  scan: ["--chunk", "--count"],
  incr: ["--request-id"],
  export: ["--since-file", "--next-since-file", "--chunk-bytes"],
  import: ["--copies"],
  keys: ["--prefix", "--all"],
  delete: [],
  watch: ["--prefix", "--since-file"],
  members: ["--all"],
  owners: [],
  compare: ["--prefix", "--quiet"],
};

describe("deltaset COMMAND --help", () => {
  it("prints each client command's usage and options and calls no node", async () => {
    for (const [name, own] of Object.entries(COMMANDS)) {
      const r = await runCli([name, name === "add" ? "-h" : "--help", "--addr", "127.0.0.1:1"]);
      assert.equal(r.code, 0, `${name}: ${r.stderr}`);
      assert.equal(r.stderr, "", name);
      assert.match(r.stdout, new RegExp(`^usage: deltaset ${name} \\[options\\]\\n\\n  ${name} `), name);
      for (const f of ["--addr VALUE", "--json", "--token-file VALUE", ...own]) assert.ok(r.stdout.includes(f), `${name} lists ${f}`);
    }
  });

  it("says what an option does for the command it is given to", async () => {
    const r = await runCli(["members", "--help"]);
    assert.match(r.stdout, /--all +departed members too \(DEAD and LEFT\)/);
    assert.match((await runCli(["keys", "--help"])).stdout, /--all +every page, not only the first/);
  });

  it("chaos run --help (with or without a scenario) prints the run options and starts nothing", async () => {
    for (const args of [["chaos", "run", "--help"], ["chaos", "run", "partition-halves", "-h"]]) {
      const r = await runCli(args);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /run options:\n  --nodes N/);
    }
  });

  it("verify --help names --data-dir and opens nothing", async () => {
    const r = await runCli(["verify", "--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /--data-dir VALUE +the stopped node's data directory/);
  });

  it("--help after -- is an argument, not a request for help", async () => {
    const r = await runCli(["query", "--addr", "127.0.0.1:1", "--timeout", "2000", "k", "--", "--help"]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /^deltaset query: no node answers at 127\.0\.0\.1:1 \(connect ECONNREFUSED 127\.0\.0\.1:1\) \(gRPC status 14\)$/m);
  });

  it("an --addr after -- is an argument: the node named is the one called, and a command refuses arguments it would drop", async () => {
    const q = await runCli(["query", "k", "--", "--addr", "127.0.0.1:2"], { DELTASET_ADDR: "127.0.0.1:1" });
    assert.equal(q.code, 1);
    assert.match(q.stderr, /^deltaset query: no node answers at 127\.0\.0\.1:1 \(connect ECONNREFUSED 127\.0\.0\.1:1\)/m);
    const incr = await runCli(["incr", "k", "--", "-3", "--addr", "127.0.0.1:2"], { DELTASET_ADDR: "127.0.0.1:1" });
    assert.equal(incr.code, 2);
    assert.match(incr.stderr, /^deltaset incr: unexpected argument\(s\) "--addr" "127\.0\.0\.1:2" \(options go before '--'\)/m);
    const twice = await runCli(["incr", "k", "5", "7"], { DELTASET_ADDR: "127.0.0.1:1" });
    assert.equal(twice.code, 2);
    assert.match(twice.stderr, /unexpected argument\(s\) "7"/);
    const scan = await runCli(["scan", "a", "b"], { DELTASET_ADDR: "127.0.0.1:1" });
    assert.equal(scan.code, 2);
    assert.match(scan.stderr, /unexpected argument\(s\) "b"/);
  });

  it("an amount outside int64, or a capacity outside uint64, is a usage error (exit 2) before any call", async () => {
    const env = { DELTASET_ADDR: "127.0.21.1:1" };
    for (const amount of ["99999999999999999999", "9223372036854775808", "-9223372036854775809"]) {
      const r = await runCli(["incr", "visits", "--", amount], env);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /^deltaset incr: amount "-?\d+" is outside the int64 range \(-9223372036854775808 to 9223372036854775807\)$/m);
      assert.doesNotMatch(r.stderr, /serialization|gRPC status/);
    }
    // The bounds themselves are amounts: they reach the (absent) node.
    const max = await runCli(["incr", "visits", "9223372036854775807", "--timeout", "2000"], env);
    assert.equal(max.code, 1, max.stderr);
    assert.match(max.stderr, /no node answers at 127\.0\.21\.1:1/);
    const cap = await runCli(["add", "seen", "a", "--type", "gbf", "--capacity", "1e30"], env);
    assert.equal(cap.code, 2, cap.stderr);
    assert.match(cap.stderr, /^deltaset add: --capacity 1e30 is above 18446744073709551615, the largest the field \(uint64\) holds$/m);
  });

  it("a node that does not answer is named, with how to name another when none was given", async () => {
    const r = await runCli(["keys"], { DELTASET_ADDR: "127.0.0.1:1" });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^deltaset keys: no node answers at 127\.0\.0\.1:1 \(connect ECONNREFUSED 127\.0\.0\.1:1\); name the node with --addr HOST:PORT or \$DELTASET_ADDR \(gRPC status 14\)$/m);
  });
});
