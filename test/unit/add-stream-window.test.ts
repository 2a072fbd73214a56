// AddStream's window, on the call handler itself with a stand-in for the gRPC stream and a real
// in-memory store whose adds are held back: the stream is paused once its unacknowledged batches
// reach --stream-window or their bytes reach --stream-window-bytes, whichever comes first, a
// batch larger than the byte window is still taken (alone), and acks reopen the window.
import { strict as assert } from "node:assert";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import type { ServerDuplexStream } from "@grpc/grpc-js";
import type { AddStreamAck, AddStreamRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { partitionOf } from "../../services/gossip/index.ts";
import { addStreamCall } from "../../services/replica/add-stream.ts";
import type { Limits } from "../../services/replica/limits.ts";
import { testLimits } from "../helpers/limits.ts";
import { Store } from "../../services/store/store.ts";


/** The parts of a server duplex stream the handler uses: data in, acks out, pause and resume. */
class FakeCall extends EventEmitter {
  paused = false;
  acks: AddStreamAck[] = [];
  ended = false;
  pause() {
    this.paused = true;
  }
  resume() {
    this.paused = false;
  }
  isPaused() {
    return this.paused;
  }
  write(ack: AddStreamAck) {
    this.acks.push(ack);
    return true;
  }
  end() {
    this.ended = true;
  }
}

/** A store whose adds wait until release() lets the ones waiting so far go. */
async function heldStore(): Promise<{ store: Store; release: () => void }> {
  const store = await Store.open({ dir: "memory", nodeId: "w", partitions: 1, partitionOf, sync: "buffered" });
  const add = store.add.bind(store);
  const held: Array<() => void> = [];
  store.add = async (...args: Parameters<Store["add"]>) => {
    await new Promise<void>((r) => held.push(r));
    return add(...args);
  };
  return { store, release: () => held.splice(0).forEach((go) => go()) };
}

const settled = () => new Promise((r) => setTimeout(r, 20));

/** Let held adds go, round after round, until the stream acknowledged `seq` (at most 10 rounds). */
async function releaseUntil(call: FakeCall, release: () => void, seq: bigint): Promise<void> {
  for (let i = 0; i < 10 && call.acks.at(-1)?.seq !== seq; i++) {
    await settled();
    release();
    await settled();
  }
  assert.equal(call.acks.at(-1)?.seq, seq);
}

function start(store: Store, limits: Partial<Limits>): FakeCall {
  const call = new FakeCall();
  const handler = addStreamCall({ store, limits: testLimits({ maxElementsPerCall: 100, ...limits }), log: { debug() {}, info() {}, warn() {}, error() {} } as never, notify: () => {} });
  handler(call as unknown as ServerDuplexStream<AddStreamRequest, AddStreamAck>);
  return call;
}

const batch = (seq: number, elements: Buffer[]): AddStreamRequest => ({ key: "w", elements, texts: [], seq: BigInt(seq), ttlMs: undefined }) as AddStreamRequest;
describe("AddStream window", () => {
  it("pauses at --stream-window one-element batches, and acks reopen it", async () => {
    const { store, release } = await heldStore();
    const call = start(store, { streamWindow: 8 });
    for (let s = 1; s <= 7; s++) call.emit("data", batch(s, [Buffer.from(`e${s}`)]));
    assert.equal(call.paused, false, "7 of 8");
    call.emit("data", batch(8, [Buffer.from("e8")]));
    assert.equal(call.paused, true, "8 unacknowledged batches");
    await releaseUntil(call, release, 8n);
    assert.equal(call.paused, false);
    await store.close();
  });

  it("pauses at --stream-window-bytes first when batches are large; a batch larger than the window is taken alone", async () => {
    const { store, release } = await heldStore();
    const call = start(store, { streamWindow: 1000, streamWindowBytes: 1000 });
    const big = (s: number) => batch(s, [Buffer.alloc(300, s)]);
    // 300 bytes and framing each: three stay under 1000 bytes, the fourth reaches it.
    for (let s = 1; s <= 3; s++) call.emit("data", big(s));
    assert.equal(call.paused, false);
    call.emit("data", big(4));
    assert.equal(call.paused, true);
    await releaseUntil(call, release, 4n);
    assert.equal(call.paused, false, "acknowledged batches leave the window");
    // One batch past the byte window on its own: taken, then the stream waits for its ack.
    call.emit("data", batch(5, [Buffer.alloc(1000, 5), Buffer.alloc(500, 6)]));
    assert.equal(call.paused, true);
    await releaseUntil(call, release, 5n);
    assert.equal(call.paused, false);
    call.emit("end");
    await settled();
    assert.equal(call.ended, true);
    assert.equal((await store.describe("w"))?.size, 6);
    await store.close();
  });
});

describe("AddStream refusal behind waiting batches", () => {
  it("adds and acknowledges the batches received before a refused one, then ends with the refusal, though they were still waiting to start", async () => {
    const { store, release } = await heldStore();
    const call = start(store, {});
    let ended: { code?: number; details?: string } | undefined;
    call.on("error", (e: { code?: number; details?: string }) => (ended = e));
    // Six keys: six adds, of which four run at once and two wait for a free slot.
    const toKey = (s: number, e: Buffer) => ({ key: `k${s}`, elements: [e], texts: [], seq: BigInt(s), ttlMs: undefined }) as AddStreamRequest;
    for (let s = 1; s <= 6; s++) call.emit("data", toKey(s, Buffer.from(`e${s}`)));
    // Refused on arrival (an element over --max-element-bytes) while two batches still wait.
    call.emit("data", toKey(7, Buffer.alloc(2000, 7)));
    call.emit("data", toKey(8, Buffer.from("after")));
    await releaseUntil(call, release, 6n);
    await settled();
    assert.ok(ended !== undefined, "the stream ended with the refusal");
    assert.match(ended.details ?? "", /^batch seq 7: /);
    for (let s = 1; s <= 6; s++) assert.equal((await store.describe(`k${s}`))?.size, 1, `batch ${s} added`);
    assert.equal(await store.describe("k8"), undefined, "nothing after the refusal");
    await store.close();
  });
});

describe("AddStream add failure behind waiting batches", () => {
  it("starts none of the batches waiting for a slot once a running add failed, and ends naming the failed batch", async () => {
    const { store, release } = await heldStore();
    const started: string[] = [];
    const add = store.add.bind(store);
    store.add = async (key: string, ...rest: unknown[]) => {
      started.push(key);
      if (key === "bad") throw new Error("disk says no");
      return (add as (k: string, ...r: unknown[]) => ReturnType<Store["add"]>)(key, ...rest);
    };
    const call = start(store, {});
    let ended: { code?: number; details?: string; message?: string } | undefined;
    call.on("error", (e: { code?: number; details?: string }) => (ended = e));
    const toKey = (s: number, key: string) => ({ key, elements: [Buffer.from(`e${s}`)], texts: [], seq: BigInt(s), ttlMs: undefined }) as AddStreamRequest;
    // Four run at once (the first fails at once), the fifth waits for a slot.
    for (const [s, key] of ["bad", "k2", "k3", "k4", "k5"].entries()) call.emit("data", toKey(s + 1, key));
    await releaseUntil(call, release, 0n).catch(() => {});
    await settled();
    assert.ok(ended !== undefined, "the stream ended with the failure");
    assert.ok(!started.includes("k5"), `a batch received after the failed one was started: ${started.join(",")}`);
    await store.close();
  });
});
