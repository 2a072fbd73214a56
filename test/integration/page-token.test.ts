// Query's page tokens, from outside (a real node process): a token passed back unchanged continues
// the listing; a short garbage token, an altered one, or one issued for another key is
// INVALID_ARGUMENT and the node keeps serving.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import type { ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-page-token-"));
let node: NodeProcess;
let client: ReplicaClient;

const page = (key: string, pageToken: Buffer) =>
  call(client, client.query, { key, elements: [], texts: [], pageSize: 2, pageToken, withText: true });

async function expectInvalid(p: Promise<unknown>): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT, `${grpc.status[e.code]}: ${e.details}`);
    assert.match(e.details, /page_token is not a next_page_token issued for key "fruits"/);
    return true;
  });
}

before(async () => {
  node = await startNodeProcess(["--listen", "127.0.0.136:0", "--data-dir", join(dir, "data")]);
  client = replicaClient(node.address);
  await call(client, client.add, { key: "fruits", elements: [], texts: ["apple", "fig", "kiwi", "pear", "plum"] });
  await call(client, client.add, { key: "veg", elements: [], texts: ["kale", "leek", "okra"] });
});

after(async () => {
  client?.close();
  assert.equal(await node?.stop(), 0);
  rmSync(dir, { recursive: true, force: true });
});

describe("page tokens", () => {
  it("continue a listing when passed back unchanged", async () => {
    const seen: string[] = [];
    let token: Buffer = Buffer.alloc(0);
    for (let i = 0; i < 10; i++) {
      const r = await page("fruits", token);
      seen.push(...r.members.map((m) => m.text));
      if (r.nextPageToken.length === 0) break;
      token = r.nextPageToken;
    }
    assert.deepEqual(seen, ["apple", "fig", "kiwi", "pear", "plum"]);
  });

  it("refuse a short garbage token, an altered token and another key's token", async () => {
    await expectInvalid(page("fruits", Buffer.from("k")));
    // The old format (the bare last element) is no longer a start position either.
    await expectInvalid(page("fruits", Buffer.from("fig")));
    const good = (await page("fruits", Buffer.alloc(0))).nextPageToken;
    const altered = Buffer.from(good);
    altered[1]! ^= 0x01;
    await expectInvalid(page("fruits", altered));
    const otherKey = (await page("veg", Buffer.alloc(0))).nextPageToken;
    await expectInvalid(page("fruits", otherKey));
    await expectInvalid(page("fruits", Buffer.alloc(100_000, 1)));
    // A Query that names elements has one reply: a token there is a mistake, not ignored.
    await assert.rejects(call(client, client.query, { key: "fruits", elements: [], texts: ["fig"], pageSize: 0, pageToken: good, withText: true }), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
      assert.match(e.details, /leave page_token empty/);
      return true;
    });
    // Still serving, and the good token still works.
    assert.deepEqual((await page("fruits", good)).members.map((m) => m.text), ["kiwi", "pear"]);
  });
});
