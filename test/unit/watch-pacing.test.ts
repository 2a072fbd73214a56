// Watch's catch-up on the call handler itself, with a stand-in for the gRPC stream whose transport
// takes one event and then asks to wait: a catch-up of many chunks is read at the pace the stream
// drains, so it never overflows --watch-buffer however large the key; changes made meanwhile wait
// behind it, and past --watch-buffer of them the watcher is ended with RESOURCE_EXHAUSTED.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import type { ServerWritableStream } from "@grpc/grpc-js";
import type { KeyEvent, WatchKeysRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { partitionOf } from "../../services/gossip/index.ts";
import { watchCall } from "../../services/replica/watch-calls.ts";
import { Store } from "../../services/store/store.ts";
import { testLimits } from "../helpers/limits.ts";
import { WatchCallStandIn } from "../helpers/watch-streams.ts";

const tick = () => new Promise((r) => setImmediate(r));

async function storeWith(n: number): Promise<Store> {
  const store = await Store.open({ dir: "memory", nodeId: "w", partitions: 1, partitionOf, sync: "buffered" });
  for (let i = 0; i < n; i += 500) await store.add("k", Array.from({ length: Math.min(500, n - i) }, (_, j) => Buffer.from(`e${i + j}`)));
  return store;
}

describe("Watch catch-up pacing", () => {
  it("sends a catch-up of 20 chunks through a stream that drains one event at a time, with a watch buffer of 3", async () => {
    const store = await storeWith(2000);
    const call = new WatchCallStandIn({ key: "k", prefix: "", since: undefined } as WatchKeysRequest, true);
    void watchCall({ store, limits: testLimits({ watchBuffer: 3, defaultExportChunk: 100 }), log: { debug() {}, info() {}, warn() {}, error() {} } as never })(
      call as unknown as ServerWritableStream<WatchKeysRequest, KeyEvent>,
    );
    for (let i = 0; i < 200 && !call.events.some((e) => e.catchUp?.last === true) && call.error === undefined; i++) {
      await tick();
      call.drain();
    }
    assert.equal(call.error, undefined, JSON.stringify(call.error));
    assert.equal(call.events.filter((e) => e.catchUp !== undefined).length, 20);
    await store.close();
  });

  it("ends a watcher whose catch-up is slower than the changes: past --watch-buffer changes held, RESOURCE_EXHAUSTED", async () => {
    const store = await storeWith(2000);
    const call = new WatchCallStandIn({ key: "k", prefix: "", since: undefined } as WatchKeysRequest, true);
    void watchCall({ store, limits: testLimits({ watchBuffer: 3, defaultExportChunk: 100 }), log: { debug() {}, info() {}, warn() {}, error() {} } as never })(
      call as unknown as ServerWritableStream<WatchKeysRequest, KeyEvent>,
    );
    await tick();
    for (let i = 0; i < 5; i++) await store.add("k", [Buffer.from(`new${i}`)]);
    await tick();
    assert.equal(call.error?.code, 8);
    assert.match(call.error?.details ?? "", /fell 3 changes behind during its catch-up/);
    await store.close();
  });
});
