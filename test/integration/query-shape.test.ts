// A Query answers what the key's type has, and refuses by name what it cannot use, on a real node
// process over gRPC: a COUNTER key's Query answers its value (elements, texts, page_size,
// page_token or with_dots answer INVALID_ARGUMENT naming the field), and `deltaset query` still
// reads a counter.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import type { QueryRequest, ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";

const root = mkdtempSync(join(tmpdir(), "deltaset-query-shape-"));
let node: NodeProcess;
let c: ReplicaClient;

const query = (req: Partial<QueryRequest> & { key: string }) =>
  call(c, c.query, { elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false, ...req });

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.24.30:0", "--data-dir", join(root, "n")]);
  c = replicaClient(node.address);
});

after(async () => {
  c?.close();
  if (node !== undefined) assert.equal(await node.stop(), 0);
  rmSync(root, { recursive: true, force: true });
});

describe("Query refuses what the key's type cannot use (real node)", () => {
  it("a COUNTER key's Query with a member or element field answers INVALID_ARGUMENT naming it", async () => {
    await call(c, c.increment, { key: "visits", amount: 7n, requestId: "" });
    const cases: [string, Partial<QueryRequest>][] = [
      ["elements", { elements: [Buffer.from("a")] }],
      ["texts", { texts: ["a"] }],
      ["page_size", { pageSize: 10 }],
      ["page_token", { pageToken: Buffer.from("x") }],
      ["with_dots", { withDots: true }],
    ];
    for (const [field, req] of cases) {
      await assert.rejects(query({ key: "visits", ...req }), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.INVALID_ARGUMENT, `${field}: ${e.details}`);
        assert.equal(e.details, `key "visits" holds a COUNTER, whose Query answers its value alone: leave ${field} unset (it applies to sets and filters)`);
        return true;
      });
    }
    // The key alone reads the value, and so does a generic reader's with_text, or with_dots false.
    assert.equal((await query({ key: "visits", withDots: false })).counterValue, 7n);
    assert.equal((await query({ key: "visits", withText: true })).counterValue, 7n);
    // The CLI reads a counter without a page size; asked for one, it says why not.
    const read = await runCli(["query", "visits", "--addr", node.address, "--json"]);
    assert.equal(read.code, 0, read.stderr);
    assert.equal(JSON.parse(read.stdout).value, "7");
    const paged = await runCli(["query", "visits", "--addr", node.address, "--page-size", "5"]);
    assert.notEqual(paged.code, 0);
    assert.match(paged.stderr, /leave page_size unset/);
  });
});
