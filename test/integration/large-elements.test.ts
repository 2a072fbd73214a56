// A set of large elements, with real processes: a thousand elements near the element size limit
// do not fit in one message, so every path that sends many of them is bounded in bytes as well as
// in entries. Nodes run with --max-message-bytes 1 MiB and 30 000-byte elements, so that the
// default 1000 entries of a state chunk, a Scan chunk or a Query page would be some 30 MB:
//  - a node that joins empty receives the whole set (full-state catch-up), and a node that was
//    down when a new key was written receives it on restart;
//  - Scan with its default chunk and Query with the largest page answer in several messages
//    instead of failing with gRPC's "larger than max" error.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call } from "../../services/client/rpc.ts";
import { eventually } from "../helpers/eventually.ts";
import { TestCluster } from "../helpers/test-cluster.ts";
import { exportOf, importTo } from "../helpers/export-import.ts";
import { ObjectType } from "../../services/crdt/index.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-large-elements-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const MESSAGE = 1 << 20;
const FLAGS = [
  "--probe-interval-ms", "300",
  "--probe-timeout-ms", "150",
  "--partitions", "8",
  "--gossip-interval-ms", "100",
  "--max-message-bytes", String(MESSAGE),
  "--max-export-chunk-bytes", String(MESSAGE / 4),
];
const N = 120;
/** Element i: 30 000 bytes, distinct in its first characters. */
const big = (tag: string, i: number) => `${tag}-${String(i).padStart(4, "0")}-`.padEnd(30_000, String.fromCharCode(97 + (i % 26)));

/** Add elements in calls well under the message limit (20 of 30 000 bytes: 600 kB). */
async function addAll(c: TestCluster, node: number, key: string, elements: string[]): Promise<void> {
  for (let i = 0; i < elements.length; i += 20) await c.add(node, key, elements.slice(i, i + 20));
}

describe("sets of large elements (real processes, 1 MiB messages)", () => {
  it("catch-up by full state, Scan and Query all move them in messages that fit", async () => {
    const c = new TestCluster(dir, [1, 2].map((i) => `127.0.0.${150 + i}:7611`), FLAGS, "big");
    try {
      await c.start(0);
      const first = Array.from({ length: N }, (_, i) => big("a", i));
      await addAll(c, 0, "big", first);

      // Node 1 joins empty: the whole key reaches it by full-state chunks (30 MB in 1000 entries).
      await c.start(1);
      // Counted first (a one-member Query): the catch-up alone, before any Scan reads the set.
      await eventually("node 1 holds the set", () => c.size(1, "big"), (n) => n === N, 60_000);
      const got = await c.converged("big", [0, 1], first, 60_000);
      assert.equal(got.length, N);

      // Node 1 down while a new key is written: it receives the key when it is back.
      await c.kill(1);
      const second = Array.from({ length: N }, (_, i) => big("b", i));
      await addAll(c, 0, "later", second);
      await c.start(1);
      await eventually("node 1 holds the new key", () => c.size(1, "later"), (n) => n === N, 60_000);
      await c.converged("later", [0, 1], second, 60_000);

      // Scan with the node's default chunk (1000 members): several chunks, each within the limit.
      const chunks = await c.replica(1, async (client) => {
        const out: number[] = [];
        for await (const ch of client.scan({ key: "big", chunkSize: 0, startAfter: Buffer.alloc(0), withText: true }) as AsyncIterable<ScanChunk>) {
          if (ch.members.length > 0) out.push(ch.members.length);
        }
        return out;
      });
      assert.equal(chunks.reduce((a, b) => a + b, 0), N);
      assert.ok(chunks.length > 1, `one chunk of ${N} members of 30 000 bytes`);

      // Query with the largest page: a shorter page and a token, and the pages together list every member.
      const listed = await c.replica(1, async (client) => {
        const out: string[] = [];
        let token: Buffer = Buffer.alloc(0);
        let pages = 0;
        do {
          const q = await call(client, client.query, { key: "big", elements: [], texts: [], pageSize: 10_000, pageToken: token, withText: false });
          out.push(...q.members.map((m) => m.element.toString()));
          token = q.nextPageToken;
          pages++;
          assert.ok(pages <= N, "pages do not advance");
        } while (token.length > 0);
        assert.ok(pages > 1, "one page held every member");
        return out;
      });
      assert.deepEqual(listed, [...first].sort());
    } finally {
      await c.close();
    }
  });

  it("a key stored whole larger than a message travels in pieces: to a node that joins empty, and through Export and Import", async () => {
    const c = new TestCluster(dir, [5, 6].map((i) => `127.0.10.${i}:7611`), FLAGS, "whole");
    const prob = Array.from({ length: 60 }, (_, i) => big("p", i));
    try {
      await c.start(0);
      // An awset-prob set keeps its elements in its one record: 60 of 30 000 bytes are 1.8 MB.
      for (let i = 0; i < prob.length; i += 20) {
        await c.replica(0, (r) => call(r, r.add, { key: "prob", elements: prob.slice(i, i + 20).map((e) => Buffer.from(e)), texts: [], type: ObjectType.AWSET_PROB }));
      }
      await c.start(1);
      // Asked about 20 at a time: 60 elements do not fit in one request.
      const has = async (i: number, key: string) => {
        const present: boolean[] = [];
        for (let j = 0; j < prob.length; j += 20) {
          const q = await c.replica(i, (r) => call(r, r.query, { key, elements: prob.slice(j, j + 20).map((e) => Buffer.from(e)), texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }));
          present.push(...q.presence.map((p) => p.present));
        }
        return present;
      };
      await eventually("node 1 holds the whole awset-prob set", () => has(1, "prob"), (p) => p.length === prob.length && p.every(Boolean), 60_000);

      // Export cuts it into pieces of the chunk size asked for; Import gathers them.
      const chunks = await exportOf(c.addresses[0]!, "prob", { maxBytes: MESSAGE / 4 });
      assert.ok(chunks.length >= 7, `${chunks.length} chunks`);
      assert.deepEqual(chunks.map((ch) => ch.continued), chunks.map((_, i) => i < chunks.length - 1));
      assert.ok(chunks.every((ch) => ch.slice!.payload.length <= MESSAGE / 4));
      const r = await importTo(c.addresses[1]!, "prob-copy", chunks);
      assert.equal(r.changed, true);
      assert.equal(r.size, BigInt(prob.length));
      assert.ok((await has(1, "prob-copy")).every(Boolean));
    } finally {
      await c.close();
    }
  });
});
