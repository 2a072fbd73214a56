// Signed replies on real gRPC servers on loopback: a peer call's answer must carry a trailer that
// only a cluster key holder can make, bound to the call's nonce. A member's answer passes; an
// answer from a server without the key (a forged acknowledgement) and an answer replaying the
// trailer of an earlier call fail as UNAUTHENTICATED, and the caller never sees their content.
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { PeerMembershipClient } from "../../services/client/peer-clients.ts";
import { call } from "../../services/client/rpc.ts";
import { createLogger } from "../../services/common/logger.ts";
import { MembershipService, type MembershipServer, type PingReply } from "../../services/gen/deltaset/v1/membership.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { peerAuthInterceptor, peerSigner } from "../../services/node/peer-interceptors.ts";
import { addressedTo } from "../../services/client/peer-receiver.ts";
import { REPLY_HEADER } from "../../services/node/peer-proof.ts";

const keys = parseClusterKeys(`${generateClusterKey()}\n`, "test");
const quiet = createLogger("error", {}, () => {});
const servers: grpc.Server[] = [];
let lastTrailer: string | undefined;

/** A Membership server answering every Ping with ack; `mode` decides how its answers are signed. */
async function serve(address: string, mode: "member" | "no-key" | "replay"): Promise<void> {
  const impl: MembershipServer = {
    ping: (c, cb) => {
      const reply: PingReply = { from: "server", seq: c.request.seq, ack: true, updates: [] };
      if (mode === "replay" && lastTrailer !== undefined) {
        const md = new grpc.Metadata();
        md.set(REPLY_HEADER, lastTrailer); // a trailer a member made for another call
        return cb(null, reply, md);
      }
      cb(null, reply);
    },
    pingReq: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    join: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    leave: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    members: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    watch: (c) => c.end(),
  };
  const server = new grpc.Server(mode === "member" ? { interceptors: [peerAuthInterceptor({ self: () => "server", keys: () => keys, mutualTls: () => false, log: quiet })] } : {});
  server.addService(MembershipService, impl);
  await new Promise<void>((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  servers.push(server);
}

function ping(address: string): Promise<PingReply> {
  const c = new PeerMembershipClient(address, grpc.credentials.createInsecure(), { interceptors: [addressedTo("server"), peerSigner(() => "client", () => keys, Date.now, quiet)] });
  const p = call(c, c.ping, { cluster: "deltaset", from: "client", target: "server", seq: 7n, updates: [] } as never, { timeoutMs: 3000 }) as Promise<PingReply>;
  return p.finally(() => c.close());
}

before(async () => {
  await serve("127.0.0.185:7651", "member");
  await serve("127.0.0.185:7652", "no-key");
  await serve("127.0.0.185:7653", "replay");
});
after(() => {
  for (const s of servers) s.forceShutdown();
});

describe("signed replies to peer calls", () => {
  it("accepts a member's answer, which carries a trailer for this call", async () => {
    const c = new PeerMembershipClient("127.0.0.185:7651", grpc.credentials.createInsecure(), { interceptors: [addressedTo("server"), peerSigner(() => "client", () => keys, Date.now, quiet)] });
    try {
      const reply = await new Promise<PingReply>((resolve, reject) => {
        const call = c.ping({ cluster: "deltaset", from: "client", target: "server", seq: 7n, updates: [] } as never, (e, r) => (e ? reject(e) : resolve(r!)));
        call.on("status", (s: grpc.StatusObject) => (lastTrailer = s.metadata.get(REPLY_HEADER)[0] as string | undefined));
      });
      assert.equal(reply.ack, true);
      assert.match(lastTrailer ?? "", /^v1 /);
    } finally {
      c.close();
    }
  });

  it("refuses an answer from a server without the cluster key (a forged acknowledgement)", async () => {
    await assert.rejects(ping("127.0.0.185:7652"), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED && /no valid cluster key signature/.test(e.details));
  });

  it("refuses a member's trailer replayed in the answer to another call", async () => {
    assert.ok(lastTrailer !== undefined);
    await assert.rejects(ping("127.0.0.185:7653"), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
  });
});
