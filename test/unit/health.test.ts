// The node's health service (node/health.ts) on a real gRPC server on loopback: Check, Watch and
// List answer for the node's names; a Watch of a name outside them is answered SERVICE_UNKNOWN and
// keeps nothing once cancelled, however many and however long the names (the stock implementation
// kept a watcher set under each name for good: memory any caller could grow).
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { protoPath as healthProtoPath } from "grpc-health-check";
import { NodeHealth } from "../../services/node/health.ts";

const NAMES = ["", "deltaset.v1.Replica"];
let server: grpc.Server;
let health: NodeHealth;
let client: any;

before(async () => {
  server = new grpc.Server();
  health = new NodeHealth(NAMES, "NOT_SERVING");
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  const Health = (grpc.loadPackageDefinition(protoLoader.loadSync(healthProtoPath)) as any).grpc.health.v1.Health;
  client = new Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
});
after(() => {
  client?.close();
  server?.forceShutdown();
});

const check = (service: string) =>
  new Promise<{ status?: string; code?: number; details?: string }>((resolve) =>
    client.check({ service }, (e: grpc.ServiceError | null, r: { status: number }) => resolve(e ? { code: e.code, details: e.details } : { status: ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"][r.status] })),
  );

/** Open a Watch, take its first answers, then cancel it; resolves with what it saw. */
function watch(service: string, until: (seen: string[]) => boolean, onFirst?: () => void): Promise<string[]> {
  return new Promise((resolve) => {
    const seen: string[] = [];
    const call = client.watch({ service });
    call.on("data", (r: { status: number }) => {
      seen.push(["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"][r.status]!);
      if (seen.length === 1) onFirst?.();
      if (until(seen)) {
        call.cancel();
        resolve(seen);
      }
    });
    call.on("error", () => {});
  });
}

describe("the node's health service", () => {
  it("answers Check and List for its names, NOT_FOUND for others with the name cut short", async () => {
    assert.deepEqual(await check(""), { status: "NOT_SERVING" });
    health.setStatus("", "SERVING");
    assert.deepEqual(await check(""), { status: "SERVING" });
    const unknown = await check("x".repeat(100_000));
    assert.equal(unknown.code, grpc.status.NOT_FOUND);
    assert.ok(unknown.details!.length < 200, "the name is not echoed whole");
    const list = await new Promise<any>((resolve, reject) => client.list({}, (e: Error | null, r: any) => (e ? reject(e) : resolve(r))));
    assert.deepEqual(Object.keys(list.statuses).sort(), [...NAMES].sort());
  });

  it("a Watch sees its name's changes; Watches of unknown names keep nothing", async () => {
    const seen = await watch("deltaset.v1.Replica", (s) => s.length === 2, () => health.setStatus("deltaset.v1.Replica", "SERVING"));
    assert.deepEqual(seen, ["NOT_SERVING", "SERVING"]);
    for (let i = 0; i < 50; i++) {
      assert.deepEqual(await watch(`made-up-${i}-${"y".repeat(10_000)}`, (s) => s.length === 1), ["SERVICE_UNKNOWN"]);
    }
    // Cancellations reach the server a moment later.
    for (let t = 0; t < 50 && health.watching > 0; t++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(health.watching, 0);
    assert.equal((health as unknown as { watchers: Map<string, unknown> }).watchers.size, NAMES.length, "no name kept beyond the node's own");
  });
});
