// The chunk-transfer hold rule (gossip/chunking.ts): while a key's chunks arrive, other merges into
// that key wait (Store.beginTransfer). Without the wait, a merge bringing an add the sender had
// already removed into a range applied earlier survives the sender's context and the element
// stays on the receiver alone, for good.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { AWSet, type CausalContext, ObjectType } from "../../services/crdt/index.ts";
import { type StateChunk, Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-hold-"));
after(() => rmSync(root, { recursive: true, force: true }));
const open = (name: string) => Store.open({ dir: join(root, name), nodeId: name, partitions: 1, partitionOf: () => 0, sync: "buffered" });
const b = (s: string) => Buffer.from(s);

async function elements(s: Store, key: string): Promise<string[]> {
  const st = await s.readState(key);
  return st === undefined ? [] : (st.state as AWSet).elements().map((e) => e.toString()).sort();
}

it("a merge into a key waits while the key's chunks arrive, so a removal the sender saw is not missed", async () => {
  const sender = await open("sender");
  const receiver = await open("receiver");
  try {
    // A third replica added "0"; the sender received it and removed it; the receiver has not heard of it.
    const third = AWSet.bottom().add("third~1", [b("0")]);
    await sender.merge("k", ObjectType.AWSET, third);
    await sender.remove("k", [b("0")]);
    await sender.add("k", [b("a"), b("z")]);
    const chunks: StateChunk[] = [];
    for await (const c of sender.stateChunks("k", { maxEntries: 1, maxBytes: Number.MAX_SAFE_INTEGER })) chunks.push(c);
    assert.ok(chunks.length >= 2, "the state moves in several chunks");
    const ctx: CausalContext = chunks[0]!.ctx!;
    const apply = (c: StateChunk) =>
      receiver.applyChunk("k", { type: c.type, senderCtx: ctx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: c.slice });

    const release = await receiver.beginTransfer("k");
    await apply(chunks[0]!); // the range holding "0" is applied first
    let merged = false;
    const late = receiver.merge("k", ObjectType.AWSET, third).then(() => (merged = true));
    for (const c of chunks.slice(1)) await apply(c);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(merged, false, "the merge waited for the transfer");
    await receiver.finishKey("k", ObjectType.AWSET, ctx);
    release();
    await late;
    assert.deepEqual(await elements(receiver, "k"), await elements(sender, "k"));
    assert.deepEqual(await elements(receiver, "k"), ["a", "z"]);
  } finally {
    await Promise.all([sender.close(), receiver.close()]);
  }
});

it("transfers of one key from two senders run one after the other", async () => {
  const s = await open("solo");
  try {
    const first = await s.beginTransfer("k");
    let second = false;
    const next = s.beginTransfer("k").then((release) => {
      second = true;
      return release;
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(second, false);
    first();
    (await next)();
    assert.equal(second, true);
  } finally {
    await s.close();
  }
});

it("a chunk, a state snapshot and a key read do not wait for the store to fall idle: writers that never pause hold none of them", async () => {
  const sender = await open("busy-sender");
  const receiver = await open("busy-receiver");
  try {
    await sender.add("k", [b("a"), b("b"), b("c")]);
    const chunks: StateChunk[] = [];
    for await (const c of sender.stateChunks("k", { maxEntries: 1, maxBytes: Number.MAX_SAFE_INTEGER })) chunks.push(c);
    // Eight writers of other keys keep the group commit busy, each adding again as soon as its
    // last add is durable, until the transfer is done or 20 000 adds were made (then it waited for
    // them to stop: the queue was never empty before).
    let done = false;
    let adds = 0;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      while (!done && adds < 20_000) await receiver.add(`busy-${w}`, [b(`e${adds++}`)]);
    });
    await new Promise((r) => setTimeout(r, 20)); // the writers are running
    const ctx = chunks[0]!.ctx!;
    for (const c of chunks) await receiver.applyChunk("k", { type: c.type, senderCtx: ctx, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd, rangeOpen: c.rangeOpen, slice: c.slice });
    await receiver.finishKey("k", ObjectType.AWSET, ctx);
    for await (const c of receiver.stateChunks("busy-0", { maxEntries: 1000, maxBytes: Number.MAX_SAFE_INTEGER })) assert.ok(c);
    assert.deepEqual(await elements(receiver, "k"), ["a", "b", "c"]);
    const during = adds;
    done = true;
    await Promise.all(writers);
    assert.ok(during < 20_000, `the transfer finished while the writers ran (after ${during} adds)`);
  } finally {
    await Promise.all([sender.close(), receiver.close()]);
  }
});
