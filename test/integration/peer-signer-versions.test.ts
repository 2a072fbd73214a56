// Which proofs a node signs its peer calls with: v2, naming the node it calls; and during a rolling
// upgrade (--peer-legacy-proofs) also the earlier version's v1 under the header nodes of that
// version read (they refuse v2 as malformed, so a mixed cluster would split), with the v2 one
// beside it, which this version's nodes take whether they accept legacy proofs or not (so the
// second rollout, turning the setting off, does not split the cluster either). A v1 proof alone
// is refused by a node not taking legacy proofs. Real gRPC servers on loopback.
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { PeerMembershipClient } from "../../services/client/peer-clients.ts";
import { addressedTo } from "../../services/client/peer-receiver.ts";
import { call } from "../../services/client/rpc.ts";
import { createLogger } from "../../services/common/logger.ts";
import { MembershipService, type MembershipServer, type PingReply } from "../../services/gen/deltaset/v1/membership.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { peerAuthInterceptor, peerSigner } from "../../services/node/peer-interceptors.ts";
import { PROOF_HEADER, PROOF_V2_HEADER, parseProof } from "../../services/node/peer-proof.ts";

const keys = parseClusterKeys(`${generateClusterKey()}\n`, "test");
const quiet = createLogger("error", {}, () => {});
const servers: grpc.Server[] = [];
const seen: string[] = [];
/** Drop the v2 proof before the node checks the call (as if only a v1 one had been sent). */
let stripV2 = false;

/** A Membership server answering Ping, taking legacy proofs or not, recording every proof it got. */
async function serve(address: string, legacy: boolean): Promise<void> {
  const impl: MembershipServer = {
    ping: (c, cb) => cb(null, { from: "server", seq: c.request.seq, ack: true, updates: [] }),
    pingReq: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    join: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    leave: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    members: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    watch: (c) => c.end(),
  };
  const record: grpc.ServerInterceptor = (_method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (md, pass) => {
            // What a node of the earlier version reads: this header alone.
            seen.push(String(md.get(PROOF_HEADER)[0]));
            if (stripV2) md.remove(PROOF_V2_HEADER);
            pass(md);
          },
        }),
    });
  const auth = peerAuthInterceptor({ self: () => "server", keys: () => keys, mutualTls: () => false, legacyProofs: () => legacy, log: quiet });
  const server = new grpc.Server({ interceptors: [record, auth] });
  server.addService(MembershipService, impl);
  await new Promise<void>((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  servers.push(server);
}

function ping(address: string, legacySigner: boolean): Promise<PingReply> {
  const c = new PeerMembershipClient(address, grpc.credentials.createInsecure(), { interceptors: [addressedTo("server"), peerSigner(() => "client", () => keys, Date.now, quiet, () => legacySigner)] });
  const p = call(c, c.ping, { cluster: "deltaset", from: "client", target: "server", seq: 7n, updates: [] } as never, { timeoutMs: 3000 }) as Promise<PingReply>;
  return p.finally(() => c.close());
}

before(async () => {
  await serve("127.0.0.186:7661", false);
  await serve("127.0.0.186:7662", true);
});
after(() => {
  for (const s of servers) s.forceShutdown();
});

describe("the proofs a node signs", () => {
  it("are v2 naming the receiver, and v1 while taking legacy proofs (which a member in legacy mode accepts)", async () => {
    assert.equal((await ping("127.0.0.186:7661", false)).ack, true);
    const v2 = parseProof(seen.at(-1));
    assert.equal(v2?.version, 2);
    assert.equal(v2?.to, "server");

    assert.equal((await ping("127.0.0.186:7662", true)).ack, true);
    const v1 = parseProof(seen.at(-1));
    assert.equal(v1?.version, 1);
    assert.equal(v1?.to, undefined);

    // A node not taking legacy proofs takes the v2 proof beside it, and refuses the v1 one alone.
    assert.equal((await ping("127.0.0.186:7661", true)).ack, true);
    stripV2 = true;
    try {
      await assert.rejects(ping("127.0.0.186:7661", true), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED && /earlier version/.test(e.details));
    } finally {
      stripV2 = false;
    }
  });
});
