// Changes made at a node are pushed at once under --gossip-push-local-ms, not a gossip period later,
// also where they do not come straight from a client call: a local change that waited behind a
// received frame of its partition (local-gate.ts), and a deferred remove that a received add makes
// take effect. Two in-process nodes' gossip on real gRPC servers on loopback, Algorithm 2 with a
// 10-minute period, so within the tests only pushes move changes.
import { strict as assert } from "node:assert";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, CausalContext, ObjectType } from "../../services/crdt/index.ts";
import { GossipService } from "../../services/gen/deltaset/v1/gossip.ts";
import { createLogger } from "../../services/common/logger.ts";
import { NodeGossip } from "../../services/gossip/node-gossip.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { eventually } from "../helpers/eventually.ts";

const HOST = "127.0.16.1";
const quiet = createLogger("error", {}, () => {});
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

const text = (s: string) => new TextEncoder().encode(s);
const elementsOf = async (store: Store, key: string) => {
  const held = await store.readState(key);
  return held === undefined ? [] : (held.state as AWSet).elements().map((e) => e.toString()).sort();
};

/** A store whose merges (the joins of received frames) wait while `held` is set; `started` resolves at the first one held. */
function holdingMerges(store: Store) {
  let release!: () => void;
  const held = { on: false, gate: new Promise<void>((r) => (release = r)), started: undefined as Promise<void> | undefined };
  let began!: () => void;
  held.started = new Promise<void>((r) => (began = r));
  const proxy = new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (prop === "merge") {
        return async (...args: Parameters<Store["merge"]>) => {
          if (held.on) {
            began();
            await held.gate;
          }
          return target.merge(...args);
        };
      }
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store: proxy, held, release };
}

const openStore = async (id: string) => {
  const store = await Store.open({ dir: "memory", nodeId: id, partitions: 1, partitionOf, sync: "buffered" });
  closers.push(() => store.close());
  return store;
};

async function node(id: string, port: number, store: Store): Promise<{ gossip: NodeGossip; address: string }> {
  const gossip = await NodeGossip.create({
    store,
    log: quiet,
    cluster: "deltaset",
    partitions: 1,
    intervalMs: 600_000, // within the test only pushes move changes
    algorithm: "alg2",
    bp: true,
    rr: true,
    maxBufferBytes: 1 << 20,
    stateChunkEntries: 1000,
    rpcTimeoutMs: 5000,
    maxMessageBytes: 4 << 20,
    pushLocalMs: 5,
  });
  const server = new grpc.Server();
  server.addService(GossipService, gossip.service());
  const address = `${HOST}:${port}`;
  await new Promise<void>((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  closers.push(async () => {
    await gossip.stop();
    server.forceShutdown();
  });
  return { gossip, address };
}

describe("a local change held behind a received frame", () => {
  it("is pushed once the frame's join ends, not a period later", async () => {
    const storeA = await openStore("a");
    const storeB = await openStore("b");
    const holdA = holdingMerges(storeA);
    const a = await node("a", 7611, holdA.store);
    const b = await node("b", 7612, storeB);
    a.gossip.setPeers(new Map([["a", a.address], ["b", b.address]]));
    b.gossip.setPeers(new Map([["a", a.address], ["b", b.address]]));

    // Both directions work while nothing is held.
    const first = await storeA.add("k0", [text("from-a")]);
    a.gossip.onLocalDelta("k0", ObjectType.AWSET, first.delta);
    await eventually("a's first change at b", () => elementsOf(storeB, "k0"), (e) => e.join() === "from-a", 5000);

    // b's change reaches a, whose join of it is held; meanwhile a client's change lands at a.
    holdA.held.on = true;
    const fromB = await storeB.add("k1", [text("from-b")]);
    b.gossip.onLocalDelta("k1", ObjectType.AWSET, fromB.delta);
    await holdA.held.started;
    const local = await storeA.add("k2", [text("made-at-a")]);
    a.gossip.onLocalDelta("k2", ObjectType.AWSET, local.delta);
    // The push timer (5 ms) runs while the change still waits behind the frame: nothing to push yet.
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(await elementsOf(storeB, "k2"), [], "the change waiting behind the frame was not in the buffer");

    holdA.release();
    await eventually("b's change at a", () => elementsOf(storeA, "k1"), (e) => e.join() === "from-b", 5000);
    await eventually("a's held change at b", () => elementsOf(storeB, "k2"), (e) => e.join() === "made-at-a", 5000);
  });
});

describe("a deferred remove that a received add lets take effect", () => {
  it("is pushed at once to the node that made the add", async () => {
    const storeA = await openStore("a");
    const storeB = await openStore("b");
    const a = await node("a", 7613, storeA);
    const b = await node("b", 7614, storeB);
    const both = new Map([["a", a.address], ["b", b.address]]);
    a.gossip.setPeers(both);
    b.gossip.setPeers(both);
    const base = await storeA.add("k", [text("base")]);
    a.gossip.onLocalDelta("k", ObjectType.AWSET, base.delta);
    await eventually("the key at b", () => elementsOf(storeB, "k"), (e) => e.join() === "base", 5000);

    // a adds "late" while b is not its neighbour; b takes a Remove of it with a context naming that add.
    a.gossip.setPeers(new Map([["a", a.address]]));
    const late = await storeA.add("k", [text("late")]);
    a.gossip.onLocalDelta("k", ObjectType.AWSET, late.delta);
    const r = await storeB.remove("k", [text("late")], CausalContext.of(late.dots));
    assert.equal(r.pending, 1, "the remove waits at b for the add it names");

    // b becomes a's neighbour again: a pushes the add, b's deferred remove takes effect, and b pushes that back.
    a.gossip.setPeers(both);
    await eventually("the add at b, which ends the deferred remove", async () => storeB.keysWithPendingRemoves(), (keys) => keys.length === 0, 5000);
    await eventually("the remove back at a", () => elementsOf(storeA, "k"), (e) => e.join() === "base", 5000);
  });
});
