// Partition placement with a replication factor, on real node processes (--replication-factor 3):
//  - 5 nodes: every key lives on exactly its 3 owners (Keys lists what a node holds itself, it is
//    never forwarded), and writes and reads through any node reach them (forwarding);
//  - a node joins under load: it receives its partitions, the owners it displaced drop their
//    copies once it acknowledged them, and no acknowledged write is lost;
//  - a node is SIGKILLed: its partitions are copied to new owners until R live copies exist;
//  - a call forwarded to an owner that does not answer names that owner, not the node called.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { FORWARDED_BY } from "../../services/node/routing.ts";
import { READ_PULL } from "../../services/node/read-pull.ts";
import { eventually } from "../helpers/eventually.ts";
import { runCli } from "../helpers/node-process.ts";
import { ownersAt, placedOnOwners } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-placement-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const FLAGS = ["--replication-factor", "3", "--partitions", "16", "--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"];

async function readVia(c: TestCluster, i: number, key: string): Promise<string[]> {
  return (await c.read(i, key)).sort();
}

describe("placement with a replication factor (real processes)", () => {
  it("5 nodes, R = 3: each key lives on its 3 owners only; writes and reads through any node reach them", async () => {
    const c = new TestCluster(dir, [1, 2, 3, 4, 5].map((i) => `127.0.5.${i}:7801`), FLAGS, "a");
    try {
      await c.startAll();
      const all = [0, 1, 2, 3, 4];
      // Membership first: writes before it would be taken by nodes that later forward them.
      await eventually("every node sees 5 owners-capable members", async () => Promise.all(all.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.length === 3 && o.join() === v[0]!.join()));
      const keys = Array.from({ length: 24 }, (_, k) => `k${k}`);
      for (const [k, key] of keys.entries()) await c.add(k % 5, key, [`e${k}`, `f${k}`]);
      const s = await placedOnOwners(c, all, keys, 3);
      // Every node was an owner of some keys and a non-owner of others: forwarding was exercised.
      for (const i of all) {
        const owned = [...s.layout!.values()].filter((v) => v.owners.includes(`a${i}`)).length;
        assert.ok(owned > 0 && owned < keys.length, `node a${i} owns ${owned} of ${keys.length} keys`);
      }
      for (const [k, key] of keys.entries()) {
        for (const i of all) assert.deepEqual(await readVia(c, i, key), [`e${k}`, `f${k}`], `read of ${key} through a${i}`);
      }
      // A read marked as forwarded is served locally: a non-owner answers from its own (empty) store.
      const key = keys[0]!;
      const nonOwner = all.find((i) => !s.layout!.get(key)!.owners.includes(`a${i}`))!;
      const local = await c.replica(nonOwner, (r) => {
        const md = new grpc.Metadata();
        md.set(FORWARDED_BY, "test");
        md.set(READ_PULL, "2");
        return call(r, r.query, { key, elements: [], texts: [], pageSize: 10, pageToken: Buffer.alloc(0), withText: false }, { metadata: md });
      });
      assert.equal(Number(local.size), 0);
      // The CLI names the owners.
      const out = await runCli(["owners", key, "--addr", c.addresses[nonOwner]!, "--json"]);
      assert.equal(out.code, 0, out.stderr);
      const j = JSON.parse(out.stdout) as { local: boolean; owners: Array<{ nodeId: string }>; replicationFactor: string };
      assert.equal(j.local, false);
      assert.equal(j.replicationFactor, "3");
      assert.deepEqual(j.owners.map((o) => o.nodeId).sort(), s.layout!.get(key)!.owners);
    } finally {
      await c.close();
    }
  });

  it("a node joins under load: its partitions move to it, the displaced owners drop them, no acknowledged write is lost", async () => {
    const c = new TestCluster(dir, [11, 12, 13, 14, 15].map((i) => `127.0.5.${i}:7802`), FLAGS, "j");
    try {
      await Promise.all([0, 1, 2, 3].map((i) => c.start(i)));
      const four = [0, 1, 2, 3];
      await eventually("4 members agree", async () => Promise.all(four.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.length === 3 && o.join() === v[0]!.join()));
      const keys = Array.from({ length: 40 }, (_, k) => `j${k}`);
      const acked = new Map<string, string[]>(keys.map((k) => [k, []]));
      for (const [k, key] of keys.entries()) {
        await c.add(k % 4, key, [`a${k}`]);
        acked.get(key)!.push(`a${k}`);
      }
      await placedOnOwners(c, four, keys, 3);
      // Writes go on through the old nodes while the fifth joins; each one counts once acknowledged.
      let writing = true;
      let duringJoin = 0;
      const load = (async () => {
        for (let n = 0; writing && n < 400; n++) {
          const key = keys[n % keys.length]!;
          const el = `w${n}`;
          try {
            await c.add(n % 4, key, [el]);
            acked.get(key)!.push(el);
            duringJoin++;
          } catch {
            // not acknowledged: not counted
          }
        }
      })();
      await c.start(4);
      const five = [0, 1, 2, 3, 4];
      await eventually("5 members agree", async () => Promise.all(five.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.join() === v[0]!.join()) && new Set(v.flat()).size >= 1);
      await new Promise((r) => setTimeout(r, 1000));
      writing = false;
      await load;
      assert.ok(duringJoin > 0, "adds were acknowledged while the node joined");
      const s = await placedOnOwners(c, five, keys, 3, 45_000);
      const moved = [...s.layout!.values()].filter((v) => v.owners.includes("j4")).length;
      assert.ok(moved > 0, "the new node owns some keys");
      for (const [key, els] of acked) assert.deepEqual(await readVia(c, 4, key), [...els].sort(), `every acknowledged add of ${key}`);
      process.stdout.write(`# join: the new node took ${moved} of ${keys.length} keys (${((100 * moved) / keys.length).toFixed(0)}%; 3/5 of keys have it as an owner in expectation, i.e. 1/5 of the copies)\n`);
    } finally {
      await c.close();
    }
  });

  it("a node is SIGKILLed: its partitions are re-replicated to R live copies", async () => {
    const c = new TestCluster(dir, [21, 22, 23, 24, 25].map((i) => `127.0.5.${i}:7803`), FLAGS, "d");
    try {
      await c.startAll();
      const all = [0, 1, 2, 3, 4];
      await eventually("5 members agree", async () => Promise.all(all.map((i) => ownersAt(c, i, "probe"))), (v) => v.every((o) => o.length === 3 && o.join() === v[0]!.join()));
      const keys = Array.from({ length: 30 }, (_, k) => `d${k}`);
      for (const [k, key] of keys.entries()) await c.add(k % 5, key, [`x${k}`]);
      const before = await placedOnOwners(c, all, keys, 3);
      const victim = 2;
      const lost = [...before.layout!.values()].filter((v) => v.owners.includes(`d${victim}`)).length;
      assert.ok(lost > 0, "the victim owned some keys");
      await c.kill(victim);
      const rest = [0, 1, 3, 4];
      await placedOnOwners(c, rest, keys, 3, 45_000);
      for (const [k, key] of keys.entries()) assert.deepEqual(await readVia(c, k % 4 === 2 ? 3 : k % 4, key), [`x${k}`]);
    } finally {
      await c.close();
    }
  });

  it("a call forwarded to an owner that does not answer names that owner (R = 1)", async () => {
    const c = new TestCluster(dir, [11, 12].map((i) => `127.0.5.${i}:7801`), [...FLAGS.filter((f, i, a) => f !== "--replication-factor" && a[i - 1] !== "--replication-factor"), "--replication-factor", "1", "--probe-interval-ms", "2000", "--probe-timeout-ms", "1500"], "o");
    try {
      await c.startAll();
      await eventually("node 0 places keys on node 1", async () => ownersAt(c, 0, "probe"), (o) => o.length === 1);
      let key = "";
      for (let k = 0; key === "" && k < 100; k++) if ((await ownersAt(c, 0, `t${k}`))[0] === "o1") key = `t${k}`;
      assert.notEqual(key, "", "a key owned by node 1");
      await c.nodes.get(1)!.kill();
      const out = await runCli(["add", key, "x", "--addr", c.addresses[0]!]);
      assert.equal(out.code, 1);
      assert.match(out.stderr, /forwarded to the key's owner o1 \(127\.0\.5\.12:7801\), which did not answer/);
      assert.doesNotMatch(out.stderr, /no node answers at 127\.0\.5\.11/);
    } finally {
      await c.close();
    }
  });
});
