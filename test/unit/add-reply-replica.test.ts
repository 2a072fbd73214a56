// An Add's reply names the replica its dots were minted under. Hand-off draws a new replica id
// (Store.rotateReplicaId) while other adds may be waiting to become durable; a reply that read the
// store's replica id after the wait named the new id with counters of the old one, so a client
// that built a remove from it (or a checker that followed the dot) looked for a dot that never
// existed.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import type { sendUnaryData, ServerUnaryCall } from "@grpc/grpc-js";
import { createLogger } from "../../services/common/logger.ts";
import type { AddRequest, AddResponse } from "../../services/gen/deltaset/v1/replica.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { DEFAULT_CONFIG } from "../../services/node/config.ts";
import { createReplicaService } from "../../services/replica/service.ts";
import { Store } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-add-reply-"));
after(() => rmSync(root, { recursive: true, force: true }));

it("names the replica the dots were minted under, even when the id changes before the add is durable", async () => {
  const store = await Store.open({ dir: join(root, "s"), nodeId: "a", partitions: 8, partitionOf, sync: "fsync" });
  try {
    const service = createReplicaService({ store, limits: DEFAULT_CONFIG.limits, log: createLogger("error") });
    const minted = store.replicaId;
    // Hand-off's rotation landing after the dots were minted and before the add resolves, every time.
    let rotated = "";
    const add = store.add.bind(store);
    store.add = async (...args: Parameters<Store["add"]>) => {
      const r = await add(...args);
      rotated = await store.rotateReplicaId();
      return r;
    };
    const reply = new Promise<AddResponse>((resolve, reject) =>
      service.add(
        { request: { key: "k", elements: [Buffer.from("x")], texts: [] } as unknown as AddRequest } as ServerUnaryCall<AddRequest, AddResponse>,
        ((err, res) => (err ? reject(err) : resolve(res!))) as sendUnaryData<AddResponse>,
      ),
    );
    const res = await reply;
    assert.notEqual(rotated, minted);
    assert.equal(res.replica, minted);
    const [dots] = await store.dotsOf("k", [Buffer.from("x")]);
    assert.deepEqual(dots!.map((d) => `${d.replica}:${d.counter}`), res.counters.map((c) => `${res.replica}:${c}`));
  } finally {
    await store.close();
  }
});
