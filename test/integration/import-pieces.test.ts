// A filter stored whole, larger than an export chunk, travels in pieces (ExportChunk.continued);
// the pieces of a Bloom filter decode in any order, so each carries its offset in the whole and
// the last one the SHA-256 of the whole. With real node processes: a GBF exported in some 17
// pieces and imported with two of them swapped is refused with INVALID_ARGUMENT and nothing of it
// is stored (no filter answering "absent" for elements it was given); in order it imports, as it
// does without the new fields (an export of an earlier version); the same pieces pushed by a peer
// as a full-state gossip stream are refused alike; and the CLI's binary stream carries the fields.
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, createReadStream, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { ObjectType } from "../../services/crdt/index.ts";
import { ExportChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { GossipClient, StateChunk, type StateReply } from "../../services/gen/deltaset/v1/gossip.ts";
import { MemberState } from "../../services/gen/deltaset/v1/membership.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { sha256 } from "../../services/common/chunk-pieces.ts";
import { delimited, readDelimited } from "../../services/cli/delimited.ts";
import { call, membershipClient } from "../../services/client/rpc.ts";
import { BIN, REPO, type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { expectRefused } from "../helpers/grpc-status.ts";
import { exportOf, importTo, withClient } from "../helpers/export-import.ts";
import { filterParams } from "../helpers/filter-calls.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-import-pieces-"));
const P = 16;
const FLAGS = ["--partitions", String(P), "--log-level", "warn", "--probe-interval-ms", "30000", "--probe-timeout-ms", "10000"];
let a: NodeProcess;
let b: NodeProcess;

const N = 20_000;
const PROBES = 2000;
/** Bytes of a piece: the filter's encoding (sparse while it is this empty) comes in some 17. */
const PIECE = 10_000;
const element = (i: number) => `el-${i}`;
/** Every 10th element added: the ones asked about. */
const probes = Array.from({ length: PROBES }, (_, i) => element(i * 10));

async function absentOf(addr: string, key: string, elements: string[]): Promise<number> {
  return withClient(addr, async (c) => {
    let absent = 0;
    for (let i = 0; i < elements.length; i += 1000) {
      const q = await call(c, c.query, { key, elements: elements.slice(i, i + 1000).map((e) => Buffer.from(e)), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
      absent += q.presence.filter((p) => !p.present).length;
    }
    return absent;
  });
}

/** The key does not exist on the node (Export answers NOT_FOUND). */
const expectMissing = (addr: string, key: string) => expectRefused(exportOf(addr, key), grpc.status.NOT_FOUND, /does not exist on this node/);

/** Pieces i and j swapped. */
function swapped<T>(xs: T[], i: number, j: number): T[] {
  const out = [...xs];
  [out[i], out[j]] = [out[j]!, out[i]!];
  return out;
}

let pieces: ExportChunk[] = [];

before(async () => {
  [a, b] = await Promise.all([
    startNodeProcess(["--listen", "127.0.19.1:0", "--node-id", "pa", "--data-dir", join(dir, "a"), ...FLAGS]),
    startNodeProcess(["--listen", "127.0.19.2:0", "--node-id", "pb", "--data-dir", join(dir, "b"), ...FLAGS]),
  ]);
  // A GBF for a million elements (some 1.2 MB) holding N of them.
  await withClient(a.address, async (c) => {
    for (let i = 0; i < N; i += 5000) {
      const elements = Array.from({ length: 5000 }, (_, j) => Buffer.from(element(i + j)));
      await call(c, c.add, { key: "seen", elements, texts: [], type: ObjectType.GBF, params: filterParams({ capacity: 1_000_000n }) }, { timeoutMs: 60_000 });
    }
  });
  pieces = await exportOf(a.address, "seen", { maxBytes: PIECE });
});

after(async () => {
  await Promise.all([a?.kill(), b?.kill()]);
  rmSync(dir, { recursive: true, force: true });
});

describe("a whole state exported in pieces", () => {
  it("each piece carries its offset in the whole, the last one the SHA-256 of the whole", () => {
    assert.ok(pieces.length >= 10, `${pieces.length} pieces`);
    assert.deepEqual(pieces.map((p) => p.continued), pieces.map((_, i) => i < pieces.length - 1));
    let at = 0n;
    for (const p of pieces) {
      assert.equal(p.pieceOffset, at);
      at += BigInt(p.slice!.payload.length);
    }
    assert.deepEqual(pieces.map((p) => p.payloadSha256 !== undefined), pieces.map((_, i) => i === pieces.length - 1));
    assert.deepEqual(pieces.at(-1)!.payloadSha256, sha256(Buffer.concat(pieces.map((p) => p.slice!.payload))));
  });

  it("Import refuses two pieces swapped with INVALID_ARGUMENT and stores nothing; in order it imports whole", async () => {
    await expectRefused(importTo(b.address, "swapped", swapped(pieces, 1, 2)), grpc.status.INVALID_ARGUMENT, new RegExp(`key "swapped" begins at byte ${2 * PIECE} of its state where byte ${PIECE} was due: its pieces are out of order.*nothing of it was applied`));
    await expectMissing(b.address, "swapped");
    // The last piece moved first, and a piece altered: refused alike.
    await expectRefused(importTo(b.address, "swapped", [pieces.at(-1)!, ...pieces.slice(0, -1)]), grpc.status.INVALID_ARGUMENT, /the first piece of key "swapped" begins at byte/);
    const altered = pieces.map((p, i) => (i === 3 ? { ...p, slice: { ...p.slice!, payload: Buffer.from(p.slice!.payload).fill(0xff, 0, 8) } } : p));
    await expectRefused(importTo(b.address, "swapped", altered), grpc.status.INVALID_ARGUMENT, /does not match the SHA-256 its last piece carries/);
    await expectMissing(b.address, "swapped");

    // The node keeps serving: the pieces in order import, and every element added answers present.
    const r = await importTo(b.address, "copy", pieces);
    assert.deepEqual({ changed: r.changed, chunks: r.chunks }, { changed: true, chunks: 1n });
    assert.equal(await absentOf(b.address, "copy", probes), 0);
  });

  it("an export without offsets or digest (an earlier version's) still imports in order", async () => {
    const old = pieces.map((p) => ({ ...p, pieceOffset: undefined, payloadSha256: undefined }));
    const r = await importTo(b.address, "old", old);
    assert.deepEqual({ changed: r.changed, chunks: r.chunks }, { changed: true, chunks: 1n });
    assert.equal(await absentOf(b.address, "old", probes), 0);
  });

  it("a peer's full-state stream with two pieces swapped is refused, and nothing of the key is applied", async () => {
    // Node b takes gossip from member "fake" (nobody listens at its address).
    const m = membershipClient(b.address);
    await call(m, m.join, { cluster: "deltaset", self: { nodeId: "fake", address: "127.0.19.3:1", state: MemberState.ALIVE, incarnation: 1n, sinceUnixMs: 0n } });
    m.close();
    const gossip = new GossipClient(b.address, grpc.credentials.createInsecure());
    const push = (chunks: StateChunk[]) =>
      new Promise<StateReply>((resolve, reject) => {
        const s = gossip.pushState((err, res) => (err ? reject(err) : resolve(res!)));
        for (const c of chunks) s.write(c);
        s.end();
      });
    const key = "pushed";
    const partition = partitionOf(key, P);
    const stateOf = (ps: ExportChunk[]): StateChunk[] => [
      ...ps.map((p, i) =>
        StateChunk.fromPartial({
          ...(i === 0 ? { cluster: "deltaset", from: "fake", partitions: P } : {}),
          partition,
          seq: 5n,
          key,
          type: p.type,
          context: p.context,
          rangeOpen: true,
          slice: p.slice,
          keyDone: !p.continued,
          continued: p.continued,
          pieceOffset: p.pieceOffset,
          payloadSha256: p.payloadSha256,
        }),
      ),
      StateChunk.fromPartial({ partition, seq: 5n, rangeOpen: true, partitionDone: true }),
    ];
    try {
      await expectRefused(push(stateOf(swapped(pieces, 1, 2))), grpc.status.INVALID_ARGUMENT, new RegExp(`key "pushed" begins at byte ${2 * PIECE} of its state where byte ${PIECE} was due`));
      await expectMissing(b.address, key);
      const reply = await push(stateOf(pieces));
      assert.deepEqual(reply.acks, [{ partition, seq: 5n }]);
      assert.equal(await absentOf(b.address, key, probes), 0);
    } finally {
      gossip.close();
    }
  });

  it("`deltaset export` writes the pieces' offsets and digest; `deltaset import` of them swapped is refused, in order imports", async () => {
    const file = join(dir, "seen.export");
    const out = openSync(file, "w");
    const ex = spawn(process.execPath, [BIN, "export", "seen", "--chunk-bytes", String(PIECE), "--addr", a.address], { cwd: REPO, stdio: ["ignore", out, "pipe"] });
    let exErr = "";
    ex.stderr!.on("data", (d: Buffer) => (exErr += d.toString()));
    const [exCode] = await once(ex, "exit");
    closeSync(out);
    assert.equal(exCode, 0, exErr);
    const messages: ExportChunk[] = [];
    for await (const m of readDelimited(createReadStream(file), 1 << 24)) messages.push(ExportChunk.decode(m));
    assert.deepEqual(messages.map((m) => m.pieceOffset), pieces.map((p) => p.pieceOffset));
    assert.deepEqual(messages.at(-1)!.payloadSha256, pieces.at(-1)!.payloadSha256);

    const swappedFile = join(dir, "seen.swapped");
    writeFileSync(swappedFile, Buffer.concat(swapped(messages, 1, 2).map((m) => delimited(ExportChunk.encode(m).finish()))));
    const importFile = async (path: string, key: string) => {
      const input = openSync(path, "r");
      const im = spawn(process.execPath, [BIN, "import", key, "--addr", b.address, "--json"], { cwd: REPO, stdio: [input, "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      im.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
      im.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
      const [code] = await once(im, "exit");
      closeSync(input);
      return { code: code as number | null, stdout, stderr };
    };
    const bad = await importFile(swappedFile, "cli-swapped");
    assert.equal(bad.code, 1, bad.stdout);
    assert.match(bad.stderr, /its pieces are out of order/, bad.stderr);
    await expectMissing(b.address, "cli-swapped");
    const good = await importFile(file, "cli-copy");
    assert.equal(good.code, 0, good.stderr);
    assert.deepEqual(JSON.parse(good.stdout), { key: "cli-copy", changed: true, chunks: "1", size: "0" });
    assert.equal(await absentOf(b.address, "cli-copy", probes), 0);
    assert.ok(readFileSync(file).length > 10 * PIECE);
  });
});
