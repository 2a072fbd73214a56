// The gossip buffer takes changes in the order the store took them where a received frame and
// local operations meet (local-gate.ts): a local change made while a frame is being joined goes
// in after that frame's new parts, and waits for no other frame.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { AWSet, ObjectType } from "../../services/crdt/index.ts";
import { type GossipFrame, PayloadKind } from "../../services/gen/deltaset/v1/gossip.ts";
import { GossipExchange } from "../../services/gossip/exchange.ts";
import { keyedToProto } from "../../services/gossip/keyed-states.ts";
import { LocalGate } from "../../services/gossip/local-gate.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { createLogger } from "../../services/common/logger.ts";

describe("LocalGate", () => {
  it("releases at once while no frame is being joined", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    g.offer("a");
    assert.deepEqual(out, ["a"]);
    assert.equal(g.waiting, 0);
  });

  it("holds a change until the frames open when it came are closed, in order", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    const f1 = g.openGate();
    g.offer("a"); // waits for f1
    const f2 = g.openGate();
    g.offer("b"); // waits for f1 and f2
    assert.deepEqual(out, []);
    g.closeGate(f1);
    assert.deepEqual(out, ["a"], "a waited for f1 only");
    g.offer("c"); // f2 still open: behind b
    g.closeGate(f2);
    assert.deepEqual(out, ["a", "b", "c"]);
    assert.equal(g.waiting, 0);
  });

  it("keeps order: a change behind a held one waits even when its own frames are done", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    const f1 = g.openGate();
    g.offer("a"); // waits for f1
    const f2 = g.openGate();
    g.closeGate(f1); // releases a
    g.offer("b"); // waits for f2
    const f3 = g.openGate();
    g.closeGate(f2); // releases b
    g.offer("c"); // waits for f3
    g.closeGate(f3);
    assert.deepEqual(out, ["a", "b", "c"]);
  });

  it("a change offered before a frame opens does not wait for it", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    g.offer("a");
    g.openGate();
    assert.deepEqual(out, ["a"]);
  });
});

describe("GossipExchange: a local change during a frame's joins", () => {
  it("enters the Algorithm 2 buffer after the frame's new parts, as the store took them", async () => {
    const P = 4;
    const store = await Store.open({ dir: "memory", nodeId: "a", partitions: P, partitionOf, sync: "buffered" });
    try {
      const x = await GossipExchange.create(
        { store, log: createLogger("error"), cluster: "t", partitions: P, sync: { algorithm: 2, bp: true, rr: true, maxBufferBytes: 1 << 20 }, stateChunkEntries: 100, maxMessageBytes: 4 << 20, boot: 7n, random: () => 0.5 },
        (id) => id === "b" || id === "c",
      );
      x.engine.setNeighbours(["b", "c"]);
      const key = "k";
      const p = partitionOf(key, P);
      const received = AWSet.bottom().add("z", [Buffer.from("from-b")]);
      const frame: GossipFrame = {
        cluster: "t", from: "b", partitions: P, boot: 3n, frameId: 1n, acks: [], dropped: [], mac: Buffer.alloc(0),
        payloads: [{ partition: p, kind: PayloadKind.DELTA, seq: 1n, keys: keyedToProto(new Map([[key, { type: ObjectType.AWSET, state: received }]]), Date.now()) }],
      };
      const answering = x.receiveFrame(frame); // joins the key: awaits the store
      const local = AWSet.bottom().add("a", [Buffer.from("local")]);
      x.local(key, ObjectType.AWSET, local); // made while the frame is being joined
      const answer = await answering;
      assert.ok("reply" in answer);
      const origins = x.engine.buffered(p).map((e) => e.origin);
      assert.equal(origins.length, 2, `buffered: ${origins.join(", ")}`);
      assert.equal(origins[0], "b", "the frame's new part first");
      assert.notEqual(origins[1], "b", "then the local change");
      // With nothing being joined, a local change goes in at once.
      x.local(key, ObjectType.AWSET, AWSet.bottom().add("a", [Buffer.from("later")]));
      assert.equal(x.engine.buffered(p).length, 3);
    } finally {
      await store.close();
    }
  });
});
