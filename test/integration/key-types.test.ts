// --key-types on real nodes: a key under a rule's prefix is created as the rule's type by an Add
// that names none, and every write that would create it as another type (Add naming one,
// Increment, AddStream, Merge) is refused FAILED_PRECONDITION naming the rule; keys outside the
// rules are untouched. A peer without the rule that creates such a key as another type does not
// make it so here: the key is skipped as a type conflict. A rule that does not parse stops the
// node at start.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { AWSet, AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { addStream } from "../../services/client/add-stream.ts";
import { call } from "../../services/client/rpc.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { expectRefused } from "../helpers/grpc-status.ts";
import { runCli } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-key-types-"));
const RULES = ["--key-types", "bloom/=gbf,bloom/prob/=awset-prob,hits/=counter"];
const fast = ["--gossip-interval-ms", "200", "--probe-interval-ms", "300", "--probe-timeout-ms", "200"];
// Two nodes with the rules, one without (started in its test).
const c = new TestCluster(dir, ["127.0.6.1:7601", "127.0.6.2:7602", "127.0.6.3:7603"], fast, "kt");
const b = (s: string) => Buffer.from(s);

before(async () => {
  await Promise.all([c.start(0, RULES), c.start(1, RULES)]);
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const add = (i: number, key: string, els: string[], type?: ObjectType) =>
  c.replica(i, (r) => call(r, r.add, { key, elements: els.map(b), texts: [], type }));
const query = (i: number, key: string, els: string[]) => c.replica(i, (r) => call(r, r.query, { key, elements: els.map(b), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));

describe("key types fixed by prefix (--key-types)", () => {
  it("an Add that names no type creates the rule's type, the longest prefix winning; other keys stay AWSET", async () => {
    await add(0, "bloom/a", ["x"]);
    await add(0, "bloom/prob/a", ["y"]);
    await add(0, "plain", ["z"]);
    assert.equal((await query(0, "bloom/a", ["x"])).type, ObjectType.GBF);
    assert.equal((await query(0, "bloom/prob/a", ["y"])).type, ObjectType.AWSET_PROB);
    assert.equal((await query(0, "plain", ["z"])).type, ObjectType.AWSET);
    await eventually("node 1 has the GBF", () => query(1, "bloom/a", ["x"]), (q) => q.type === ObjectType.GBF && q.presence[0]!.present, 15_000);
  });

  it("every write that would create a ruled key as another type is refused, naming the rule, and creates nothing", async () => {
    const rule = /key "bloom\/b" is of type GBF by the node's key type rule "bloom\/=gbf" \(--key-types\), not GCF/;
    await expectRefused(add(1, "bloom/b", ["x"], ObjectType.GCF), status.FAILED_PRECONDITION, rule);
    await expectRefused(
      c.replica(1, (r) => call(r, r.increment, { key: "bloom/c", amount: 1n, requestId: "" })),
      status.FAILED_PRECONDITION,
      /key "bloom\/c" is of type GBF by the node's key type rule "bloom\/=gbf" \(--key-types\), not COUNTER/,
    );
    await expectRefused(add(1, "hits/a", ["x"]), status.FAILED_PRECONDITION, /a COUNTER key is created by Increment, not Add/);
    await expectRefused(
      c.replica(1, (r) => addStream(r, "bloom/d", [[b("x")]])),
      status.FAILED_PRECONDITION,
      /key "bloom\/d" is of type GBF by the node's key type rule "bloom\/=gbf" \(--key-types\), not AWSET/,
    );
    const set = AWSet.bottom();
    set.joinInPlace(set.addDelta("elsewhere", [b("m")]));
    await expectRefused(
      c.replica(1, (r) => call(r, r.merge, { key: "bloom/e", state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(set)) } })),
      status.FAILED_PRECONDITION,
      /key "bloom\/e" is of type GBF by the node's key type rule/,
    );
    for (const key of ["bloom/b", "bloom/c", "bloom/d", "bloom/e"]) assert.equal((await query(1, key, ["x"])).type, ObjectType.OBJECT_TYPE_UNSPECIFIED, `${key} was not created`);
    // Increment creates a counter where the rule says counter.
    const inc = await c.replica(1, (r) => call(r, r.increment, { key: "hits/a", amount: 2n, requestId: "" }));
    assert.equal(inc.value, 2n);
  });

  it("a peer without the rule that creates a ruled key as another type: the key is skipped here as a type conflict", async () => {
    const lax = await c.start(2);
    await c.replica(2, (r) => call(r, r.add, { key: "bloom/from-peer", elements: [b("p")], texts: [] }));
    assert.equal((await query(2, "bloom/from-peer", ["p"])).type, ObjectType.AWSET);
    await eventually("node 0 logs the conflict", async () => c.nodes.get(0)!.logs(), (logs) => /key type or parameter conflict[^\n]*bloom\/from-peer/.test(logs), 15_000);
    assert.equal((await query(0, "bloom/from-peer", ["p"])).type, ObjectType.OBJECT_TYPE_UNSPECIFIED);
    assert.ok(lax.nodeId);
  });

  it("a rule that does not parse stops the node at start with exit 2", async () => {
    const bad = await runCli(["node", "--listen", "127.0.6.9:0", "--data-dir", join(dir, "bad"), "--key-types", "bloom/=bloom"]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /key type rule "bloom\/=bloom": "bloom" is not one of awset, awset-prob, gbf, gcf, orcf, scgbf, scgcf, scorcf, counter \(--key-types\)/);
    const twice = await runCli(["node", "--listen", "127.0.6.9:0", "--data-dir", join(dir, "bad"), "--key-types", "a=gbf,a=gcf"]);
    assert.equal(twice.code, 2, twice.stderr);
    assert.match(twice.stderr, /key type rules "a=gbf" and "a=gcf" name the same prefix/);
  });
});
