// A watch under partition placement (R = 2) when its node stops owning what it follows: a fourth
// node joins and takes a key's partition from the node a key watch and a prefix watch run on.
// Both watches end with UNAVAILABLE saying so (before, they stayed open and fell silent for good,
// the client's copy missing every later add and keeping removed elements); the key watch, resumed
// through any node from its last event's context, brings the copy level with a final Query; the
// CLI's key watch, begun before the join, watches again by itself and prints the later changes.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { contextToProto, elementBytes } from "../../services/crdt/index.ts";
import { call } from "../../services/client/rpc.ts";
import { WatchedSet } from "../../services/client/watch.ts";
import { Ownership } from "../../services/gossip/ownership.ts";
import { eventually } from "../helpers/eventually.ts";
import { keyWhere, ownersAt } from "../helpers/placement.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { watchStream } from "../helpers/watch-streams.ts";
import { BIN, REPO } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-watch-placement-"));
const PARTITIONS = 16;
const FLAGS = ["--replication-factor", "2", "--partitions", String(PARTITIONS), "--gossip-interval-ms", "100", "--probe-interval-ms", "200", "--probe-timeout-ms", "150"];
const c = new TestCluster(dir, ["127.0.14.1:7141", "127.0.14.2:7142", "127.0.14.3:7143", "127.0.14.4:7144"], FLAGS, "wp");
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});


const members = (copy: WatchedSet) => [...copy.state.entries.keys()].map((ek) => Buffer.from(elementBytes(ek)).toString()).sort();

describe("a watch whose node stops owning what it follows", () => {
  it("ends with UNAVAILABLE, and the key watch resumed elsewhere from its context catches up", { timeout: 120_000 }, async () => {
    // A key wp0 owns among three nodes and not once wp3 has joined.
    const three = new Ownership("wp0", "a", PARTITIONS, 2);
    three.setLive(new Map([["wp1", "b"], ["wp2", "c"]]));
    const four = new Ownership("wp0", "a", PARTITIONS, 2);
    four.setLive(new Map([["wp1", "b"], ["wp2", "c"], ["wp3", "d"]]));
    const key = keyWhere((p) => three.owns(p) && !four.owns(p), "moves-", PARTITIONS);
    const address0 = c.addresses[0]!;

    await Promise.all([c.start(0), c.start(1), c.start(2)]);
    await eventually("three members agree on the key's owners", async () => Promise.all([0, 1, 2].map((i) => ownersAt(c, i, key))), (v) => v.every((o) => o.join() === v[0]!.join() && o.length === 2), 20_000);
    assert.ok((await ownersAt(c, 0, key)).includes("wp0"));
    await c.add(0, key, ["a", "b", "c"]);

    const keyWatch = watchStream(address0, { key });
    const cli = spawn(process.execPath, [BIN, "watch", key, "--addr", address0, "--json"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let cliOut = "";
    let cliErr = "";
    cli.stdout.on("data", (d: Buffer) => (cliOut += d.toString()));
    cli.stderr.on("data", (d: Buffer) => (cliErr += d.toString()));
    const prefixWatch = watchStream(address0, { prefix: "moves-" });
    const copy = new WatchedSet();
    await eventually("the key watch caught up", async () => keyWatch.events.length, (n) => n > 0, 10_000);
    await c.add(1, key, ["d"]);
    await eventually("the prefix watch saw the add", async () => prefixWatch.events.length, (n) => n > 0, 10_000);

    await c.start(3);
    const [keyEnd, prefixEnd] = await Promise.all([keyWatch.ended, prefixWatch.ended]);
    assert.equal(keyEnd?.code, grpc.status.UNAVAILABLE, `key watch ended with ${keyEnd?.code}: ${keyEnd?.details}`);
    assert.match(keyEnd!.details, /no longer owns key "moves-\d+".*since = the context of the last event/);
    assert.equal(prefixEnd?.code, grpc.status.UNAVAILABLE, `prefix watch ended with ${prefixEnd?.code}: ${prefixEnd?.details}`);
    assert.match(prefixEnd!.details, /no longer owns \d+ of the partitions/);
    keyWatch.close();
    prefixWatch.close();
    assert.ok(!(await ownersAt(c, 0, key)).includes("wp0"), "wp0 no longer owns the key");

    // Writes after the move, and a remove, reach the copy through a resumed watch on wp0 (which
    // forwards it to an owner now) from the last event's context.
    for (const e of keyWatch.events) copy.apply(e);
    await c.add(2, key, ["e"]);
    await c.replica(2, (r) => call(r, r.remove, { key, elements: [Buffer.from("a")], texts: [] }));
    const resumed = watchStream(address0, { key, since: copy.resumeFrom === undefined ? undefined : contextToProto(copy.resumeFrom) });
    try {
      await eventually("the resumed watch brings the copy level with a Query", async () => {
        while (resumed.events.length > 0) copy.apply(resumed.events.shift()!);
        const q = await c.replica(3, (r) => call(r, r.query, { key, elements: [], texts: [], pageSize: 100, pageToken: Buffer.alloc(0), withText: true }));
        return { copy: members(copy), query: q.members.map((m) => Buffer.from(m.element).toString()).sort() };
      }, (v) => v.copy.join() === v.query.join() && v.copy.join() === "b,c,d,e", 20_000);
    } finally {
      resumed.close();
    }
    try {
      await eventually("the CLI printed the add made after the move", async () => cliOut, (o) => /"kind":"(change|catch-up)","added":\["e"\]/.test(o), 20_000);
      assert.match(cliErr, /the watch ended \(this node no longer owns key "moves-\d+".*\); watching again from the last event's context/);
    } finally {
      cli.kill("SIGINT");
      await once(cli, "exit");
    }
  });
});
