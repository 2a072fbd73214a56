// Which forwarded calls move on to the next owner, on real gRPC servers on loopback: a front node's
// router (the node's Router over the Replica service) and two owners. An owner whose connection
// cannot be made gets nothing and the call goes to the next one, for every method. An owner that
// received the call and then dropped the connection (it may have applied it) is retried at the
// next owner for an Add, which repeated changes nothing, but not for an Increment, which would
// then be applied twice: the client gets UNAVAILABLE and decides, with its request id.
import { strict as assert } from "node:assert";
import { after, describe, it } from "node:test";
import { type AddressInfo, type Server, type Socket, connect, createServer } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { call } from "../../services/client/rpc.ts";
import { createLogger } from "../../services/common/logger.ts";
import { AddResponse, IncrementResponse, ReplicaClient, ReplicaService, type ReplicaServer } from "../../services/gen/deltaset/v1/replica.ts";
import type { Ownership } from "../../services/gossip/ownership.ts";
import { Router } from "../../services/node/routing.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const servers: grpc.Server[] = [];
const relays: Server[] = [];
after(() => {
  for (const s of servers) s.forceShutdown();
  for (const r of relays) r.close();
});

interface Owner {
  /** The owner's address as the front dials it: a TCP relay whose sockets can be cut. */
  address: string;
  server: grpc.Server;
  /** Cut every connection through the relay, as a crashed host or a broken network does (no HTTP/2 goodbye). */
  cut: () => void;
  /** Calls received, by method. */
  received: Record<string, number>;
}

/** An owner answering Add and Increment at once, or (`hang`) taking them without an answer. */
async function owner(host: string, hang = false): Promise<Owner> {
  const o: Owner = { address: "", server: new grpc.Server(), received: {}, cut: () => {} };
  const took = (m: string) => (o.received[m] = (o.received[m] ?? 0) + 1);
  const impl: Partial<ReplicaServer> = {
    add: (_c, cb) => (took("Add"), hang ? undefined : cb(null, AddResponse.fromPartial({ added: 1 }))),
    increment: (_c, cb) => (took("Increment"), hang ? undefined : cb(null, IncrementResponse.fromPartial({ value: 1n }))),
  };
  o.server.addService(ReplicaService, impl as ReplicaServer);
  const port = await new Promise<number>((resolve, reject) => o.server.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  servers.push(o.server);
  const sockets = new Set<Socket>();
  const relay = createServer((down) => {
    const up = connect({ host, port });
    for (const sock of [down, up]) {
      sockets.add(sock);
      sock.on("error", () => {}).on("close", () => (down.destroy(), up.destroy()));
    }
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise<void>((resolve) => relay.listen(0, host, resolve));
  relays.push(relay);
  o.address = `${host}:${(relay.address() as AddressInfo).port}`;
  o.cut = () => {
    relay.close();
    for (const sock of sockets) sock.destroy();
  };
  return o;
}

/** A front node whose router sends every key to these owners, in this order. */
async function front(owners: string[]): Promise<{ client: ReplicaClient; outcomes: string[] }> {
  const ownership = {
    full: false,
    self: "front",
    partitionOf: () => 0,
    owns: () => false,
    ownerAddresses: () => owners.map((address, i) => ({ nodeId: `o${i}`, address })),
  } as unknown as Ownership;
  const outcomes: string[] = [];
  const router = new Router({ ownership, channelOptions: {}, maxMessageBytes: 4 << 20, forwardTimeoutMs: 2000, log: createLogger("error"), onForward: (m, o) => outcomes.push(`${m} ${o}`) });
  const local = (_c: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.INTERNAL, details: "served locally" });
  const server = new grpc.Server();
  server.addService(ReplicaService, router.wrap({ add: local, increment: local } as unknown as ReplicaServer));
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.195:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  servers.push(server);
  return { client: new ReplicaClient(`127.0.0.195:${port}`, grpc.credentials.createInsecure()), outcomes };
}

/** A loopback address nothing listens on (a bound port, closed again). */
async function deadAddress(host: string): Promise<string> {
  const s = new grpc.Server();
  const port = await new Promise<number>((resolve, reject) => s.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  s.forceShutdown();
  return `${host}:${port}`;
}

const increment = (c: ReplicaClient) => call(c, c.increment, { key: "k", amount: 1n, requestId: "client-1/7" } as never, { timeoutMs: 10_000 });
const add = (c: ReplicaClient) => call(c, c.add, { key: "k", elements: [Buffer.from("x")], texts: [] }, { timeoutMs: 10_000 });

/** Wait until the owner took a call of this method, then cut its connections. */
async function dropAfterReceiving(o: Owner, method: string): Promise<void> {
  for (let i = 0; i < 200 && (o.received[method] ?? 0) === 0; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(o.received[method], 1, `the first owner never got the ${method}`);
  o.cut();
}

describe("forwarding to the next owner", () => {
  it("an owner that cannot be reached is skipped, for an Increment as for an Add", async () => {
    const second = await owner("127.0.0.194");
    const { client, outcomes } = await front([await deadAddress("127.0.0.193"), second.address]);
    try {
      await increment(client);
      await add(client);
    } finally {
      client.close();
    }
    assert.deepEqual(second.received, { Increment: 1, Add: 1 });
    assert.deepEqual(outcomes, ["Increment failover", "Increment ok", "Add failover", "Add ok"]);
  });

  it("an Increment the first owner received before its connection dropped is not sent to another owner", async () => {
    const first = await owner("127.0.0.196", true);
    const second = await owner("127.0.0.197");
    const { client, outcomes } = await front([first.address, second.address]);
    try {
      const pending = statusOf(increment(client));
      await dropAfterReceiving(first, "Increment");
      const s = await pending;
      assert.equal(s.code, grpc.status.UNAVAILABLE, s.details);
    } finally {
      client.close();
    }
    assert.deepEqual(second.received, {}, "the increment went to a second owner: it could be applied twice");
    assert.deepEqual(outcomes, ["Increment error"]);
  });

  it("an Add the first owner received before its connection dropped goes to the next owner", async () => {
    const first = await owner("127.0.0.198", true);
    const second = await owner("127.0.0.199");
    const { client, outcomes } = await front([first.address, second.address]);
    try {
      const done = add(client);
      await dropAfterReceiving(first, "Add");
      await done;
    } finally {
      client.close();
    }
    assert.deepEqual(second.received, { Add: 1 });
    assert.deepEqual(outcomes, ["Add failover", "Add ok"]);
  });
});
