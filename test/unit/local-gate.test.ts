// The gossip buffer takes changes in the order the store took them where received payloads and
// local operations meet (local-gate.ts): a local change made while a frame of its partition is
// being joined goes in after that frame's new parts, and waits for nothing else.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { AWSet, ObjectType } from "../../services/crdt/index.ts";
import { type GossipFrame, PayloadKind, type StateChunk } from "../../services/gen/deltaset/v1/gossip.ts";
import { GossipExchange } from "../../services/gossip/exchange.ts";
import { keyedToProto } from "../../services/gossip/keyed-states.ts";
import { LocalGate } from "../../services/gossip/local-gate.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { createLogger } from "../../services/common/logger.ts";

describe("LocalGate", () => {
  it("releases at once while nothing of the partition is being joined", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    g.offer(0, "a");
    g.openGate(1);
    g.offer(0, "b"); // a gate of another partition
    assert.deepEqual(out, ["a", "b"]);
    assert.equal(g.waiting, 0);
  });

  it("holds a change until the gates of its partition open when it came are closed, in order", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    const f1 = g.openGate(0);
    g.offer(0, "a"); // waits for f1
    const f2 = g.openGate(0);
    g.offer(0, "b"); // waits for f1 and f2
    assert.deepEqual(out, []);
    assert.equal(g.holds(0), true, "partition 0 has changes waiting (hand-off does not drop it)");
    assert.equal(g.holds(1), false);
    g.closeGate(f1);
    assert.deepEqual(out, ["a"], "a waited for f1 only");
    g.offer(0, "c"); // f2 still open: behind b
    g.closeGate(f2);
    assert.deepEqual(out, ["a", "b", "c"]);
    assert.equal(g.waiting, 0);
    assert.equal(g.holds(0), false);
  });

  it("keeps a partition's order: a change behind a held one waits even when its own gates are closed", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    const f1 = g.openGate(0);
    g.offer(0, "a"); // waits for f1
    const f2 = g.openGate(0);
    g.closeGate(f1); // releases a
    g.offer(0, "b"); // waits for f2
    const f3 = g.openGate(0);
    g.closeGate(f2); // releases b
    g.offer(0, "c"); // waits for f3
    g.closeGate(f3);
    assert.deepEqual(out, ["a", "b", "c"]);
  });

  it("partitions wait apart: closing one partition's gate releases only its changes", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    const p0 = g.openGate(0);
    const p1 = g.openGate(1);
    g.offer(0, "a0");
    g.offer(1, "a1");
    g.closeGate(p1);
    assert.deepEqual(out, ["a1"]);
    g.closeGate(p0);
    assert.deepEqual(out, ["a1", "a0"]);
    g.closeGate(p0); // closing twice changes nothing
    assert.equal(g.waiting, 0);
  });

  it("released: resolves once every change of the partition held so far is in (a write waiting for copies needs its seq)", async () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    let free = false;
    await g.released(0).then(() => (free = true));
    assert.equal(free, true, "nothing held: at once");
    const f = g.openGate(0);
    g.offer(0, "a");
    let done = false;
    void g.released(0).then(() => (done = true));
    void g.released(1).then(() => out.push("partition 1 free"));
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, "a is still held");
    assert.deepEqual(out, ["partition 1 free"]);
    g.closeGate(f);
    await new Promise((r) => setImmediate(r));
    assert.equal(done, true);
    assert.deepEqual(out, ["partition 1 free", "a"]);
  });

  it("a change offered before a gate opens does not wait for it", () => {
    const out: string[] = [];
    const g = new LocalGate<string>((x) => out.push(x));
    g.offer(0, "a");
    g.openGate(0);
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
        cluster: "t", from: "b", partitions: P, boot: 3n, frameId: 1n, acks: [], dropped: [], leaving: false, mac: Buffer.alloc(0),
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

describe("GossipExchange: a local change during a full-state stream", () => {
  it("enters the buffer after the new parts of the partition being streamed", async () => {
    const P = 4;
    const key = "k";
    const p = partitionOf(key, P);
    const open = (id: string) => Store.open({ dir: "memory", nodeId: id, partitions: P, partitionOf, sync: "buffered" });
    const exchangeOf = (store: Store, peers: string[]) =>
      GossipExchange.create(
        { store, log: createLogger("error"), cluster: "t", partitions: P, sync: { algorithm: 2, bp: true, rr: true, maxBufferBytes: 1 << 20 }, stateChunkEntries: 100, maxMessageBytes: 4 << 20, boot: 7n, random: () => 0.5 },
        (id) => peers.includes(id),
      );
    const [sa, sb] = await Promise.all([open("a"), open("b")]);
    try {
      const xa = await exchangeOf(sa, ["b", "c"]);
      xa.engine.setNeighbours(["b", "c"]);
      const xb = await exchangeOf(sb, ["a"]);
      xb.engine.setNeighbours(["a"]);
      await sb.add(key, [Buffer.from("from-b")]);
      const chunks: StateChunk[] = [];
      for await (const c of xb.stateStream([{ partition: p, seq: 1 }])) chunks.push(c);
      assert.ok(chunks.length >= 2, "a key chunk and the partition's end");
      async function* stream() {
        yield chunks[0]!;
        // A local change of the partition while its chunks are joined.
        xa.local(key, ObjectType.AWSET, AWSet.bottom().add("a", [Buffer.from("local")]));
        yield* chunks.slice(1);
      }
      const answer = await xa.receiveStateStream(stream());
      assert.ok("reply" in answer);
      const origins = xa.engine.buffered(p).map((e) => e.origin);
      assert.deepEqual(origins.length, 2, `buffered: ${origins.join(", ")}`);
      assert.equal(origins[0], "b", "the streamed partition's new part first");
      assert.notEqual(origins[1], "b", "then the local change");
    } finally {
      await Promise.all([sa.close(), sb.close()]);
    }
  });
});
