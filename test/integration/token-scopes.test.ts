// Client token scopes and their reload, on a real node: a read token can Query but not Add, a
// write token can Add but not Merge, an admin token can Merge; a token removed from the file and a
// SIGHUP later is refused, a token added is accepted, a stream opened with a token ends once it is
// removed, and the node keeps running. Tokens never reach the logs.
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
  // One watcher at a time: a Watch ended by a removed token must give its place back.
  node = await startNodeProcess(["--listen", "127.0.0.105:0", "--data-dir", join(dir, "data"), "--auth-tokens-file", tokensFile, "--max-watchers", "1"]);
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

  it("ends a Watch opened with a token once the token is removed, and frees its place", async () => {
    /** A Watch of key w: the elements its events carry, and how it ended. */
    const watch = (token: string) => {
      const c = replicaClient(node.address);
      const seen: string[] = [];
      const s = c.watch({ key: "w", prefix: "", since: undefined }, bearerMetadata(token));
      const ended = new Promise<grpc.ServiceError>((resolve) => {
        s.on("data", (e: { delta?: { payload: Buffer } }) => {
          if (e.delta !== undefined) for (const k of AWSetLattice.decode(e.delta.payload).entries.keys()) seen.push(Buffer.from(k, "latin1").toString());
        });
        s.on("error", (e: grpc.ServiceError) => resolve(e));
        s.on("end", () => resolve({ code: grpc.status.OK } as grpc.ServiceError));
      }).finally(() => c.close());
      return { seen, ended, cancel: () => s.cancel() };
    };
    const addTo = (element: string) => {
      const c = replicaClient(node.address);
      return call(c, c.add, { key: "w", elements: [Buffer.from(element)], texts: [] }, { metadata: bearerMetadata(LATE) }).finally(() => c.close());
    };
    const w = watch(READ);
    await addTo("before");
    await eventually("the watch sees the first add", async () => w.seen, (s) => s.includes("before"));
    writeFileSync(tokensFile, `admin ${ADMIN}\nread,write ${LATE}\n`);
    node.child.kill("SIGHUP");
    await eventually("tokens reloaded", async () => node.logs(), (l) => /"msg":"credentials reloaded".*"tokens":2/.test(l));
    await addTo("after");
    const end = await Promise.race([w.ended, new Promise<grpc.ServiceError>((r) => setTimeout(() => r({ code: -1, details: "still open 10 s after the token was removed" } as unknown as grpc.ServiceError), 10_000).unref())]);
    w.cancel();
    assert.equal(end.code, grpc.status.UNAUTHENTICATED, end.details);
    assert.ok(!w.seen.includes("after"), "the removed token's watch received a later change");
    // Its place is free (--max-watchers 1): a watch with a valid token is served.
    const again = watch(ADMIN);
    await addTo("third");
    await eventually("a new watch sees a change", async () => again.seen, (s) => s.includes("third"));
    again.cancel();
    await again.ended;
  });
});
