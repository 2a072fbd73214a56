// Client token scopes and their reload, on a real node: a read token can Query but not Add, a
// write token can Add but not Merge, an admin token can Merge; a token removed from the file and a
// SIGHUP later is refused, a token added is accepted, and the node keeps running. Tokens never
// reach the logs.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { bearerMetadata } from "../../services/node/auth.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-scopes-"));
const tokensFile = join(dir, "tokens");
const READ = "tkR-3b1f9a0c7e5d42a8b6c0f1e2d3a4b5c6";
const WRITE = "tkW-9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a49";
const ADMIN = "tkA-0f1e2d3c4b5a69788796a5b4c3d2e1f0";
const LATE = "tkL-5566778899aabbccddeeff0011223344";
let node: NodeProcess;

before(async () => {
  writeFileSync(tokensFile, `read ${READ}\nwrite ${WRITE}\nadmin ${ADMIN}\n`, { mode: 0o600 });
  node = await startNodeProcess(["--listen", "127.0.0.105:0", "--data-dir", join(dir, "data"), "--auth-tokens-file", tokensFile]);
});

after(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const add = (token: string) => {
  const c = replicaClient(node.address);
  return statusOf(call(c, c.add, { key: "s", elements: [Buffer.from("x")], texts: [] }, { metadata: bearerMetadata(token) })).finally(() => c.close());
};
const query = (token: string) => {
  const c = replicaClient(node.address);
  return statusOf(call(c, c.query, { key: "s", elements: [], texts: [], pageSize: 10, pageToken: Buffer.alloc(0), withText: false }, { metadata: bearerMetadata(token) })).finally(() => c.close());
};
const merge = (token: string) => {
  const c = replicaClient(node.address);
  const state = { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(AWSet.bottom().add("ext~1", [Buffer.from("m")]))) };
  return statusOf(call(c, c.merge, { key: "s", state }, { metadata: bearerMetadata(token) })).finally(() => c.close());
};

describe("token scopes", () => {
  it("a read token reads but cannot Add", async () => {
    assert.equal((await query(READ)).code, 0);
    const r = await add(READ);
    assert.equal(r.code, grpc.status.PERMISSION_DENIED);
    assert.match(r.details, /write scope/);
    const m = membershipClient(node.address);
    await call(m, m.members, { includeDeparted: false }, { metadata: bearerMetadata(READ) }).finally(() => m.close());
  });

  it("a write token adds but cannot Merge; an admin token can", async () => {
    assert.equal((await add(WRITE)).code, 0);
    const r = await merge(WRITE);
    assert.equal(r.code, grpc.status.PERMISSION_DENIED);
    assert.match(r.details, /admin scope/);
    assert.equal((await merge(ADMIN)).code, 0);
  });

  it("reloads the tokens file on SIGHUP: a removed token is refused, an added one accepted", async () => {
    writeFileSync(tokensFile, `read ${READ}\nadmin ${ADMIN}\nread,write ${LATE}\n`);
    node.child.kill("SIGHUP");
    await eventually("tokens reloaded", async () => node.logs(), (l) => /"msg":"credentials reloaded".*"tokens":3/.test(l));
    assert.equal((await add(WRITE)).code, grpc.status.UNAUTHENTICATED);
    assert.equal((await add(LATE)).code, 0);
    assert.equal(node.child.exitCode, null);
    for (const t of [READ, WRITE, ADMIN, LATE]) assert.ok(!node.logs().includes(t), "a token reached the log");
  });
});
