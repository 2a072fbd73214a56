// Crash safety of a large state kept as a base and a log of deltas (store/whole-state-layout.ts):
// clients add to an ORCF of some 12k entries (logged from the start), and to a probabilistic set
// (AWSET_PROB) of as many elements, while the node is SIGKILLed at random moments, the log being
// appended to and folded into new bases meanwhile; after a restart every acknowledged add is
// present (a filter has no false negatives; the set removed nothing, so its tombstone filter
// reports no dot) and `deltaset verify` finds the key's records consistent.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { ObjectType } from "../../services/gen/deltaset/v1/types.ts";
import { QueryRequest } from "../../services/gen/deltaset/v1/replica.ts";
import { runCli, startNodeProcess } from "../helpers/node-process.ts";
import { killWhileAdding } from "../helpers/kill-while-adding.ts";
import { ClassicLevel } from "classic-level";
import { SUFFIX_HEADER, parseObjectKey } from "../../services/store/keys.ts";
import { decodeHeader } from "../../services/store/records.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-crash-log-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const ROUNDS = Number(process.env.CRASH_ROUNDS ?? 3);
const WORKERS = 8;
const data = join(dir, "data");
const args = ["--listen", "127.0.0.42:0", "--data-dir", data, "--node-id", "crashy-log", "--metrics-listen", "127.0.0.42:0"];
const noParams = { capacity: 0n, falsePositiveRate: 0, hashes: 0, bits: 0n, fingerprintBits: 0, bucketSize: 0, level: 0, ageSlices: 0, unionStrategy: 0 };
const cases = [
  { name: "ORCF", key: "f", type: ObjectType.ORCF, params: { ...noParams, capacity: 40_000n } },
  { name: "AWSET_PROB", key: "p", type: ObjectType.AWSET_PROB, params: { ...noParams, capacity: 4096n } },
];

for (const { name, key, type, params } of cases) it(`every acknowledged add to a logged ${name} survives SIGKILL (${ROUNDS} rounds, ${WORKERS} clients)`, async () => {
  const acked: Buffer[] = [];
  let seed = 777;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  {
    const node = await startNodeProcess(args);
    const client = replicaClient(node.address);
    for (let i = 0; i < 12_000; i += 1000) {
      const batch = Array.from({ length: 1000 }, (_, j) => Buffer.from(`base-${i + j}`));
      await call(client, client.add, { key, type, params, elements: batch, texts: [] }, { timeoutMs: 30_000 });
      acked.push(...batch);
    }
    client.close();
    await node.stop();
  }
  for (let round = 0; round < ROUNDS; round++) {
    await killWhileAdding({ args, key, workers: WORKERS, atLeast: 400, random: rand, element: (w, n) => Buffer.from(`r${round}-w${w}-${n}`), acked });
  }
  assert.ok(acked.length >= 12_000 + ROUNDS * 400, `too few acknowledged adds to mean anything: ${acked.length}`);

  const node = await startNodeProcess(args);
  const client = replicaClient(node.address);
  try {
    const missing: string[] = [];
    for (let i = 0; i < acked.length; i += 1000) {
      const batch = acked.slice(i, i + 1000);
      const q = await call(client, client.query, QueryRequest.fromPartial({ key, elements: batch }), { timeoutMs: 30_000 });
      q.presence.forEach((p, j) => {
        if (!p.present) missing.push(batch[j]!.toString());
      });
    }
    assert.deepEqual(missing.slice(0, 10), [], `${missing.length} acknowledged adds lost`);
  } finally {
    client.close();
    await node.stop();
  }
  const verified = await runCli(["verify", "--data-dir", data]);
  assert.equal(verified.code, 0, `verify: ${verified.stdout}${verified.stderr}`);
  // The key was kept as a base and a log, and deltas were appended to it across the kills.
  const db = new ClassicLevel<Buffer, Buffer>(data, { keyEncoding: "buffer", valueEncoding: "buffer" });
  await db.open();
  try {
    let log: { first: number; next: number } | undefined;
    for await (const [k, v] of db.iterator({ gte: Buffer.from([0x01]), lt: Buffer.from([0x02]) })) {
      const o = parseObjectKey(k);
      if (o.key === key && o.suffix === SUFFIX_HEADER && o.rest === k.length) log = decodeHeader(v).log;
    }
    assert.ok(log !== undefined, `a ${name} this large is logged`);
    assert.ok(log.next > 0, `deltas were appended (log ${JSON.stringify(log)})`);
  } finally {
    await db.close();
  }
});
