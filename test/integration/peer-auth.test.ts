// Peer authentication with a cluster key, from the outside: two real node processes sharing a key
// file form a cluster, and a client that misbehaves (no key, a wrong key, a replayed proof, a proof
// for one node id and a message naming another) is refused with UNAUTHENTICATED and changes
// nothing: no injected element, no member made LEFT or DEAD, no fake member. Refusals are counted
// and logged. A node on a non-loopback address without a key or mutual TLS refuses to start.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { GossipClient, GossipFrame, GossipService, PayloadKind, StateChunk, type StateReply } from "../../services/gen/deltaset/v1/gossip.ts";
import { MemberState, MembershipService } from "../../services/gen/deltaset/v1/membership.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { call, membershipClient, replicaClient } from "../../services/client/rpc.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { BODY_HEADER, PROOF_HEADER, STREAM_BODY, bodyDigest, newNonce, signProof, signStreamMessage } from "../../services/node/peer-proof.ts";
import { withTrailingMac } from "../../services/common/trailing-mac.ts";
import { type NodeProcess, runCli, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";
import { present } from "../helpers/presence.ts";
import { statusOf } from "../helpers/grpc-status.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-peer-auth-"));
const keyFile = join(dir, "cluster.key");
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"];
const KEY = generateClusterKey();
const WRONG_KEY = generateClusterKey();
const keyring = parseClusterKeys(KEY, "test");
const wrongKeyring = parseClusterKeys(WRONG_KEY, "test");
const P = 64;
let p1: NodeProcess;
let p2: NodeProcess;

after(async () => {
  await Promise.all([p1, p2].map((n) => n?.stop()));
  rmSync(dir, { recursive: true, force: true });
});

before(async () => {
  writeFileSync(keyFile, `# test cluster\n${KEY}\n`, { mode: 0o600 });
  const common = ["--cluster-key-file", keyFile, "--metrics-listen", "127.0.0.1:0", ...FAST];
  p1 = await startNodeProcess(["--listen", "127.0.0.101:0", "--node-id", "p1", "--data-dir", join(dir, "p1"), ...common]);
  p2 = await startNodeProcess(["--listen", "127.0.0.102:0", "--node-id", "p2", "--data-dir", join(dir, "p2"), "--seeds", p1.address, ...common]);
});

async function view(address: string): Promise<Record<string, string>> {
  const c = membershipClient(address);
  try {
    const r = await call(c, c.members, { includeDeparted: true }, { timeoutMs: 3000 });
    return Object.fromEntries(r.members.map((m) => [m.nodeId, MemberState[m.state]!]));
  } finally {
    c.close();
  }
}

/** A frame from `from` carrying one element of `key` (the injection an attacker would try). */
function injection(from: string, key: string, element: string): GossipFrame {
  const d = AWSet.bottom().add(`${from}~attack`, [Buffer.from(element)]);
  return GossipFrame.fromPartial({
    cluster: "deltaset",
    from,
    frameId: 1n,
    partitions: P,
    payloads: [{ partition: partitionOf(key, P), kind: PayloadKind.DELTA, seq: 1n, keys: [{ key, state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(d)) } }] }],
  });
}

/** A PushState chunk from p1 holding one whole key of one element, added under `replica`. */
function stateChunkOf(key: string, element: string, replica: string): StateChunk {
  const d = AWSet.bottom().add(replica, [Buffer.from(element)]);
  return StateChunk.fromPartial({
    cluster: "deltaset",
    from: "p1",
    partitions: P,
    partition: partitionOf(key, P),
    key,
    type: ObjectType.AWSET,
    context: { vv: [{ replica, counter: 1n }], cloud: [] },
    rangeOpen: true,
    slice: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(AWSet.fromParts(d.entries, AWSet.bottom().ctx))) },
    keyDone: true,
  });
}

/** A PushState chunk as sent with the MAC of place `index` on the stream of `nonce`, signed with `keys`. */
function maccedChunk(keys: typeof keyring, c: StateChunk, nonce: string, index: number): StateChunk {
  const bare = GossipService.pushState.requestSerialize({ ...c, mac: Buffer.alloc(0) });
  return StateChunk.decode(withTrailingMac(bare, 20, signStreamMessage(keys, "frame", GossipService.pushState.path, nonce, index, bodyDigest(bare))));
}

/** A unary call's proof, as `nodeId` signs it for node `to` (p2, which every test here calls). */
function proof(keys: typeof keyring, path: string, nodeId: string, body: string, to = "p2"): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(PROOF_HEADER, signProof(keys, path, nodeId, body, Date.now(), undefined, to));
  md.set(BODY_HEADER, body); // the digest the proof covers, named so it is checked before decoding
  return md;
}

const exchangeProof = (keys: typeof keyring, nodeId: string, f: GossipFrame, to = "p2") =>
  proof(keys, GossipService.exchange.path, nodeId, bodyDigest(GossipService.exchange.requestSerialize(f)), to);

describe("two nodes with a cluster key", () => {
  it("form a cluster and replicate", async () => {
    for (const n of [p1, p2]) await eventually(`both alive on ${n.nodeId}`, () => view(n.address), (v) => v.p1 === "ALIVE" && v.p2 === "ALIVE");
    const c = replicaClient(p1.address);
    await call(c, c.add, { key: "k", elements: [Buffer.from("real")], texts: [] }).finally(() => c.close());
    await eventually("replicated to p2", () => present(p2.address, "k", "real"), (v) => v);
    assert.match(p1.logs(), /"peerAuth":"cluster keys [0-9a-f]{12}"/);
    assert.ok(!p1.logs().includes(KEY), "the key reached a log");
  });

  it("refuse a spoofed Exchange in a live member's name without a key or with a wrong one, applying nothing", async () => {
    const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
    try {
      const f = injection("p1", "victim", "injected");
      const none = await statusOf(call(g, g.exchange, f));
      assert.equal(none.code, grpc.status.UNAUTHENTICATED);
      assert.match(none.details, /cluster key proof/);
      const wrong = await statusOf(call(g, g.exchange, f, { metadata: exchangeProof(wrongKeyring, "p1", f) }));
      assert.equal(wrong.code, grpc.status.UNAUTHENTICATED);
      assert.match(wrong.details, /does not verify/);
      // A proof made for another message does not cover this one.
      const other = injection("p1", "victim", "something-else");
      const swapped = await statusOf(call(g, g.exchange, f, { metadata: exchangeProof(keyring, "p1", other) }));
      assert.equal(swapped.code, grpc.status.UNAUTHENTICATED);
      // A key holder speaking as p2 cannot send a frame naming p1.
      const mismatch = await statusOf(call(g, g.exchange, f, { metadata: exchangeProof(keyring, "p2", f) }));
      assert.equal(mismatch.code, grpc.status.UNAUTHENTICATED);
      assert.match(mismatch.details, /not the sender/);
    } finally {
      g.close();
    }
    assert.equal(await present(p2.address, "victim", "injected"), false);
    assert.equal(await present(p1.address, "victim", "injected"), false);
  });

  it("refuse a spoofed PushState stream without a key", async () => {
    const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
    try {
      const r = await statusOf(
        new Promise<StateReply>((resolve, reject) => {
          const s = g.pushState((err, res) => (err ? reject(err) : resolve(res)));
          s.write(StateChunk.fromPartial({ cluster: "deltaset", from: "p1", partitions: P, partition: 0, partitionDone: true }));
          s.end();
        }),
      );
      assert.equal(r.code, grpc.status.UNAUTHENTICATED);
    } finally {
      g.close();
    }
  });

  it("refuse PushState chunks under a valid stream proof (one taken from another stream) unless each carries its MAC for its place", async () => {
    const path = GossipService.pushState.path;
    const key = "victim-state";
    const injected = stateChunkOf(key, "injected", "p1~attack");
    const done = StateChunk.fromPartial({ cluster: "deltaset", from: "p1", partitions: P, partition: 0, partitionDone: true });
    const macced = (c: StateChunk, nonce: string, index: number) => maccedChunk(keyring, c, nonce, index);
    const push = (nonce: string, chunks: StateChunk[], sender?: string) => {
      const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set(PROOF_HEADER, signProof(keyring, path, "p1", STREAM_BODY, Date.now(), nonce, "p2"));
      if (sender !== undefined) md.set("deltaset-state-sender", sender);
      return statusOf(
        new Promise<StateReply>((resolve, reject) => {
          const s = g.pushState(md, (err, res) => (err ? reject(err) : resolve(res)));
          for (const c of chunks) s.write(c);
          s.end();
        }),
      ).finally(() => g.close());
    };
    // The proof verifies (as a captured one would), but the chunk has no MAC of the key holder's.
    const bare = await push(newNonce(), [injected]);
    assert.equal(bare.code, grpc.status.UNAUTHENTICATED);
    assert.match(bare.details, /MAC/);
    // A MAC made for another stream, or for another place on this one.
    const other = newNonce();
    assert.equal((await push(newNonce(), [macced(injected, other, 0)])).code, grpc.status.UNAUTHENTICATED);
    const n = newNonce();
    assert.equal((await push(n, [macced(injected, n, 1)])).code, grpc.status.UNAUTHENTICATED);
    assert.equal(await present(p2.address, key, "injected"), false);
    // What a key holder sends, each chunk with the MAC of its place, is taken.
    const ok = newNonce();
    const taken = await push(ok, [macced(done, ok, 0)], "p1");
    assert.equal(taken.code, 0, taken.details);
    // The stream's sender named in metadata (which ends Contexts claims) must be the proven one.
    const renamed = await push(newNonce(), [], "p2");
    assert.equal(renamed.code, grpc.status.UNAUTHENTICATED);
    assert.match(renamed.details, /not the sender/);
  });

  it("accept a correctly signed frame once and refuse it replayed", async () => {
    const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
    try {
      // An empty frame (no payload, no ack): harmless, so the test can send it as p1.
      const f = GossipFrame.fromPartial({ cluster: "deltaset", from: "p1", frameId: 99n, partitions: P });
      const md = exchangeProof(keyring, "p1", f);
      const first = await statusOf(call(g, g.exchange, f, { metadata: md }));
      assert.equal(first.code, 0, first.details);
      const again = await statusOf(call(g, g.exchange, f, { metadata: md }));
      assert.equal(again.code, grpc.status.UNAUTHENTICATED);
      assert.match(again.details, /already used/);
    } finally {
      g.close();
    }
  });

  it("refuse a frame whose proof names another receiver, or none", async () => {
    const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
    try {
      // What p1 signed for p3 (captured on its way there) does not pass at p2, nor one for no one.
      const f = GossipFrame.fromPartial({ cluster: "deltaset", from: "p1", frameId: 98n, partitions: P });
      const elsewhere = await statusOf(call(g, g.exchange, f, { metadata: exchangeProof(keyring, "p1", f, "p3") }));
      assert.equal(elsewhere.code, grpc.status.UNAUTHENTICATED);
      assert.match(elsewhere.details, /another node as its receiver/);
      const unnamed = await statusOf(call(g, g.exchange, f, { metadata: exchangeProof(keyring, "p1", f, "*") }));
      assert.equal(unnamed.code, grpc.status.UNAUTHENTICATED);
      assert.match(unnamed.details, /names no receiver/);
    } finally {
      g.close();
    }
  });

  it("refuse a client-sent Leave for another member, keyed or not", async () => {
    const m = membershipClient(p2.address);
    try {
      const leave = { cluster: "deltaset", nodeId: "p1", incarnation: 1n << 62n };
      assert.equal((await statusOf(call(m, m.leave, leave))).code, grpc.status.UNAUTHENTICATED);
      const asOther = proof(keyring, MembershipService.leave.path, "p2", bodyDigest(MembershipService.leave.requestSerialize(leave)));
      assert.equal((await statusOf(call(m, m.leave, leave, { metadata: asOther }))).code, grpc.status.UNAUTHENTICATED);
    } finally {
      m.close();
    }
    assert.equal((await view(p2.address)).p1, "ALIVE");
  });

  it("refuse a Ping piggybacking DEAD of a member, and a Join under a made-up id, from an unauthenticated caller", async () => {
    const m = membershipClient(p2.address);
    try {
      const ping = {
        cluster: "deltaset", from: "p1", seq: 1n, target: "p2",
        updates: [{ nodeId: "p1", address: p1.address, state: MemberState.DEAD, incarnation: 1n << 62n, sinceUnixMs: BigInt(Date.now()) }],
      };
      assert.equal((await statusOf(call(m, m.ping, ping))).code, grpc.status.UNAUTHENTICATED);
      const join = { cluster: "deltaset", self: { nodeId: "fake", address: "127.0.0.103:1", state: MemberState.ALIVE, incarnation: 1n, sinceUnixMs: 0n } };
      assert.equal((await statusOf(call(m, m.join, join))).code, grpc.status.UNAUTHENTICATED);
    } finally {
      m.close();
    }
    const v = await view(p2.address);
    assert.equal(v.p1, "ALIVE");
    assert.equal(v.fake, undefined);
  });

  it("accept a suspicion from an authenticated peer, which the suspected node refutes with a higher incarnation", async () => {
    const before = await (async () => {
      const c = membershipClient(p2.address);
      try {
        return (await call(c, c.members, { includeDeparted: true })).members.find((m) => m.nodeId === "p2")!;
      } finally {
        c.close();
      }
    })();
    const m = membershipClient(p2.address);
    try {
      const ping = {
        cluster: "deltaset", from: "p1", seq: 7n, target: "p2",
        updates: [{ ...before, state: MemberState.SUSPECT }],
      };
      const md = proof(keyring, MembershipService.ping.path, "p1", bodyDigest(MembershipService.ping.requestSerialize(ping)));
      const reply = await call(m, m.ping, ping, { metadata: md });
      const self = reply.updates.find((u) => u.nodeId === "p2");
      assert.ok(self !== undefined, "the reply carries the refutation");
      assert.equal(self.state, MemberState.ALIVE);
      assert.ok(self.incarnation > before.incarnation);
    } finally {
      m.close();
    }
  });

  it("never admit a node holding another key, and log the refusal on both sides", async () => {
    const otherKeyFile = join(dir, "other.key");
    writeFileSync(otherKeyFile, `${WRONG_KEY}\n`, { mode: 0o600 });
    const p3 = await startNodeProcess(["--listen", "127.0.0.103:0", "--node-id", "p3", "--data-dir", join(dir, "p3"), "--seeds", p1.address, "--cluster-key-file", otherKeyFile, ...FAST]);
    try {
      await eventually("p3 sees its join refused", async () => p3.logs(), (l) => /"level":"warn","msg":"a peer refused our call".*"method":"Join".*does not verify/.test(l));
      await eventually("p1 logs the refused join", async () => p1.logs(), (l) => /"msg":"peer call refused".*"method":"Join","reason":"proof-invalid".*"claimed":"p3"/.test(l));
      assert.equal((await view(p1.address)).p3, undefined);
    } finally {
      await p3.stop();
    }
  });

  it("count refusals by reason, and log them at warn without the key", async () => {
    const metrics = /"endpoint":"(http:[^"]+)"/.exec(p2.logs())?.[1];
    assert.ok(metrics !== undefined);
    const text = await (await fetch(metrics)).text();
    for (const reason of ["proof-missing", "proof-invalid", "proof-replayed", "sender-mismatch"]) {
      assert.match(text, new RegExp(`deltaset_auth_refused_total\\{[^}]*reason="${reason}"[^}]*\\} [1-9]`), reason);
    }
    assert.match(p2.logs(), /"level":"warn","msg":"peer call refused".*"reason":"proof-missing"/);
    assert.ok(!p2.logs().includes(KEY) && !p2.logs().includes(WRONG_KEY));
  });

});

describe("key rotation without a restart", () => {
  const NEW_KEY = generateClusterKey();
  const newKeyring = parseClusterKeys(NEW_KEY, "test");
  const reloads = (n: NodeProcess) => (n.logs().match(/"msg":"credentials reloaded"/g) ?? []).length;

  /** Rewrite the shared key file and SIGHUP both nodes; resolves once both reloaded it. */
  async function install(lines: string[]): Promise<void> {
    const before = [p1, p2].map(reloads);
    writeFileSync(keyFile, lines.join("\n") + "\n", { mode: 0o600 });
    for (const n of [p1, p2]) n.child.kill("SIGHUP");
    for (const [i, n] of [p1, p2].entries()) await eventually(`${n.nodeId} reloaded`, async () => reloads(n), (c) => c > before[i]!);
  }

  async function accepted(keys: typeof keyring): Promise<boolean> {
    const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
    try {
      const f = GossipFrame.fromPartial({ cluster: "deltaset", from: "p1", frameId: 100n, partitions: P });
      return (await statusOf(call(g, g.exchange, f, { metadata: exchangeProof(keys, "p1", f) }))).code === 0;
    } finally {
      g.close();
    }
  }

  async function replicates(element: string): Promise<void> {
    const c = replicaClient(p1.address);
    await call(c, c.add, { key: "rot", elements: [Buffer.from(element)], texts: [] }).finally(() => c.close());
    await eventually(`${element} replicated`, () => present(p2.address, "rot", element), (v) => v);
  }

  it("adds a key, signs with it while the old one still verifies, then drops the old one", async () => {
    assert.equal(await accepted(newKeyring), false);
    // 1. The new key verifies; the old one still signs.
    await install([KEY, NEW_KEY]);
    assert.equal(await accepted(newKeyring), true);
    assert.equal(await accepted(keyring), true);
    await replicates("step-1");
    // 2. The new key signs; a node still signing with the old one is accepted.
    await install([NEW_KEY, KEY]);
    assert.equal(await accepted(keyring), true);
    await replicates("step-2");
    // 3. The old key is gone: its proofs are refused, the cluster goes on with the new one.
    await install([NEW_KEY]);
    assert.equal(await accepted(keyring), false);
    assert.equal(await accepted(newKeyring), true);
    await replicates("step-3");
    for (const n of [p1, p2]) {
      assert.equal(n.child.exitCode, null, `${n.nodeId} is still running after SIGHUP`);
      assert.ok(!n.logs().includes(NEW_KEY));
    }
  });

  it("keeps the keys in use when the file turns bad, and says so (not that credentials were reloaded)", async () => {
    const before = reloads(p2);
    const failed = () => (p2.logs().match(/"msg":"credentials reload failed/g) ?? []).length;
    const failedBefore = failed();
    writeFileSync(keyFile, "not a key\n");
    p2.child.kill("SIGHUP");
    await eventually("p2 tried to reload", async () => failed(), (c) => c > failedBefore);
    assert.equal(reloads(p2), before, "a failed reload logged 'credentials reloaded'");
    assert.match(p2.logs(), /"level":"error","msg":"reload: cluster keys kept as it was"/);
    assert.match(p2.logs(), /"msg":"credentials reload failed[^"]*".*"kept":\["cluster keys"\]/);
    assert.ok(!p2.logs().includes("not a key"));
    assert.equal(await accepted(newKeyring), true);
    writeFileSync(keyFile, NEW_KEY + "\n");
  });

  it("stops a stream opened with a key once that key is removed: its later chunks are refused", async () => {
    const path = GossipService.pushState.path;
    const first = stateChunkOf("before-rotation", "early", "p1~holder");
    const late = stateChunkOf("rotated-out", "late", "p1~former");
    const nonce = newNonce();
    const macced = (c: StateChunk, index: number) => maccedChunk(newKeyring, c, nonce, index);
    // A stream opened by a holder of the key in use (NEW_KEY), its first chunk taken.
    const g = new GossipClient(p2.address, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set(PROOF_HEADER, signProof(newKeyring, path, "p1", STREAM_BODY, Date.now(), nonce, "p2"));
    let stream!: grpc.ClientWritableStream<StateChunk>;
    const status = statusOf(new Promise<StateReply>((resolve, reject) => (stream = g.pushState(md, (err, res) => (err ? reject(err) : resolve(res))))));
    try {
      stream.write(macced(first, 0));
      // Taken: the stream is open under the key in use.
      await eventually("the first chunk applied", () => present(p2.address, "before-rotation", "early"), (v) => v);
      // The key is rotated out (a third one replaces it on both nodes).
      await install([generateClusterKey()]);
      stream.write(macced(late, 1));
      stream.end();
      const r = await status;
      assert.equal(r.code, grpc.status.UNAUTHENTICATED, r.details);
      assert.match(r.details, /MAC/);
      assert.equal(await present(p2.address, "rotated-out", "late"), false);
    } finally {
      g.close();
    }
    // The nodes go on under the new key.
    await replicates("after-rotation");
  });
});

describe("safe defaults", () => {
  it("refuse to start on a non-loopback address without a cluster key or mutual TLS", async () => {
    // 192.0.2.1 (TEST-NET-1) is never bound: the node stops before it binds anything.
    const r = await runCli(["node", "--listen", "192.0.2.1:7070", "--data-dir", join(dir, "nl")]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /neither a cluster key \(--cluster-key-file\) nor mutual TLS.*--insecure-peers/);
  });

  it("with --insecure-peers, start and warn (here the bind then fails: the address is not local)", async () => {
    const r = await runCli(["node", "--listen", "192.0.2.1:7070", "--data-dir", join(dir, "nl2"), "--insecure-peers", "--insecure-clients"]);
    // Every weakness that applies gets its own warning.
    assert.match(r.stderr, /"level":"warn","msg":"--insecure-peers: peer calls are NOT authenticated/);
    assert.match(r.stderr, /"level":"warn","msg":"--insecure-clients: the client API is open/);
    assert.match(r.stderr, /"level":"warn","msg":"serving WITHOUT TLS/);
    assert.doesNotMatch(r.stderr, /neither a cluster key/);
  });

  it("refuse to start on a non-loopback address without client tokens; with --insecure-clients, start and warn", async () => {
    const refused = await runCli(["node", "--listen", "192.0.2.1:7070", "--data-dir", join(dir, "nc"), "--cluster-key-file", keyFile]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /without client tokens \(--auth-tokens-file\).*--insecure-clients/);
    const open = await runCli(["node", "--listen", "192.0.2.1:7070", "--data-dir", join(dir, "nc2"), "--cluster-key-file", keyFile, "--insecure-clients", "--peer-legacy-proofs"]);
    assert.match(open.stderr, /"level":"warn","msg":"--insecure-clients: the client API is open/);
    assert.match(open.stderr, /"level":"warn","msg":"--peer-legacy-proofs: peer calls of an earlier version are accepted/);
    assert.doesNotMatch(open.stderr, /--insecure-peers: peer calls/);
    assert.doesNotMatch(open.stderr, /without client tokens/);
  });
});
