// Watch under partition placement, on the call handler with a stand-in placement: a key watch ends
// with UNAVAILABLE when a placement change takes the key's partition from the node, and at once
// when the node does not own the key (a forwarded watch meeting a view that already moved it on);
// a prefix watch ends when any partition it followed moves away, not when the node gains one. A
// change that leaves the watched partition here ends nothing, and an ended watch stops following
// the store and the placement.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { type ServerWritableStream, status } from "@grpc/grpc-js";
import type { KeyEvent, WatchKeysRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { partitionOf } from "../../services/gossip/index.ts";
import { type WatchPlacement, watchCall } from "../../services/replica/watch-calls.ts";
import { Store } from "../../services/store/store.ts";
import { testLimits } from "../helpers/limits.ts";
import { WatchCallStandIn } from "../helpers/watch-streams.ts";

const PARTITIONS = 4;

/** A placement whose owned partitions the test sets, telling its listeners as Ownership does. */
class TestPlacement implements WatchPlacement {
  private readonly listeners = new Set<() => void>();
  constructor(private mine: Set<number>) {}
  partitionOf(key: string): number {
    return partitionOf(key, PARTITIONS);
  }
  owns(p: number): boolean {
    return this.mine.has(p);
  }
  owned(): number[] {
    return [...this.mine];
  }
  onChange(l: () => void): () => void {
    this.listeners.add(l);
    return () => void this.listeners.delete(l);
  }
  set(mine: number[]): void {
    this.mine = new Set(mine);
    for (const l of this.listeners) l();
  }
  get following(): number {
    return this.listeners.size;
  }
}

const tick = () => new Promise((r) => setImmediate(r));
const quiet = { debug() {}, info() {}, warn() {}, error() {} } as never;

async function setup(mine: number[]) {
  const store = await Store.open({ dir: "memory", nodeId: "w", partitions: PARTITIONS, partitionOf, sync: "buffered" });
  const placement = new TestPlacement(new Set(mine));
  const serve = watchCall({ store, limits: testLimits({}), log: quiet, placement });
  const open = async (req: Partial<WatchKeysRequest>) => {
    const call = new WatchCallStandIn({ key: "", prefix: "", since: undefined, ...req } as WatchKeysRequest);
    void serve(call as unknown as ServerWritableStream<WatchKeysRequest, KeyEvent>);
    await tick();
    return call;
  };
  const storeListeners = () => (store as unknown as { changeListeners: Set<unknown> }).changeListeners.size;
  return { store, placement, open, storeListeners };
}

/** Keys of two different partitions. */
function twoKeys(): [string, string] {
  const a = "key-0";
  for (let i = 1; ; i++) if (partitionOf(`key-${i}`, PARTITIONS) !== partitionOf(a, PARTITIONS)) return [a, `key-${i}`];
}

describe("Watch under placement", () => {
  it("a key watch goes on through changes that leave its partition here, and ends UNAVAILABLE once one takes it", async () => {
    const [key, other] = twoKeys();
    const p = partitionOf(key, PARTITIONS);
    const q = partitionOf(other, PARTITIONS);
    const { store, placement, open, storeListeners } = await setup([p, q]);
    const call = await open({ key });
    await store.add(key, [Buffer.from("a")]);
    placement.set([p]); // another partition moved away
    await tick();
    assert.equal(call.error?.code, undefined, call.error?.details);
    await store.add(key, [Buffer.from("b")]);
    assert.equal(call.events.filter((e) => e.delta !== undefined).length, 2);
    placement.set([q]);
    await tick();
    assert.equal(call.error?.code, status.UNAVAILABLE);
    assert.match(call.error!.details!, /no longer owns key "key-0"/);
    assert.equal(placement.following, 0);
    assert.equal(storeListeners(), 0);
    await store.close();
  });

  it("a key watch on a node that does not own the key ends UNAVAILABLE at once, following nothing", async () => {
    const [key, other] = twoKeys();
    const { store, placement, open, storeListeners } = await setup([partitionOf(other, PARTITIONS)]);
    const call = await open({ key });
    assert.equal(call.error?.code, status.UNAVAILABLE);
    assert.match(call.error!.details!, /does not own key "key-0"/);
    assert.equal(placement.following, 0);
    assert.equal(storeListeners(), 0);
    await store.close();
  });

  it("a prefix watch goes on when the node gains a partition and ends UNAVAILABLE when it loses one", async () => {
    const [key, other] = twoKeys();
    const p = partitionOf(key, PARTITIONS);
    const q = partitionOf(other, PARTITIONS);
    const { store, placement, open, storeListeners } = await setup([p]);
    const call = await open({ prefix: "key-" });
    placement.set([p, q]);
    await tick();
    assert.equal(call.error?.code, undefined, call.error?.details);
    await store.add(other, [Buffer.from("x")]);
    assert.equal(call.events.length, 1);
    placement.set([p]);
    await tick();
    assert.equal(call.error?.code, status.UNAVAILABLE);
    assert.match(call.error!.details!, /no longer owns 1 of the partitions/);
    assert.equal(placement.following, 0);
    assert.equal(storeListeners(), 0);
    await store.close();
  });
});
