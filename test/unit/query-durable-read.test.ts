// Reads and the group commit, on a real store (LevelDB, fsync) through the Replica service: reads
// see writes still queued for the disk, so a Query is answered only once what it read is durable,
// and the page of members it lists (read from the database) holds every add its context covers,
// as a Scan's members hold every add its first chunk's context covers.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { EventEmitter } from "node:events";
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from "@grpc/grpc-js";
import { contextFromProto, dotFromProto } from "../../services/crdt/index.ts";
import { createLogger } from "../../services/common/logger.ts";
import type { QueryRequest, QueryResponse, ScanChunk, ScanRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { DEFAULT_CONFIG } from "../../services/node/config.ts";
import { createReplicaService } from "../../services/replica/service.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-durable-read-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;

async function setup() {
  const store = await Store.open({ dir: join(root, `s${dirs++}`), nodeId: "a", partitions: 8, partitionOf, sync: "fsync" });
  const service = createReplicaService({ store, limits: DEFAULT_CONFIG.limits, log: createLogger("error") });
  const query = (req: Partial<QueryRequest>) =>
    new Promise<QueryResponse>((resolve, reject) =>
      service.query(
        { request: { key: "k", elements: [], texts: [], pageSize: 100, pageToken: Buffer.alloc(0), withText: false, ...req } } as unknown as ServerUnaryCall<QueryRequest, QueryResponse>,
        ((err, res) => (err ? reject(err) : resolve(res!))) as sendUnaryData<QueryResponse>,
      ),
    );
  /** A Scan's chunks, through a stand-in for the call that takes every chunk at once. */
  const scan = (key: string) =>
    new Promise<ScanChunk[]>((resolve, reject) => {
      const chunks: ScanChunk[] = [];
      const call = Object.assign(new EventEmitter(), {
        request: { key, startAfter: Buffer.alloc(0), chunkSize: 100, withText: false },
        write: (c: ScanChunk, cb?: () => void) => (chunks.push(c), cb?.(), true),
        end: () => resolve(chunks),
      });
      call.on("error", reject);
      void service.scan(call as unknown as ServerWritableStream<ScanRequest, ScanChunk>);
    });
  return { store, query, scan };
}

describe("a Query beside writes still queued", () => {
  it("lists every add its context covers, and is answered after the batch holding them", async () => {
    const { store, query } = await setup();
    try {
      await store.add("k", [Buffer.from("a")]);
      for (let round = 0; round < 20; round++) {
        const before = store.stats().batches;
        const el = Buffer.from(`e${round}`);
        const adding = store.add("k", [el]);
        // Until the add's write is queued (the batch starts only at the end of this turn).
        const commit = (store as unknown as { commit: { queued: number } }).commit;
        for (let i = 0; i < 1000 && commit.queued === 0; i++) await Promise.resolve();
        assert.equal(commit.queued, 1, "the add was not queued within this turn");
        let batchesAtAnswer = -1;
        const r = await query({}).then((x) => ((batchesAtAnswer = store.stats().batches), x));
        const [dots] = await adding.then(() => store.dotsOf("k", [el]));
        assert.ok(dots!.every((d) => contextFromProto(r.context).containsDot(d)), "the context does not cover the queued add");
        assert.ok(r.members.some((m) => m.element.equals(el)), `round ${round}: the context covers ${el} but the page does not list it`);
        assert.ok(batchesAtAnswer > before, `round ${round}: answered before the add it shows was durable`);
      }
    } finally {
      await store.close();
    }
  });

  it("a Scan lists every add its first chunk's context covers", async () => {
    const { store, scan } = await setup();
    try {
      await store.add("k", [Buffer.from("a")]);
      for (let round = 0; round < 10; round++) {
        const el = Buffer.from(`s${round}`);
        const adding = store.add("k", [el]);
        const commit = (store as unknown as { commit: { queued: number } }).commit;
        for (let i = 0; i < 1000 && commit.queued === 0; i++) await Promise.resolve();
        assert.equal(commit.queued, 1, "the add was not queued within this turn");
        const chunks = await scan("k");
        const [dots] = await adding.then(() => store.dotsOf("k", [el]));
        assert.ok(dots!.every((d) => contextFromProto(chunks[0]!.context).containsDot(d)), "the context does not cover the queued add");
        assert.ok(chunks.some((c) => c.members.some((m) => m.element.equals(el))), `round ${round}: the context covers ${el} but the scan does not list it`);
      }
    } finally {
      await store.close();
    }
  });

  it("never lists a dot its context does not cover, with adds landing between the reads (a Remove built from them removes what was listed)", async () => {
    const { store, query, scan } = await setup();
    try {
      await store.add("k", [Buffer.from("a")]);
      // Two writers add new elements all along, so adds land between each read's steps.
      let writing = true;
      const writers = [0, 1].map(async (w) => {
        for (let i = 0; writing && i < 5000; i++) await store.add("k", [Buffer.from(`w${w}-${i}`)]);
      });
      let uncovered = 0;
      let sizeApart = 0;
      for (let round = 0; round < 60; round++) {
        const listed = await query({ withDots: true, pageSize: 1000, pageToken: Buffer.alloc(0) });
        const ctx = contextFromProto(listed.context);
        for (const m of listed.members) if (m.dots.length === 0 || !m.dots.every((d) => ctx.containsDot(dotFromProto(d, "dot")))) uncovered++;
        if (listed.nextPageToken.length === 0 && Number(listed.size) !== listed.members.length) sizeApart++;
        const asked = await query({ withDots: true, elements: [Buffer.from(`w0-${round * 3}`), Buffer.from(`w1-${round * 3}`)] });
        const actx = contextFromProto(asked.context);
        for (const p of asked.presence) if (p.present && !p.dots.every((d) => actx.containsDot(dotFromProto(d, "dot")))) uncovered++;
        // A Scan: every element it lists has an add its context covers.
        const chunks = await scan("k");
        const sctx = contextFromProto(chunks[0]!.context);
        const els = chunks.flatMap((c) => c.members.map((m) => m.element));
        const dots = await store.dotsOf("k", els);
        for (const d of dots) if (!d.some((x) => sctx.containsDot(x))) uncovered++;
      }
      writing = false;
      await Promise.all(writers);
      assert.equal(uncovered, 0, "members listed with adds their context does not cover");
      assert.equal(sizeApart, 0, "a listing whose size is of another moment");
    } finally {
      await store.close();
    }
  });
});
