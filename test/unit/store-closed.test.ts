// A write to a closed store (a node shutting down) fails with StoreClosedError, and the Replica
// service answers it with UNAVAILABLE so that clients retry on another node.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { toServiceError } from "../../services/replica/errors.ts";
import { Store, StoreClosedError } from "../../services/store/store.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-closed-"));
after(() => rmSync(root, { recursive: true, force: true }));

it("a write after close() rejects with StoreClosedError, answered as UNAVAILABLE", async () => {
  const store = await Store.open({ dir: join(root, "a"), nodeId: "a", partitions: 1, partitionOf: () => 0, sync: "buffered" });
  await store.close();
  const err = await store.add("k", [Buffer.from("x")]).then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof StoreClosedError);
  let unexpected = false;
  const answer = toServiceError(err, () => (unexpected = true));
  assert.equal(answer.code, status.UNAVAILABLE);
  assert.equal(unexpected, false);
});

it("other errors are not taken for a closed store", () => {
  const answer = toServiceError(new Error("store is closed"), () => {});
  assert.equal(answer.code, status.INTERNAL);
});
