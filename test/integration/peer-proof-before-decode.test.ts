// A unary peer call's proof is checked from its metadata before any message byte is decoded: the
// call names its message's digest beside the proof, so a caller without the cluster key (a forged
// proof with a fresh time, no body digest, a malformed one) is refused with UNAUTHENTICATED and the
// node never decodes what it sent, however large. A key holder's call whose message is not the one
// its proof covers is refused after decoding. With --peer-legacy-proofs (a rolling upgrade), a
// proof without a body digest, as earlier versions send, is accepted once its message is checked.
// Real gRPC servers on loopback with the node's interceptor and service definition.
import { strict as assert } from "node:assert";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { PeerMembershipClient } from "../../services/client/peer-clients.ts";
import { call } from "../../services/client/rpc.ts";
import { createLogger } from "../../services/common/logger.ts";
import { MembershipService, type MembershipServer, type PingReply, type PingRequest } from "../../services/gen/deltaset/v1/membership.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { peerAuthInterceptor, peerSigner, withBodyDigests } from "../../services/node/peer-interceptors.ts";
import { addressedTo } from "../../services/client/peer-receiver.ts";
import { BODY_HEADER, PROOF_HEADER, bodyDigest, signLegacyProof, signProof } from "../../services/node/peer-proof.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const keys = parseClusterKeys(`${generateClusterKey()}\n`, "test");
const otherKeys = parseClusterKeys(`${generateClusterKey()}\n`, "test");
const quiet = createLogger("error", {}, () => {});
const PATH = MembershipService.ping.path;

interface Served {
  address: string;
  server: grpc.Server;
  /** Ping messages the server decoded, and the ones its handler answered. */
  decoded: number;
  answered: number;
  refusals: string[];
}
const served: Served[] = [];

/** A Membership server with the node's peer interceptor and digesting definition, counting decodes. */
async function serve(host: string, legacy: boolean): Promise<Served> {
  const s: Served = { address: "", server: undefined as never, decoded: 0, answered: 0, refusals: [] };
  const def = withBodyDigests(MembershipService);
  const decodePing = def.ping.requestDeserialize;
  const counted = { ...def, ping: { ...def.ping, requestDeserialize: (b: Buffer) => (s.decoded++, decodePing(b)) } };
  const impl: MembershipServer = {
    ping: (c, cb) => (s.answered++, cb(null, { from: "server", seq: c.request.seq, ack: true, updates: [] })),
    pingReq: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    join: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    leave: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    members: (_c, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
    watch: (c) => c.end(),
  };
  s.server = new grpc.Server({
    "grpc.max_receive_message_length": 16 << 20,
    interceptors: [peerAuthInterceptor({ self: () => "server", keys: () => keys, mutualTls: () => false, legacyProofs: () => legacy, log: quiet, onRefused: (_svc, reason) => s.refusals.push(reason) })],
  });
  s.server.addService(counted as typeof MembershipService, impl);
  const port = await new Promise<number>((resolve, reject) => s.server.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  s.address = `${host}:${port}`;
  served.push(s);
  return s;
}

let strict: Served;
let legacy: Served;
before(async () => {
  strict = await serve("127.0.0.187", false);
  legacy = await serve("127.0.0.188", true);
});
after(() => {
  for (const s of served) s.server.forceShutdown();
});

/** A Ping of about `bytes` bytes (its `target` padded), from `from`. */
function pingOf(from: string, bytes = 0): PingRequest {
  return { cluster: "deltaset", from, target: "x".repeat(bytes), seq: 7n, updates: [] } as PingRequest;
}

/** Send `ping` with exactly this metadata from a plain (unsigning) client. */
async function send(s: Served, ping: PingRequest, metadata: grpc.Metadata): Promise<{ code: number; details: string }> {
  const c = new grpc.Client(s.address, grpc.credentials.createInsecure(), { "grpc.max_send_message_length": 16 << 20 });
  try {
    return await statusOf(
      new Promise<PingReply>((resolve, reject) =>
        c.makeUnaryRequest(PATH, MembershipService.ping.requestSerialize, MembershipService.ping.responseDeserialize, ping, metadata, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r!))),
      ),
    );
  } finally {
    c.close();
  }
}

function metadataOf(entries: Record<string, string>): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) md.set(k, v);
  return md;
}

const digestOf = (p: PingRequest) => bodyDigest(MembershipService.ping.requestSerialize(p));

describe("unary peer proofs checked before the message is decoded", () => {
  it("answers a key holder's signed call (the node's own signer names the body digest)", async () => {
    const c = new PeerMembershipClient(strict.address, grpc.credentials.createInsecure(), { interceptors: [addressedTo("server"), peerSigner(() => "client", () => keys, Date.now, quiet)] });
    const before = strict.decoded;
    try {
      const r = (await call(c, c.ping, pingOf("client") as never, { timeoutMs: 5000 })) as PingReply;
      assert.equal(r.ack, true);
    } finally {
      c.close();
    }
    assert.equal(strict.decoded, before + 1);
  });

  it("refuses without decoding a 4 MiB message under a forged fresh proof, a missing or malformed body digest, or a wrong key", async () => {
    const big = pingOf("p1", 4 << 20);
    const digest = digestOf(big);
    const forged = `v2 p1 server ${Date.now()} ${"A".repeat(22)} ${"B".repeat(43)}`;
    const cases: [string, Record<string, string>, RegExp][] = [
      ["forged MAC", { [PROOF_HEADER]: forged, [BODY_HEADER]: digest }, /does not verify/],
      ["wrong key", { [PROOF_HEADER]: signProof(otherKeys, PATH, "p1", digest, Date.now(), undefined, "server"), [BODY_HEADER]: digest }, /does not verify/],
      ["valid proof, no body digest", { [PROOF_HEADER]: signProof(keys, PATH, "p1", digest, Date.now(), undefined, "server") }, /deltaset-peer-body/],
      ["malformed body digest", { [PROOF_HEADER]: signProof(keys, PATH, "p1", digest, Date.now(), undefined, "server"), [BODY_HEADER]: "not-hex" }, /malformed/],
      ["no proof", { [BODY_HEADER]: digest }, /cluster key proof/],
    ];
    for (const [name, md, details] of cases) {
      const r = await send(strict, big, metadataOf(md));
      assert.equal(r.code, grpc.status.UNAUTHENTICATED, name);
      assert.match(r.details, details, name);
    }
    assert.equal(strict.decoded, 1, "only the signed call of the test before was decoded");
    assert.equal(strict.answered, 1);
    assert.deepEqual(strict.refusals, ["proof-invalid", "proof-invalid", "proof-body-missing", "proof-malformed", "proof-missing"]);
  });

  it("refuses a key holder's proof whose named digest is not the message's, after decoding it", async () => {
    const sent = pingOf("p1");
    const covered = pingOf("p1", 10);
    const md = { [PROOF_HEADER]: signProof(keys, PATH, "p1", digestOf(covered), Date.now(), undefined, "server"), [BODY_HEADER]: digestOf(covered) };
    const r = await send(strict, sent, metadataOf(md));
    assert.equal(r.code, grpc.status.UNAUTHENTICATED);
    assert.match(r.details, /not the one the peer proof covers/);
    assert.equal(strict.answered, 1, "the handler never saw it");
    assert.equal(strict.refusals.at(-1), "proof-body-mismatch");
  });

  it("with legacy proofs on, accepts an earlier version's proof without a body digest once its message matches, and still refuses a forged one", async () => {
    const p = pingOf("p1");
    const ok = await send(legacy, p, metadataOf({ [PROOF_HEADER]: signLegacyProof(keys, PATH, "p1", digestOf(p), Date.now()) }));
    assert.equal(ok.code, grpc.status.OK, ok.details);
    const forged = await send(legacy, p, metadataOf({ [PROOF_HEADER]: signLegacyProof(otherKeys, PATH, "p1", digestOf(p), Date.now()) }));
    assert.equal(forged.code, grpc.status.UNAUTHENTICATED);
    // What the setting costs: without a body digest the message is decoded before it can be checked.
    assert.equal(legacy.decoded, 2);
    assert.equal(legacy.answered, 1);
    assert.deepEqual(legacy.refusals, ["proof-invalid"]);
  });
});
