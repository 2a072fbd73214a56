// Keys and Delete on real nodes. Keys: every key with a prefix, in key order across partitions,
// page by page, with type, size and (sets) a state digest that agrees across nodes holding the
// same state; tokens bound to their prefix. Delete: every element the node
// has seen is removed, an add made concurrently on another node survives (add wins), for the
// probabilistic set as for AWSET; other types and missing keys are refused, a read token may list
// but not delete, and the CLI does both.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { ObjectType } from "../../services/crdt/index.ts";
import { call } from "../../services/client/rpc.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { statusOf } from "../helpers/grpc-status.ts";
import { runCli } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-keys-"));
// A 2 s gossip period leaves time for an add that the other node has not seen yet.
const c = new TestCluster(dir, ["127.0.2.31:7931", "127.0.2.32:7932"], ["--gossip-interval-ms", "2000", "--probe-interval-ms", "300", "--probe-timeout-ms", "200", "--default-page-size", "7"], "k");

before(async () => {
  await c.startAll();
});
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const keysPage = (prefix: string, pageToken: Buffer = Buffer.alloc(0), pageSize = 0) => c.replica(0, (r) => call(r, r.keys, { prefix, pageSize, pageToken }));

describe("Keys", () => {
  it("lists every key with a prefix in key order across partitions, page by page", async () => {
    const names = Array.from({ length: 23 }, (_, i) => `user/${String(i).padStart(2, "0")}`);
    for (const [i, k] of names.entries()) await c.add(0, k, Array.from({ length: (i % 3) + 1 }, (_, j) => `e${j}`));
    await c.add(0, "other/1", ["x"]);
    await c.replica(0, (r) => call(r, r.increment, { key: "user/zz-counter", amount: 3n, requestId: "" }));
    const seen: Array<{ key: string; type: ObjectType; size: bigint }> = [];
    let token: Buffer = Buffer.alloc(0);
    let pages = 0;
    do {
      const res = await keysPage("user/", token);
      assert.ok(res.keys.length <= 7, "the node's default page size");
      seen.push(...res.keys);
      token = res.nextPageToken;
      pages++;
    } while (token.length > 0);
    assert.equal(pages, 4);
    assert.deepEqual(seen.map((k) => k.key), [...names, "user/zz-counter"]);
    assert.deepEqual(seen.slice(0, 3).map((k) => [k.type, k.size]), [[ObjectType.AWSET, 1n], [ObjectType.AWSET, 2n], [ObjectType.AWSET, 3n]]);
    assert.deepEqual([seen.at(-1)!.type, seen.at(-1)!.size], [ObjectType.COUNTER, 0n]);
    const all = await keysPage("", Buffer.alloc(0), 100);
    assert.ok(all.keys.some((k) => k.key === "other/1"));
    assert.equal(all.nextPageToken.length, 0);
  });

  it("shows each set's state digest: the same on nodes holding the same state, another where one lags", async () => {
    const digestOn = async (i: number, key: string) => {
      const page = await c.replica(i, (r) => call(r, r.keys, { prefix: key, pageSize: 10, pageToken: Buffer.alloc(0) }));
      const k = page.keys.find((x) => x.key === key);
      return k === undefined ? "absent" : Buffer.from(k.stateDigest).toString("hex");
    };
    const converged = async (key: string) =>
      (await eventually(`both nodes show one state digest for ${key}`, async () => [await digestOn(0, key), await digestOn(1, key)], ([a, b]) => a === b && a !== "absent", 20_000))[0]!;
    await c.add(0, "digest/set", ["a", "b", "c"]);
    const first = await converged("digest/set");
    assert.match(first, /^[0-9a-f]{32}$/);
    // A remove adds nothing to the set's context (its dot was in it): the live dots tell the
    // states apart, on node 1 at once and on node 0 once gossip brings the remove.
    await c.remove(1, "digest/set", ["b"]);
    assert.notEqual(await digestOn(1, "digest/set"), first);
    const second = await converged("digest/set");
    assert.notEqual(second, first);
    const same = await runCli(["compare", c.addresses[0]!, c.addresses[1]!, "--prefix", "digest/", "--json"]);
    assert.equal(same.code, 0, same.stderr);
    assert.deepEqual(JSON.parse(same.stdout), { nodes: [c.addresses[0], c.addresses[1]], keys: 1, differ: [], notCompared: 0 });
    // A probabilistic set: its element count, and a digest of its reads (live elements and their
    // adds) that both nodes show once gossip brought them together.
    await c.replica(0, (r) => call(r, r.add, { key: "digest/prob", elements: ["a", "b"].map((e) => Buffer.from(e)), texts: [], type: ObjectType.AWSET_PROB }));
    const prob = await converged("digest/prob");
    assert.match(prob, /^[0-9a-f]{32}$/);
    const probInfo = (await c.replica(1, (r) => call(r, r.keys, { prefix: "digest/prob", pageSize: 10, pageToken: Buffer.alloc(0) }))).keys[0]!;
    assert.deepEqual([probInfo.type, probInfo.size], [ObjectType.AWSET_PROB, 2n]);
    await c.replica(1, (r) => call(r, r.remove, { key: "digest/prob", elements: [Buffer.from("a")], texts: [] }));
    assert.notEqual(await converged("digest/prob"), prob);
    // The counter and the other types list no digest.
    await c.replica(0, (r) => call(r, r.increment, { key: "digest/counter", amount: 1n, requestId: "" }));
    assert.equal(await digestOn(0, "digest/counter"), "");
  });

  it("deltaset compare names the sets that differ between nodes, or that a node lacks, and exits 1", async () => {
    // A node of another cluster: the same set with other elements, and none of the others.
    const lone = new TestCluster(dir, ["127.0.2.34:7934"], [], "lone");
    try {
      await lone.startAll();
      await lone.add(0, "cmp/shared", ["x"]);
      await c.add(0, "cmp/shared", ["y"]);
      await c.add(0, "cmp/only-here", ["z"]);
      const r = await runCli(["compare", c.addresses[0]!, lone.addresses[0]!, "--prefix", "cmp/", "--json"]);
      assert.equal(r.code, 1, r.stderr);
      const { keys, differ } = JSON.parse(r.stdout) as { keys: number; differ: Array<{ key: string; digests: string[] }> };
      assert.equal(keys, 2);
      assert.deepEqual(differ.map((d) => d.key), ["cmp/only-here", "cmp/shared"]);
      assert.equal(differ[0]!.digests[1], "(none)", "the lone node lacks it");
      assert.notEqual(differ[1]!.digests[0], differ[1]!.digests[1]);
      const quiet = await runCli(["compare", c.addresses[0]!, lone.addresses[0]!, "--prefix", "cmp/", "--quiet"]);
      assert.deepEqual([quiet.code, quiet.stdout], [1, ""]);

      // Keys of every type count: a probabilistic set compared by its reads digest, a counter held
      // by one node only named as missing, a counter held by both counted as not compared.
      const prob = (cl: TestCluster, els: string[]) => cl.replica(0, (r) => call(r, r.add, { key: "cmp2/prob", elements: els.map((e) => Buffer.from(e)), texts: [], type: ObjectType.AWSET_PROB }));
      await prob(c, ["p"]);
      await prob(lone, ["q"]);
      for (const cl of [c, lone]) await cl.replica(0, (rr) => call(rr, rr.increment, { key: "cmp2/both", amount: 1n, requestId: "" }));
      await c.replica(0, (rr) => call(rr, rr.increment, { key: "cmp2/counter-here", amount: 1n, requestId: "" }));
      // One key held as two types, neither carrying a digest: named with each node's type.
      await c.replica(0, (rr) => call(rr, rr.increment, { key: "cmp2/two-types", amount: 1n, requestId: "" }));
      await lone.replica(0, (rr) => call(rr, rr.add, { key: "cmp2/two-types", elements: [Buffer.from("g")], texts: [], type: ObjectType.GBF }));
      const r2 = await runCli(["compare", c.addresses[0]!, lone.addresses[0]!, "--prefix", "cmp2/", "--json"]);
      assert.equal(r2.code, 1, r2.stderr);
      const cmp2 = JSON.parse(r2.stdout) as { keys: number; differ: Array<{ key: string; digests: string[]; types?: string[] }>; notCompared: number };
      assert.deepEqual([cmp2.keys, cmp2.notCompared], [4, 1]);
      assert.deepEqual(cmp2.differ.map((d) => d.key), ["cmp2/counter-here", "cmp2/prob", "cmp2/two-types"]);
      assert.deepEqual(cmp2.differ[2]!.types, ["COUNTER", "GBF"]);
      assert.equal(cmp2.differ[0]!.types, undefined);
      const shown = await runCli(["compare", c.addresses[0]!, lone.addresses[0]!, "--prefix", "cmp2/two"]);
      assert.equal(shown.code, 1);
      assert.match(shown.stdout, new RegExp(`cmp2/two-types  held as different types: ${c.addresses[0]}=COUNTER  ${lone.addresses[0]}=GBF`));
      assert.deepEqual(cmp2.differ[0]!.digests, ["", "(none)"]);
      assert.match(cmp2.differ[1]!.digests[0]!, /^[0-9a-f]{32}$/);
      assert.notEqual(cmp2.differ[1]!.digests[0], cmp2.differ[1]!.digests[1]);
      // A node that does not answer is named by its address, exit 2 (not "they differ"), with the
      // connect error rather than grpc-js's whole text.
      const gone = await runCli(["compare", c.addresses[0]!, "127.0.2.35:7935", "--prefix", "cmp2/"]);
      assert.equal(gone.code, 2);
      assert.match(gone.stderr, /127\.0\.2\.35:7935 did not answer Keys: connect ECONNREFUSED 127\.0\.2\.35:7935 \(gRPC status 14\); nothing compared/);
      assert.doesNotMatch(gone.stderr, /Resolution note/);
      // A deadline that is not a number is refused before any call.
      const badTimeout = await runCli(["compare", c.addresses[0]!, lone.addresses[0]!, "--timeout", "abc"]);
      assert.equal(badTimeout.code, 2);
      assert.match(badTimeout.stderr, /--timeout "abc" is not a positive whole number/);
    } finally {
      await lone.close();
    }
  });

  it("refuses a token of another prefix, an altered token and a page over the limit", async () => {
    const first = await keysPage("user/");
    assert.ok(first.nextPageToken.length > 0);
    const other = await statusOf(keysPage("other/", first.nextPageToken));
    assert.equal(other.code, grpc.status.INVALID_ARGUMENT);
    const bent = Buffer.from(first.nextPageToken);
    bent[2] = bent[2]! ^ 1;
    assert.equal((await statusOf(keysPage("user/", bent))).code, grpc.status.INVALID_ARGUMENT);
    assert.equal((await statusOf(keysPage("user/", Buffer.alloc(0), 1_000_000))).code, grpc.status.RESOURCE_EXHAUSTED);
  });
});

/**
 * a, b, c added at node 0 and read by both nodes; then node 1 adds "late" and node 0 deletes the
 * key at once: it must remove the three. Node 1's add must not reach node 0 before the Delete, but
 * a gossip period that happens to fall between the two calls brings it (4 removed): then a fresh
 * key is tried. Returns the key whose Delete came first.
 */
async function deleteBeforeLateAdd(name: string, type?: ObjectType): Promise<string> {
  const els = (...xs: string[]) => xs.map((x) => Buffer.from(x));
  for (let attempt = 0; attempt < 4; attempt++) {
    const key = `${name}-${attempt}`;
    await c.replica(0, (r) => call(r, r.add, { key, elements: els("a", "b", "c"), texts: [], type }));
    await c.converged(key, [0, 1], ["a", "b", "c"], 15_000);
    await c.replica(1, (r) => call(r, r.add, { key, elements: els("late"), texts: [], type }));
    const res = await c.replica(0, (r) => call(r, r.delete, { key }));
    if (res.removed === 3n) return key;
    assert.equal(res.removed, 4n, "the Delete removed what node 0 held: the three, or the late add too");
  }
  throw new Error("in 4 tries the late add reached node 0 before the Delete every time");
}

describe("Delete", () => {
  it("removes what the node has seen; an add it has not seen yet survives everywhere", async () => {
    const key = await deleteBeforeLateAdd("basket");
    await c.converged(key, [0, 1], ["late"], 15_000);
  });

  it("deletes a set larger than one call's element limit, in batches", async () => {
    const elements = Array.from({ length: 2500 }, (_, i) => `big-${i}`);
    for (let i = 0; i < elements.length; i += 500) await c.add(0, "big", elements.slice(i, i + 500));
    const res = await c.replica(0, (r) => call(r, r.delete, { key: "big" }));
    assert.equal(res.removed, 2500n);
    assert.equal(await c.size(0, "big"), 0);
    await c.converged("big", [0, 1], [], 15_000);
  });

  it("clears a probabilistic set (AWSET_PROB) the same way: an add it has not seen yet survives", async () => {
    const key = await deleteBeforeLateAdd("prob-basket", ObjectType.AWSET_PROB);
    await c.converged(key, [0, 1], ["late"], 15_000);
    // A deleted key keeps its type: the next Add extends the same probabilistic set.
    const page = await keysPage(key);
    assert.deepEqual(page.keys.map((k) => [k.key, k.type]), [[key, ObjectType.AWSET_PROB]]);
  });

  it("refuses other types and missing keys", async () => {
    const counter = await statusOf(c.replica(0, (r) => call(r, r.delete, { key: "user/zz-counter" })));
    assert.equal(counter.code, grpc.status.FAILED_PRECONDITION);
    assert.match(counter.details, /holds a COUNTER/);
    await c.replica(0, (r) => call(r, r.add, { key: "filter", elements: [Buffer.from("x")], texts: [], type: ObjectType.GBF }));
    const filter = await statusOf(c.replica(0, (r) => call(r, r.delete, { key: "filter" })));
    assert.equal(filter.code, grpc.status.FAILED_PRECONDITION);
    assert.match(filter.details, /holds a GBF: Delete removes the elements of a set/);
    assert.equal((await statusOf(c.replica(0, (r) => call(r, r.delete, { key: "no-such-key" })))).code, grpc.status.NOT_FOUND);
  });

  it("is reached from the CLI: deltaset keys and deltaset delete", async () => {
    await c.add(1, "cli-set", ["p", "q"]);
    const listed = await runCli(["keys", "--prefix", "cli-", "--addr", c.addresses[1]!, "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    const [cliSet] = JSON.parse(listed.stdout).keys;
    assert.deepEqual({ ...cliSet, stateDigest: undefined }, { key: "cli-set", type: "AWSET", size: 2, stateDigest: undefined });
    assert.match(cliSet.stateDigest, /^[0-9a-f]{32}$/);
    const deleted = await runCli(["delete", "cli-set", "--addr", c.addresses[1]!, "--json"]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(JSON.parse(deleted.stdout).removed, 2);
    // A probabilistic set lists its element count like a set.
    await c.replica(1, (r) => call(r, r.add, { key: "cli-prob", elements: [Buffer.from("a"), Buffer.from("b"), Buffer.from("c")], texts: [], type: ObjectType.AWSET_PROB }));
    const human = await runCli(["keys", "--prefix", "cli-prob", "--addr", c.addresses[1]!]);
    assert.match(human.stdout, /^cli-prob {2}AWSET_PROB {2}3 element\(s\)/);
    const none = await runCli(["keys", "--prefix", "nothing-", "--addr", c.addresses[1]!]);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, '(no keys starting with "nothing-")\n');
  });
});

describe("Keys and Delete with tokens", () => {
  it("a read token lists keys but may not delete", async () => {
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, "read reader-token-0123456789\nread,write writer-token-0123456789\n", { mode: 0o600 });
    const t = new TestCluster(dir, ["127.0.2.33:7933"], ["--auth-tokens-file", tokens], "t");
    try {
      await t.startAll();
      const md = (tok: string) => {
        const m = new grpc.Metadata();
        m.set("authorization", `Bearer ${tok}`);
        return m;
      };
      await t.replica(0, (r) => call(r, r.add, { key: "s", elements: [Buffer.from("x")], texts: [] }, { metadata: md("writer-token-0123456789") }));
      const listed = await t.replica(0, (r) => call(r, r.keys, { prefix: "", pageSize: 10, pageToken: Buffer.alloc(0) }, { metadata: md("reader-token-0123456789") }));
      assert.deepEqual(listed.keys.map((k) => k.key), ["s"]);
      const refused = await statusOf(t.replica(0, (r) => call(r, r.delete, { key: "s" }, { metadata: md("reader-token-0123456789") })));
      assert.equal(refused.code, grpc.status.PERMISSION_DENIED);
    } finally {
      await t.close();
    }
  });
});
