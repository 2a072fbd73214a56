// How soon a peer channel tries a failed connection again (node/peer-channel.ts, the options of
// every channel a node opens to a peer). A listener on loopback resets every connection it takes;
// a gossip client calls it every 20 ms for 2.5 s. With the node's options (first wait 100 ms, at
// most 200 ms here) it must try again and again; with gRPC's defaults (1 s, then 1.6 s, each
// +-20%) it tries three times, four when a busy machine stretches the loop, and every call in
// between fails without trying.
import { strict as assert } from "node:assert";
import { type Socket, createServer } from "node:net";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { GossipClient } from "../../services/gen/deltaset/v1/gossip.ts";
import { peerChannelOptions } from "../../services/node/peer-channel.ts";

let port = 0;
let connections = 0;
const server = createServer((s: Socket) => {
  connections++;
  s.resetAndDestroy();
});
before(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as { port: number }).port;
});
after(() => new Promise<void>((r) => server.close(() => r())));

const passThrough: grpc.Interceptor = (options, next) => new grpc.InterceptingCall(next(options));

/** Connections the client opened while calling every 20 ms for `ms`; every call must fail. */
async function attempts(options: grpc.ChannelOptions, ms: number): Promise<number> {
  const start = connections;
  const client = new GossipClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), options);
  try {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      const err = await new Promise<grpc.ServiceError | null>((resolve) =>
        client.exchange({ cluster: "", from: "", frameId: 0n, payloads: [], acks: [], partitions: 0, boot: 0n, dropped: [], leaving: false, mac: Buffer.alloc(0) }, new grpc.Metadata(), { deadline: Date.now() + 1000 }, (e) => resolve(e)),
      );
      assert.ok(err !== null && err.code === grpc.status.UNAVAILABLE, `a call to a peer that resets every connection fails UNAVAILABLE: ${err?.code}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    client.close();
  }
  return connections - start;
}

describe("reconnecting to a peer", () => {
  it("tries a failed peer again within the configured backoff, not gRPC's default of seconds", { timeout: 30_000 }, async () => {
    const ours = await attempts(peerChannelOptions([passThrough], { initialMs: 100, maxMs: 200 }), 2500);
    const defaults = await attempts({ interceptors: [passThrough] }, 2500);
    assert.ok(ours >= 8, `with a 100-200 ms backoff the client tried ${ours} times in 2.5 s`);
    assert.ok(defaults <= 4, `with gRPC's default backoff the client tried ${defaults} times in 2.5 s`);
    assert.ok(ours >= 2 * defaults, `the node's backoff tried ${ours} times against gRPC's ${defaults}`);
  });
});
