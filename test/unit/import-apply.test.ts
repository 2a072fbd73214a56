// Import's checks on a real in-memory store: each refusal names what is wrong and leaves the key
// as it was before the refused chunk (a chunk after the last, another key or type mid-stream, a
// delta's removes on a chunk other than the last, an element over the size limit, a key of
// another type); the removes of a delta are joined only after the last chunk; what changed is
// handed to notify.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { type AWSet, ObjectType, contextToProto, CausalContext } from "../../services/crdt/index.ts";
import { partitionOf } from "../../services/gossip/index.ts";
import type { ExportChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { exportChunks } from "../../services/replica/export-stream.ts";
import { applyImport } from "../../services/replica/import-apply.ts";
import { testLimits } from "../helpers/limits.ts";
import { RpcError } from "../../services/replica/errors.ts";
import { TypeMismatchError } from "../../services/store/errors.ts";
import { Store } from "../../services/store/store.ts";

const LIMITS = testLimits({ maxKeyBytes: 64, maxElementBytes: 4, maxElementsPerCall: 100, defaultPageSize: 10, maxPageSize: 100, defaultScanChunk: 10, maxScanChunk: 100, defaultExportChunk: 10, maxExportChunk: 100, maxRequestIdBytes: 16 });

let n = 0;
const open = () => Store.open({ dir: "memory", nodeId: `i${n++}`, partitions: 1, partitionOf, sync: "buffered" });

async function exportOf(s: Store, key: string, maxEntries: number, since?: CausalContext): Promise<ExportChunk[]> {
  const out: ExportChunk[] = [];
  for await (const c of exportChunks(s, key, { maxEntries, maxBytes: 1 << 16, since })) out.push(c);
  return out;
}

async function* streamOf(chunks: ExportChunk[]) {
  yield* chunks;
}

const members = async (s: Store, key: string) => [...(((await s.readState(key))?.state as AWSet | undefined)?.entries.keys() ?? [])].sort();

/** A sender with elements a..f, chunks of two. */
async function sender(): Promise<{ s: Store; chunks: ExportChunk[] }> {
  const s = await open();
  await s.add("k", ["a", "b", "c", "d", "e", "f"].map((e) => Buffer.from(e)));
  return { s, chunks: await exportOf(s, "k", 2) };
}

async function refused(p: Promise<unknown>, text: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof RpcError && text.test(e.message));
}

describe("applyImport", () => {
  it("refuses a chunk after the last one, another key mid-stream, or a type change, keeping what came before", async () => {
    const { chunks } = await sender();
    assert.equal(chunks.length, 3);
    const to = await open();
    const deps = { store: to, limits: LIMITS, notify: () => {}, clockSkewBoundMs: 2000 };
    await refused(applyImport(deps, streamOf([...chunks, chunks[2]!])), /a chunk after the last one/);
    assert.deepEqual(await members(to, "k"), ["a", "b", "c", "d", "e", "f"]);
    await refused(applyImport(deps, streamOf([{ ...chunks[0]!, key: "j" }, { ...chunks[1]!, key: "other" }])), /chunk 1 names key "other"/);
    assert.deepEqual(await members(to, "j"), ["a", "b"]);
    await refused(applyImport(deps, streamOf([{ ...chunks[0]!, key: "h" }, { ...chunks[1]!, type: ObjectType.COUNTER }])), /of type COUNTER/);
    assert.deepEqual(await members(to, "h"), ["a", "b"]);
  });

  it("refuses removes on a chunk other than the last, and an element over the limit, applying nothing of the chunk", async () => {
    const { chunks } = await sender();
    const to = await open();
    const deps = { store: to, limits: LIMITS, notify: () => {}, clockSkewBoundMs: 2000 };
    const removed = contextToProto(CausalContext.of([{ replica: "x", counter: 1 }]));
    await refused(applyImport(deps, streamOf([{ ...chunks[0]!, removed }])), /chunk 0 is malformed: removed is carried by the last chunk/);
    assert.equal(await to.typeOf("k"), undefined);
    const big = await open();
    await big.add("k", [Buffer.from("toolong")]);
    await refused(applyImport(deps, streamOf(await exportOf(big, "k", 2))), /an element has 7 bytes; the limit is 4/);
    assert.equal(await to.typeOf("k"), undefined);
  });

  it("refuses a key of another type before applying anything", async () => {
    const { chunks } = await sender();
    const to = await open();
    await to.increment("k", 3n);
    await assert.rejects(applyImport({ store: to, limits: LIMITS, notify: () => {}, clockSkewBoundMs: 2000 }, streamOf(chunks)), TypeMismatchError);
    assert.equal((await to.counter("k"))!.value(), 3n);
  });

  it("joins a delta's removes after its last chunk and hands every change to notify", async () => {
    const { s, chunks } = await sender();
    const to = await open();
    await applyImport({ store: to, limits: LIMITS, notify: () => {}, clockSkewBoundMs: 2000 }, streamOf(chunks));
    await s.remove("k", [Buffer.from("b"), Buffer.from("e")]);
    await s.add("k", [Buffer.from("g")]);
    const delta = await exportOf(s, "k", 2, (await to.describe("k"))!.ctx);
    assert.equal(delta.length, 1);
    assert.ok(delta[0]!.removed !== undefined);
    const notified: ObjectType[] = [];
    const r = await applyImport({ store: to, limits: LIMITS, notify: (_k, t) => notified.push(t), clockSkewBoundMs: 2000 }, streamOf(delta));
    assert.equal(r.changed, true);
    assert.deepEqual(await members(to, "k"), ["a", "c", "d", "f", "g"]);
    assert.ok(notified.length >= 2 && notified.every((t) => t === ObjectType.AWSET), `notified ${notified}`);
  });
});
