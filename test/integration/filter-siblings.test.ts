// Two nodes that each take the first Add of one filter key, with different parameters, while they
// cannot reach each other: once they do, both hold both filters (siblings), answer every
// acknowledged element present, put new elements in the same main filter, and remove (ORCF) from
// every filter that holds the element. Before, each kept its own filter and answered the other's
// elements absent for good.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ObjectType } from "../../services/crdt/index.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { filterCalls, filterParams } from "../helpers/filter-calls.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-filter-siblings-"));
const c = new TestCluster(dir, ["127.0.10.3:7951", "127.0.10.4:7951"], ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "300", "--log-level", "error"], "sib");
before(() => c.startAll());
after(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

const params = filterParams;
const { add, remove, query } = filterCalls(c);
const present = async (i: number, key: string, elements: string[]) => (await query(i, key, elements)).presence.map((p) => p.present);

describe("a filter key created on two nodes at once with different parameters", () => {
  it("ends on both nodes as the same siblings, losing no acknowledged element, and removes from each", async () => {
    // Node 0 alone creates the keys...
    await c.kill(1);
    assert.equal((await add(0, "race", ["a"], ObjectType.GBF, params({ bits: 8192n, hashes: 3 }))).added, 1);
    assert.equal((await add(0, "race-o", ["x", "y"], ObjectType.ORCF, params({ capacity: 100n }))).added, 2);
    // ...then node 1 alone, which never heard of them, with other parameters.
    await c.kill(0);
    await c.start(1);
    assert.equal((await add(1, "race", ["b"], ObjectType.GBF, params({ capacity: 1000n, falsePositiveRate: 0.001 }))).added, 1);
    assert.equal((await add(1, "race-o", ["x", "z"], ObjectType.ORCF, params({ capacity: 1000n }))).added, 2);
    await c.start(0);

    for (const i of [0, 1]) {
      await eventually(`node ${i} answers every acknowledged element`, () => present(i, "race", ["a", "b"]), (p) => p.every(Boolean), 15_000);
      await eventually(`node ${i} has both ORCFs`, () => present(i, "race-o", ["x", "y", "z"]), (p) => p.every(Boolean), 15_000);
    }
    const shapes = await eventually(
      "both nodes report the same filters",
      () => Promise.all([0, 1].map(async (i) => (await query(i, "race", ["a"])).filter!.parameters)),
      (ps) => ps[0] === ps[1],
      15_000,
    );
    const shape = JSON.parse(shapes[0]!);
    assert.equal(shape.concurrentlyCreated.length, 1, shapes[0]);
    // The main filter is the larger: capacity 1000 at 0.001 takes more than 8192 bits.
    assert.ok(shape.bits > 8192 && shape.concurrentlyCreated[0].bits === 8192, shapes[0]);

    // New elements go to the main filter, on whichever node they arrive.
    assert.equal((await add(0, "race", ["c"])).added, 1);
    await eventually("node 1 has c", () => present(1, "race", ["a", "b", "c"]), (p) => p.every(Boolean), 15_000);

    // x was added to both ORCFs: a remove takes it from each, on every node.
    assert.equal((await remove(0, "race-o", ["x"])).removed, 1);
    for (const i of [0, 1]) {
      await eventually(`x gone on node ${i}`, () => present(i, "race-o", ["x", "y", "z"]), (p) => !p[0] && p[1]! && p[2]!, 15_000);
    }
  });
});
