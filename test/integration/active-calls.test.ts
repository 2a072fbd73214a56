// The count of running calls that lets a node's shutdown wait for calls rather than connections
// (active-calls.ts, counted by the server's first interceptor in strict-strings.ts): a real gRPC
// server on loopback, and every way a call can end brings the count back to zero: answered,
// failed by its handler, refused for a bad string before any handler runs, refused by a later
// interceptor, and cancelled by its client mid-stream.
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ReplicaService, type ReplicaClient } from "../../services/gen/deltaset/v1/replica.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { activeCalls } from "../../services/node/active-calls.ts";
import { StrictStringServer } from "../../services/node/strict-strings.ts";
import { bind } from "../../services/node/server.ts";
import { HealthImplementation } from "grpc-health-check";

const calls = activeCalls();
let server: StrictStringServer;
let client: ReplicaClient;
let address: string;
let raw: grpc.Client;
/** Set while a Scan runs, so the test can cancel it then. */
let scanning: (() => void) | undefined;
/** Told when an Increment's handler starts; it answers only when `release` is called. */
let incrementing: (() => void) | undefined;
let release: (() => void) | undefined;

/** Refuses Remove here, after the first interceptor, as the auth interceptors refuse calls. */
const refuseRemove: grpc.ServerInterceptor = (method, next) => {
  if (!method.path.endsWith("/Remove")) return next as grpc.ServerInterceptingCall;
  return new grpc.ServerInterceptingCall(next, {
    start: (go) => go({ onReceiveMetadata: () => next.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: "no", metadata: new grpc.Metadata() }) }),
  });
};


before(async () => {
  server = new StrictStringServer({ interceptors: [refuseRemove] }, calls);
  server.addService(ReplicaService, {
    add: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { added: 1, replica: "r", counters: [1n], duplicate: false, copies: 0 }),
    query: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.FAILED_PRECONDITION, details: "handler says no" } as grpc.ServiceError),
    remove: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { removed: 0, pending: 0, unseenAdds: 0n, copies: 0 }),
    delete: () => {
      throw new Error("a handler that throws");
    },
    increment: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => {
      release = () => cb(null, { value: 1n, duplicate: false, copies: 0 });
      incrementing?.();
    },
    scan: (c: grpc.ServerWritableStream<unknown, unknown>) => {
      c.write({ members: [Buffer.from("a")], texts: [] });
      scanning?.();
    },
  } as unknown as grpc.UntypedServiceImplementation);
  new HealthImplementation({ "": "SERVING" }).addToServer(server);
  const port = await bind(server, "127.0.0.138:0", grpc.ServerCredentials.createInsecure());
  address = `127.0.0.138:${port}`;
  client = replicaClient(address);
  raw = new grpc.Client(`127.0.0.138:${port}`, grpc.credentials.createInsecure());
});

after(() => {
  client?.close();
  raw?.close();
  server?.forceShutdown();
});

/** The count settles a moment after the status is sent. */
async function countSettlesAtZero(): Promise<void> {
  for (let i = 0; i < 100 && calls.count() !== 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(calls.count(), 0);
}

describe("active calls", () => {
  it("an answered call is counted while it runs and not after", async () => {
    await call(client, client.add, { key: "k", elements: [Buffer.from("x")], texts: [] });
    await countSettlesAtZero();
  });

  it("a call its handler fails", async () => {
    await assert.rejects(call(client, client.query, { key: "k", elements: [], texts: [], pageSize: 0, pageToken: Buffer.alloc(0), withText: false }), (e: grpc.ServiceError) => e.code === grpc.status.FAILED_PRECONDITION);
    await countSettlesAtZero();
  });

  it("a call refused for a string that is not UTF-8, before any handler", async () => {
    const body = Buffer.from(new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(Buffer.from([0x62, 0x80, 0xc0])).finish());
    await assert.rejects(
      new Promise((resolve, reject) => raw.makeUnaryRequest("/deltaset.v1.Replica/Add", (b: Buffer) => b, (b: Buffer) => b, body, (err, res) => (err ? reject(err) : resolve(res)))),
      (e: grpc.ServiceError) => e.code === grpc.status.INVALID_ARGUMENT && e.details.startsWith("key is not valid UTF-8"),
    );
    await countSettlesAtZero();
  });

  it("a call whose handler throws (grpc-js answers UNKNOWN)", async () => {
    await assert.rejects(call(client, client.delete, { key: "k" }), (e: grpc.ServiceError) => e.code === grpc.status.UNKNOWN);
    await countSettlesAtZero();
  });

  it("a call a later interceptor refuses", async () => {
    await assert.rejects(call(client, client.remove, { key: "k", elements: [Buffer.from("x")], texts: [] }), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
    await countSettlesAtZero();
  });

  it("a unary call is counted while its handler runs, until its client cancels it", async () => {
    const running = new Promise<void>((r) => (incrementing = r));
    const answer = call(client, client.increment, { key: "c", amount: 1n, requestId: "" } as never, { timeoutMs: 10_000 });
    answer.catch(() => {});
    await running;
    assert.equal(calls.count(), 1, "the call is counted while its handler runs");
    release!();
    await answer;
    await countSettlesAtZero();
    // A call whose client gives up (its deadline) while the handler still runs.
    const again = new Promise<void>((r) => (incrementing = r));
    const late = call(client, client.increment, { key: "c", amount: 1n, requestId: "" } as never, { timeoutMs: 300 });
    await again;
    assert.equal(calls.count(), 1);
    await assert.rejects(late, (e: grpc.ServiceError) => e.code === grpc.status.DEADLINE_EXCEEDED);
    await countSettlesAtZero();
    release!(); // the handler's answer after the cancel goes nowhere and changes no count
    await countSettlesAtZero();
  });

  it("a unary call running when the drain runs out is answered UNAVAILABLE, and its handler's later answer is dropped", async () => {
    const running = new Promise<void>((r) => (incrementing = r));
    const answer = call(client, client.increment, { key: "c", amount: 1n, requestId: "" } as never, { timeoutMs: 10_000 });
    await running;
    calls.cutAll("the drain ran out");
    await assert.rejects(answer, (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE && e.details === "the drain ran out");
    release!();
    await countSettlesAtZero();
  });

  it("a stream its client cancels while it runs", async () => {
    const running = new Promise<void>((r) => (scanning = r));
    const s = client.scan({ key: "k", startAfter: Buffer.alloc(0), chunkSize: 0, withText: false } as never);
    s.on("error", () => {});
    await running;
    assert.equal(calls.count(), 1, "the stream is counted while it runs");
    s.cancel();
    await countSettlesAtZero();
  });

  // Last: it closes the count for good.
  it("once the node stops, a new unary call is refused UNAVAILABLE and health checks still answer", async () => {
    calls.close();
    await assert.rejects(call(client, client.add, { key: "k", elements: [Buffer.from("x")], texts: [] }), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE && /node is stopping/.test(e.details));
    const health = new grpc.Client(address, grpc.credentials.createInsecure());
    try {
      const res = await new Promise<Buffer>((resolve, reject) =>
        health.makeUnaryRequest("/grpc.health.v1.Health/Check", (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), (err, r) => (err ? reject(err) : resolve(r!))),
      );
      assert.deepEqual([...res], [0x08, 0x01], "SERVING");
    } finally {
      health.close();
    }
    assert.equal(calls.count(), 0);
  });
});
