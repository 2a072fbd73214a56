// A received key that does not decode here (a type a later version serves, or an encoding this
// version refuses) is left out on its own: the frame's or stream's other keys are applied, and the
// partition that held it is not acknowledged, so the sender keeps it (its delta buffer, or the
// partition it would hand off) and sends it again. Structural faults still refuse everything.
// GossipExchange on a real LevelDB store.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { AWSet, AWSetLattice, ObjectType, contextToProto } from "../../services/crdt/index.ts";
import { type GossipFrame, type KeyState, PayloadKind, StateChunk } from "../../services/gen/deltaset/v1/gossip.ts";
import { GossipExchange } from "../../services/gossip/exchange.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { Store } from "../../services/store/store.ts";
import { createLogger } from "../../services/common/logger.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-undecodable-"));
after(() => rmSync(root, { recursive: true, force: true }));
const P = 16;
const UNKNOWN_TYPE = 99 as ObjectType;

/** Keys named `${prefix}-${i}`, the first two in one partition and the third in another. */
function keysOf(prefix: string): [string, string, string] {
  const all = Array.from({ length: 400 }, (_, i) => `${prefix}-${i}`);
  const a = all[0]!;
  const b = all.find((k) => k !== a && partitionOf(k, P) === partitionOf(a, P))!;
  const c = all.find((k) => partitionOf(k, P) !== partitionOf(a, P))!;
  return [a, b, c];
}

const encoded = (s: AWSet) => Buffer.from(AWSetLattice.encode(s));
/** A chunk's slice: the state's entries, its context travels beside them. */
const sliceOf = (s: AWSet) => encoded(AWSet.fromParts(s.entries, AWSet.bottom().ctx));
const withElement = (e: string) => AWSet.bottom().add("z", [Buffer.from(e)]);

async function open(name: string) {
  const store = await Store.open({ dir: join(root, name), nodeId: "a", partitions: P, partitionOf, sync: "fsync" });
  const x = await GossipExchange.create(
    { store, log: createLogger("error"), cluster: "t", partitions: P, sync: { algorithm: 2, bp: true, rr: true, maxBufferBytes: 1 << 20 }, stateChunkEntries: 100, maxMessageBytes: 4 << 20, boot: 7n, random: () => 0.5 },
    (id) => id === "b",
  );
  return { store, x };
}

async function members(store: Store, key: string): Promise<string[]> {
  const s = await store.readState(key);
  return s === undefined ? [] : (s.state as AWSet).elements().map((e) => e.toString()).sort();
}

function frame(payloads: GossipFrame["payloads"]): GossipFrame {
  return { cluster: "t", from: "b", partitions: P, boot: 3n, frameId: 1n, acks: [], dropped: [], leaving: false, mac: Buffer.alloc(0), payloads };
}

function wholeKeyChunk(first: boolean, key: string, type: ObjectType, payload: Buffer, ctx: AWSet["ctx"]): StateChunk {
  const sender = first ? { cluster: "t", from: "b", partitions: P } : {};
  return StateChunk.fromPartial({ ...sender, partition: partitionOf(key, P), seq: 4n, key, type, context: contextToProto(ctx), rangeOpen: true, slice: { type, payload }, keyDone: true, boot: 3n });
}

function partitionEnd(partition: number): StateChunk {
  return StateChunk.fromPartial({ partition, seq: 4n, boot: 3n, partitionDone: true });
}

describe("a received key that does not decode", () => {
  it("in a delta frame: the other keys are applied, its partition alone goes unacked", async () => {
    const { store, x } = await open("frame");
    try {
      const [sameA, sameB, other] = keysOf("f");
      const pa = partitionOf(sameA, P);
      const pc = partitionOf(other, P);
      const ok = (key: string): KeyState => ({ key, state: { type: ObjectType.AWSET, payload: encoded(withElement(`${key}-e`)) } });
      const answer = await x.receiveFrame(
        frame([
          // One key of a type this node does not serve beside a good key of the same partition,
          { partition: pa, kind: PayloadKind.DELTA, seq: 5n, keys: [ok(sameA), { key: sameB, state: { type: UNKNOWN_TYPE, payload: Buffer.from([1, 2, 3]) } }].sort((l, r) => (l.key < r.key ? -1 : 1)) },
          // and a good key in another partition.
          { partition: pc, kind: PayloadKind.DELTA, seq: 6n, keys: [ok(other)] },
        ]),
      );
      assert.ok("reply" in answer, "refused" in answer ? answer.refused.details : "");
      assert.deepEqual(answer.reply.acks.map((a) => [a.partition, Number(a.seq)]), [[pc, 6]]);
      assert.deepEqual(await members(store, sameA), [`${sameA}-e`]);
      assert.deepEqual(await members(store, other), [`${other}-e`]);
      assert.equal(await store.typeOf(sameB), undefined);
      assert.equal(x.counters.undecodableStates, 1);

      // A known type whose encoding this version refuses is left out the same way.
      const again = await x.receiveFrame(frame([{ partition: pa, kind: PayloadKind.DELTA, seq: 8n, keys: [{ key: sameB, state: { type: ObjectType.AWSET, payload: Buffer.from([1, 2, 3, 4, 5]) } }] }]));
      assert.ok("reply" in again);
      assert.deepEqual(again.reply.acks, []);
      assert.equal(x.counters.undecodableStates, 2);

      // Structural faults still refuse the whole frame.
      const twice = await x.receiveFrame(frame([{ partition: pc, kind: PayloadKind.DELTA, seq: 9n, keys: [ok(other), ok(other)] }]));
      assert.ok("refused" in twice);
    } finally {
      await store.close();
    }
  });

  it("in a full-state stream: the stream goes on, its partition alone goes unacked", async () => {
    const { store, x } = await open("stream");
    try {
      const [sameA, sameB, other] = keysOf("s");
      const pa = partitionOf(sameA, P);
      const pc = partitionOf(other, P);
      const good = (key: string) => withElement(`${key}-e`);
      const [first, second] = [sameA, sameB].sort();
      const chunks: StateChunk[] = [
        first === sameA
          ? wholeKeyChunk(true, sameA, ObjectType.AWSET, sliceOf(good(sameA)), good(sameA).ctx)
          : wholeKeyChunk(true, sameB, UNKNOWN_TYPE, Buffer.from([7, 7]), AWSet.bottom().ctx),
        second === sameA
          ? wholeKeyChunk(false, sameA, ObjectType.AWSET, sliceOf(good(sameA)), good(sameA).ctx)
          : wholeKeyChunk(false, sameB, UNKNOWN_TYPE, Buffer.from([7, 7]), AWSet.bottom().ctx),
        partitionEnd(pa),
        wholeKeyChunk(false, other, ObjectType.AWSET, sliceOf(good(other)), good(other).ctx),
        partitionEnd(pc),
      ];
      const answer = await x.receiveStateStream(chunks);
      console.log(JSON.stringify(answer, (k, v) => typeof v === "bigint" ? String(v) : v), pa, pc);
      assert.ok("reply" in answer, "refused" in answer ? answer.refused.details : "");
      assert.deepEqual(answer.reply.acks.map((a) => [a.partition, Number(a.seq)]), [[pc, 4]]);
      assert.deepEqual(await members(store, sameA), [`${sameA}-e`]);
      assert.deepEqual(await members(store, other), [`${other}-e`]);
      assert.equal(await store.typeOf(sameB), undefined);
      assert.equal(x.counters.undecodableStates, 1);
    } finally {
      await store.close();
    }
  });
});
