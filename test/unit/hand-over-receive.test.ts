// Receiving deferred removes handed over by a node that no longer owns their keys
// (GossipExchange.receiveHandOver), on a real LevelDB store: a request is checked whole before
// anything is applied (sender, cluster, ownership of every key, contexts), a remove of an add held
// here takes effect at once and travels as a local delta, one of an add not seen waits as a
// deferred remove, durably, and taking the same request again changes nothing.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { AWSet, ObjectType, contextToProto } from "../../services/crdt/index.ts";
import type { HandOverRequest } from "../../services/gen/deltaset/v1/gossip.ts";
import { GossipExchange } from "../../services/gossip/exchange.ts";
import { Ownership } from "../../services/gossip/ownership.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { keyWhere } from "../helpers/placement.ts";
import { createLogger } from "../../services/common/logger.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-hand-over-"));
after(() => rmSync(root, { recursive: true, force: true }));
const P = 8;
const b = (s: string) => Buffer.from(s);


async function setup(name: string) {
  const dir = join(root, name);
  const open = () => Store.open({ dir, nodeId: "a", partitions: P, partitionOf, sync: "buffered" });
  const store = await open();
  // R = 1 with peers b and c: this node (a) owns some partitions, b and c the others.
  const own = new Ownership("a", "127.0.0.1:1", P, 1);
  own.setLive(new Map([["b", "127.0.0.1:2"], ["c", "127.0.0.1:3"]]));
  const x = await GossipExchange.create(
    {
      store,
      log: createLogger("error"),
      cluster: "t",
      partitions: P,
      sync: { algorithm: 2, bp: true, rr: true, maxBufferBytes: 1 << 20 },
      stateChunkEntries: 100,
      maxMessageBytes: 4 << 20,
      boot: 7n,
      random: () => 0.5,
      accepts: (p) => own.owns(p),
    },
    (id) => id === "b" || id === "c",
  );
  return { store, own, x, open };
}

async function members(store: Store, key: string): Promise<string[]> {
  const s = await store.readState(key);
  return s === undefined ? [] : (s.state as AWSet).elements().map((e) => e.toString()).sort();
}

/** A delta adding elements under a replica id nobody else uses. */
const addsElsewhere = (...elements: string[]) => AWSet.bottom().add("z", elements.map(b));

function request(removes: HandOverRequest["removes"], over: Partial<HandOverRequest> = {}): HandOverRequest {
  return { cluster: "t", from: "b", partitions: P, removes, ...over };
}

describe("receiving a hand-over of deferred removes", () => {
  it("applies what it can now, keeps the rest pending durably, and a repeat changes nothing", async () => {
    const { store, own, x, open } = await setup("apply");
    const held = keyWhere((p) => own.owns(p), "held", P);
    const waits = keyWhere((p) => own.owns(p) && partitionOf(held, P) !== p, "waits", P);
    const adds = addsElsewhere("x", "y");
    await store.merge(held, ObjectType.AWSET, adds); // the add of x (and y) is held here
    const seqBefore = x.engine.seq(partitionOf(held, P));
    const unseen = contextToProto(addsElsewhere("x").ctx);
    const req = request([
      { key: held, element: b("x"), unseen },
      { key: waits, element: b("x"), unseen },
    ]);
    const a = await x.receiveHandOver(req);
    assert.ok("reply" in a, JSON.stringify(a));
    assert.deepEqual(a.reply, { from: "a", pending: 1 });
    assert.deepEqual(await members(store, held), ["y"]);
    assert.equal(x.engine.seq(partitionOf(held, P)), seqBefore + 1, "the remove of a held add goes out as a local delta");
    assert.equal(store.pendingRemoves(held), 0);
    assert.equal(store.pendingRemoves(waits), 1);
    assert.equal(x.counters.removesTakenOver, 2);
    // Taken again (a retry after a lost reply): nothing more waits, nothing else changes.
    const again = await x.receiveHandOver(req);
    assert.ok("reply" in again);
    assert.equal(store.pendingRemoves(waits), 1);
    // Durable: a reopened store still waits, and removes the add when it comes.
    await store.close();
    const reopened = await open();
    try {
      assert.equal(reopened.pendingRemoves(waits), 1);
      await reopened.merge(waits, ObjectType.AWSET, addsElsewhere("x", "y"));
      assert.deepEqual(await members(reopened, waits), ["y"]);
      assert.equal(reopened.pendingRemoves(waits), 0);
    } finally {
      await reopened.close();
    }
  });

  it("refuses the whole request, changing nothing, when any part is wrong", async () => {
    const { store, own, x } = await setup("refuse");
    const mine = keyWhere((p) => own.owns(p), "mine", P);
    const theirs = keyWhere((p) => !own.owns(p), "theirs", P);
    const counter = keyWhere((p) => own.owns(p), "counter", P);
    await store.increment(counter, 1n);
    const unseen = contextToProto(addsElsewhere("x").ctx);
    const ok = { key: mine, element: b("x"), unseen };
    const cases: Array<[string, HandOverRequest, status]> = [
      ["a key of a partition owned elsewhere", request([ok, { key: theirs, element: b("x"), unseen }]), status.FAILED_PRECONDITION],
      ["an unknown sender", request([ok], { from: "mallory" }), status.PERMISSION_DENIED],
      ["another cluster", request([ok], { cluster: "other" }), status.FAILED_PRECONDITION],
      ["another partition count", request([ok], { partitions: P * 2 }), status.FAILED_PRECONDITION],
      ["a key holding a COUNTER here", request([ok, { key: counter, element: b("x"), unseen }]), status.FAILED_PRECONDITION],
      ["an empty element", request([ok, { key: mine, element: b(""), unseen }]), status.INVALID_ARGUMENT],
      ["a malformed context", request([ok, { key: mine, element: b("y"), unseen: { vv: [{ replica: "z", counter: 2n }, { replica: "a", counter: 1n }], cloud: [] } }]), status.INVALID_ARGUMENT],
    ];
    for (const [what, req, code] of cases) {
      const a = await x.receiveHandOver(req);
      assert.ok("refused" in a, `${what}: accepted`);
      assert.equal(a.refused.code, code, `${what}: ${a.refused.details}`);
    }
    assert.equal(store.pendingRemoves(mine), 0, "nothing of a refused request was applied");
    assert.equal(await store.readState(mine), undefined);
    assert.equal(x.counters.removesTakenOver, 0);
    await store.close();
  });
});
