// Crash safety: clients stream adds, the node is SIGKILLed at a random moment, and after a restart
// every acknowledged add is present and the whole state reads back cleanly. Repeated (bounded).
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import type { ScanChunk } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { startNodeProcess } from "../helpers/node-process.ts";
import { killWhileAdding } from "../helpers/kill-while-adding.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-crash-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const ROUNDS = Number(process.env.CRASH_ROUNDS ?? 4);
const WORKERS = 16;

it(`every acknowledged add survives SIGKILL (${ROUNDS} rounds, ${WORKERS} concurrent clients)`, async () => {
  const acked: Buffer[] = [];
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let round = 0; round < ROUNDS; round++) {
    const args = ["--listen", "127.0.0.41:0", "--data-dir", join(dir, "data"), "--node-id", "crashy"];
    await killWhileAdding({ args, key: "crash", workers: WORKERS, atLeast: 25, random: rand, element: (w, n) => Buffer.from(`r${round}-w${w}-${n}`), acked });
  }
  assert.ok(acked.length >= ROUNDS * 25, `too few acknowledged adds to mean anything: ${acked.length}`);

  const node = await startNodeProcess(["--listen", "127.0.0.41:0", "--data-dir", join(dir, "data"), "--node-id", "crashy"]);
  const client = replicaClient(node.address);
  try {
    const missing: string[] = [];
    for (let i = 0; i < acked.length; i += 1000) {
      const batch = acked.slice(i, i + 1000);
      const q = await call(client, client.query, { key: "crash", elements: batch, texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false });
      q.presence.forEach((p, j) => {
        if (!p.present) missing.push(batch[j]!.toString());
      });
    }
    assert.deepEqual(missing.slice(0, 10), [], `${missing.length} acknowledged adds lost`);
    // The whole state reads back: a full scan, in order, agreeing with the header's size.
    let count = 0;
    let prev: Buffer | undefined;
    let total = -1n;
    for await (const c of client.scan({ key: "crash", chunkSize: 5000, startAfter: Buffer.alloc(0), withText: false }) as AsyncIterable<ScanChunk>) {
      for (const m of c.members) {
        if (prev !== undefined) assert.ok(Buffer.compare(prev, m.element) < 0, "scan out of order");
        prev = m.element;
        count++;
      }
      total = c.total;
    }
    assert.ok(count >= acked.length, `scan found ${count} members, fewer than ${acked.length} acknowledged`);
    assert.equal(BigInt(count), total, "header size disagrees with the stored elements");
  } finally {
    client.close();
    await node.stop();
  }
});
