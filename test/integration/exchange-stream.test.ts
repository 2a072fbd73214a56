// Gossip frames on one long-lived ExchangeStream per neighbour, on real gRPC servers on loopback.
// In process, with the interceptors nodes run: frames are answered in order on one stream; with a
// cluster key every frame and every reply carries its own MAC, so a reply from a server without
// the key never reaches the caller; a refused frame ends the stream with its status and the next
// frame opens a new one; a neighbour that stops answering fails the waiting frames at the deadline;
// a neighbour without the method is marked for unary calls. With real node processes sharing a key:
// they gossip over streams (none falls back), a node with the stream turned off still replicates
// with them, and raw frames without a valid MAC for their place in the stream, or naming another
// sender, are refused and change nothing.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { AWSet, AWSetLattice, ObjectType } from "../../services/crdt/index.ts";
import { GossipClient, GossipFrame, GossipReply, GossipService, PayloadKind } from "../../services/gen/deltaset/v1/gossip.ts";
import { PeerGossipClient } from "../../services/client/peer-clients.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { createLogger } from "../../services/common/logger.ts";
import { FrameStream } from "../../services/gossip/frame-stream.ts";
import { serveFrameStream } from "../../services/gossip/node-gossip.ts";
import { partitionOf } from "../../services/gossip/partition.ts";
import { generateClusterKey, parseClusterKeys } from "../../services/node/cluster-keys.ts";
import { peerAuthInterceptor, peerSigner, withBodyDigests } from "../../services/node/peer-interceptors.ts";
import { addressedTo } from "../../services/client/peer-receiver.ts";
import { PROOF_HEADER, STREAM_BODY, bodyDigest, newNonce, signProof, signStreamMessage } from "../../services/node/peer-proof.ts";
import { StrictStringServer } from "../../services/node/strict-strings.ts";
import { eventually } from "../helpers/eventually.ts";
import { present } from "../helpers/presence.ts";
import { TestCluster } from "../helpers/test-cluster.ts";

const KEY = generateClusterKey();
const keys = parseClusterKeys(`${KEY}\n`, "test");
const quiet = createLogger("error", {}, () => {});
const HOST = "127.0.0.204";
const servers: grpc.Server[] = [];
after(() => {
  for (const s of servers) s.forceShutdown();
});

const frame = (frameId: bigint, from = "client"): GossipFrame => GossipFrame.fromPartial({ cluster: "deltaset", from, frameId, partitions: 64 });

type Receive = (f: GossipFrame) => Promise<{ reply: GossipReply } | { refused: { code: grpc.status; details: string } }>;

/** A Gossip server with the node's interceptors (key or none) whose ExchangeStream runs `receive`; seen: frames that reached it. */
async function serve(port: number, withKey: boolean, receive: Receive, streamImpl?: (c: grpc.ServerDuplexStream<GossipFrame, GossipReply>) => void, maxInFlight?: number): Promise<{ address: string; seen: GossipFrame[] }> {
  const seen: GossipFrame[] = [];
  const server = new StrictStringServer(withKey ? { interceptors: [peerAuthInterceptor({ self: () => "server", keys: () => keys, mutualTls: () => false, log: quiet })] } : {});
  const unimplemented = { code: grpc.status.UNIMPLEMENTED, details: "" };
  server.addService(withBodyDigests(GossipService), {
    exchange: (_c: unknown, cb: grpc.sendUnaryData<GossipReply>) => cb(unimplemented),
    pushState: (_c: unknown, cb: grpc.sendUnaryData<never>) => cb(unimplemented),
    handOver: (_c: unknown, cb: grpc.sendUnaryData<never>) => cb(unimplemented),
    exchangeStream:
      streamImpl ??
      ((c: grpc.ServerDuplexStream<GossipFrame, GossipReply>) =>
        serveFrameStream(c, (f) => {
          seen.push(f);
          return receive(f);
        }, quiet, maxInFlight)),
  });
  const address = `${HOST}:${port}`;
  await new Promise<void>((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  servers.push(server);
  return { address, seen };
}

const ok: Receive = async (f) => ({ reply: GossipReply.fromPartial({ from: "server", acks: [{ partition: 1, seq: f.frameId }] }) });

function signedClient(address: string): GossipClient {
  return new PeerGossipClient(address, grpc.credentials.createInsecure(), { interceptors: [addressedTo("server"), peerSigner(() => "client", () => keys, Date.now, quiet)] });
}

/** Run `fn` with a FrameStream on `client`; both are closed afterwards. */
async function withFrameStream(client: GossipClient, timeoutMs: number, fn: (fs: FrameStream) => Promise<void>): Promise<void> {
  const fs = new FrameStream(() => client.exchangeStream(new grpc.Metadata()), timeoutMs);
  try {
    await fn(fs);
  } finally {
    fs.close();
    client.close();
  }
}

describe("ExchangeStream in process", () => {
  it("answers frames in order on one stream, each reply signed for its place", async () => {
    const s = await serve(7793, true, ok);
    await withFrameStream(signedClient(s.address), 3000, async (fs) => {
      const replies = await Promise.all([1n, 2n, 3n, 4n, 5n].map((id) => fs.send(frame(id))));
      assert.deepEqual(replies.map((r) => r.frameId), [1n, 2n, 3n, 4n, 5n]);
      assert.deepEqual(replies.map((r) => r.acks[0]!.seq), [1n, 2n, 3n, 4n, 5n]);
      assert.equal((await fs.send(frame(6n))).frameId, 6n);
      assert.equal(fs.opened, 1);
      assert.deepEqual(s.seen.map((f) => f.frameId), [1n, 2n, 3n, 4n, 5n, 6n]);
    });
  });

  it("with a cluster key encodes each frame and each reply once: the bytes signed are the bytes sent", async () => {
    const s = await serve(7799, true, ok);
    const counted = { frames: 0, replies: 0 };
    const frameEncode = GossipFrame.encode;
    const replyEncode = GossipReply.encode;
    GossipFrame.encode = (m, w) => (counted.frames++, frameEncode(m, w));
    GossipReply.encode = (m, w) => (counted.replies++, replyEncode(m, w));
    try {
      await withFrameStream(signedClient(s.address), 3000, async (fs) => {
        const sent = [1n, 2n, 3n, 4n].map((id) => GossipFrame.fromPartial({ ...frame(id), payloads: [{ partition: 3, kind: PayloadKind.DELTA, seq: id, keys: [{ key: `k${id}`, state: { type: ObjectType.AWSET, payload: Buffer.alloc(200, Number(id)) } }] }] }));
        const replies = await Promise.all(sent.map((f) => fs.send(f)));
        // Every MAC verified both ways: the replies reached the caller, the frames the handler, whole.
        assert.deepEqual(replies.map((r) => r.acks[0]!.seq), [1n, 2n, 3n, 4n]);
        assert.deepEqual(s.seen.map((f) => f.payloads[0]!.keys[0]!.state!.payload), sent.map((f) => f.payloads[0]!.keys[0]!.state!.payload));
      });
    } finally {
      GossipFrame.encode = frameEncode;
      GossipReply.encode = replyEncode;
    }
    // Signing needs each message's bytes; the serializer then sends those bytes instead of
    // encoding the message again (it did, twice per message).
    assert.equal(counted.frames, 4);
    assert.equal(counted.replies, 4);
  });

  it("answers in frame order when frames finish out of order, pausing past the in-flight limit", async () => {
    let running = 0;
    let most = 0;
    // Later frames finish first: frame k takes (8 - k) * 15 ms.
    const s = await serve(7798, false, async (f) => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, (8 - Number(f.frameId)) * 15));
      running--;
      return ok(f);
    }, undefined, 3);
    await withFrameStream(new PeerGossipClient(s.address, grpc.credentials.createInsecure()), 5000, async (fs) => {
      const order: bigint[] = [];
      await Promise.all([1n, 2n, 3n, 4n, 5n, 6n, 7n].map((id) => fs.send(frame(id)).then((r) => void order.push(r.frameId))));
      assert.deepEqual(order, [1n, 2n, 3n, 4n, 5n, 6n, 7n]);
      assert.ok(most >= 2, "frames were applied concurrently");
      assert.ok(most <= 3, `at most 3 frames applied at once, saw ${most}`);
    });
  });

  it("refuses the replies of a server without the key: the caller never sees them", async () => {
    const s = await serve(7794, false, ok);
    await withFrameStream(signedClient(s.address), 3000, async (fs) => {
      await assert.rejects(fs.send(frame(1n)), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED && /MAC/.test(e.details));
      assert.equal(s.seen.length, 1, "the unkeyed server took the frame; its answer is what is refused");
    });
  });

  it("a refused frame ends the stream with its status; the next frame opens a new one", async () => {
    const s = await serve(7795, true, async (f) => (f.cluster === "other" ? { refused: { code: grpc.status.FAILED_PRECONDITION, details: "another cluster" } } : ok(f)));
    await withFrameStream(signedClient(s.address), 3000, async (fs) => {
      assert.equal((await fs.send(frame(1n))).frameId, 1n);
      await assert.rejects(fs.send({ ...frame(2n), cluster: "other" }), (e: grpc.ServiceError) => e.code === grpc.status.FAILED_PRECONDITION && /another cluster/.test(e.details));
      assert.equal((await fs.send(frame(3n))).frameId, 3n);
      assert.equal(fs.opened, 2);
    });
  });

  it("rejects the waiting frames when no reply comes within the deadline, and starts over", async () => {
    let answer = false;
    const s = await serve(7796, false, async (f) => {
      if (!answer) await new Promise((r) => setTimeout(r, 5000));
      return ok(f);
    });
    await withFrameStream(new PeerGossipClient(s.address, grpc.credentials.createInsecure()), 300, async (fs) => {
      const started = Date.now();
      const waiting = [fs.send(frame(1n)), fs.send(frame(2n))];
      for (const w of waiting) await assert.rejects(w, (e: grpc.ServiceError) => e.code === grpc.status.DEADLINE_EXCEEDED);
      assert.ok(Date.now() - started < 3000, "rejected at the deadline, not when the server answered");
      answer = true;
      assert.equal((await fs.send(frame(3n))).frameId, 3n);
      assert.equal(fs.opened, 2);
    });
  });

  it("marks a neighbour without the method (an older version) for unary calls", async () => {
    const server = new grpc.Server();
    server.addService({ exchange: GossipService.exchange }, { exchange: (_c: unknown, cb: grpc.sendUnaryData<GossipReply>) => cb(null, GossipReply.fromPartial({})) });
    await new Promise<void>((resolve, reject) => server.bindAsync(`${HOST}:7797`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
    servers.push(server);
    await withFrameStream(new PeerGossipClient(`${HOST}:7797`, grpc.credentials.createInsecure()), 3000, async (fs) => {
      await assert.rejects(fs.send(frame(1n)), (e: grpc.ServiceError) => e.code === grpc.status.UNIMPLEMENTED);
      assert.equal(fs.unsupported, true);
    });
  });
});

// ------------------------------------------------------------------ real node processes

const dir = mkdtempSync(join(tmpdir(), "deltaset-exchange-stream-"));
const keyFile = join(dir, "cluster.key");
const ADDRS = [1, 2, 3].map((i) => `127.0.0.${200 + i}:7791`);
const METRICS = [1, 2, 3].map((i) => `127.0.0.${200 + i}:7792`);
let cluster: TestCluster;

before(async () => {
  writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
  cluster = new TestCluster(dir, ADDRS, ["--cluster-key-file", keyFile, "--gossip-interval-ms", "100", "--gossip-push-local-ms", "5", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"], "x");
  await cluster.start(0, ["--metrics-listen", METRICS[0]!]);
  await cluster.start(1, ["--metrics-listen", METRICS[1]!]);
  // The third sends Exchange calls (as a node with the stream turned off or an older version would).
  await cluster.start(2, ["--metrics-listen", METRICS[2]!, "--gossip-exchange-stream", "false"]);
});
after(async () => {
  await cluster?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function transportEvent(i: number, event: string): Promise<number> {
  const text = await (await fetch(`http://${METRICS[i]}/metrics`)).text();
  const m = new RegExp(`^deltaset_gossip_transport_events_total\\{event="${event}"\\} (\\S+)$`, "m").exec(text);
  return Number(m?.[1] ?? 0);
}

/** A frame from `from` injecting one element of `key`, as bytes. */
function injection(from: string, key: string, element: string): Buffer {
  const d = AWSet.bottom().add(`${from}~attack`, [Buffer.from(element)]);
  return Buffer.from(
    GossipFrame.encode(
      GossipFrame.fromPartial({
        cluster: "deltaset",
        from,
        frameId: 1n,
        partitions: 64,
        payloads: [{ partition: partitionOf(key, 64), kind: PayloadKind.DELTA, seq: 1n, keys: [{ key, state: { type: ObjectType.AWSET, payload: Buffer.from(AWSetLattice.encode(d)) } }] }],
      }),
    ).finish(),
  );
}

/**
 * A raw ExchangeStream signed as `signAs` for node x1 (at ADDRS[1]): `macs(i, bytes)` gives each
 * frame's MAC (undefined: none). Resolves to the stream's final status and the replies it got.
 */
function rawStream(address: string, signAs: string, frames: Buffer[], macs: (i: number, bytes: Buffer, nonce: string) => Buffer | undefined): Promise<{ code: number; details: string; replies: number }> {
  const nonce = newNonce();
  const md = new grpc.Metadata();
  md.set(PROOF_HEADER, signProof(keys, GossipService.exchangeStream.path, signAs, STREAM_BODY, Date.now(), nonce, "x1"));
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const pass = (b: Buffer) => b;
  const s = client.makeBidiStreamRequest(GossipService.exchangeStream.path, pass, pass, md, { deadline: Date.now() + 5000 });
  let replies = 0;
  return new Promise((resolve) => {
    s.on("data", () => replies++);
    s.on("error", () => {});
    s.on("status", (st: grpc.StatusObject) => {
      client.close();
      resolve({ code: st.code, details: st.details, replies });
    });
    frames.forEach((f, i) => {
      const mac = macs(i, f, nonce);
      s.write(mac === undefined ? f : Buffer.concat([f, Buffer.from([(9 << 3) | 2, 32]), mac]));
    });
    s.end();
  });
}

const macFor = (index: number) => (_i: number, bytes: Buffer, nonce: string) => signStreamMessage(keys, "frame", GossipService.exchangeStream.path, nonce, index, bodyDigest(bytes));

describe("ExchangeStream between real nodes with a cluster key", () => {
  it("nodes gossip on streams, and a node that sends calls still replicates with them", { timeout: 60_000 }, async () => {
    for (const i of [0, 1, 2]) {
      const c = replicaClient(ADDRS[i]!);
      await call(c, c.add, { key: "shared", elements: [Buffer.from(`from-x${i}`)], texts: [] }).finally(() => c.close());
    }
    for (const a of ADDRS) {
      await eventually(`every add on ${a}`, async () => (await present(a, "shared", "from-x0")) && (await present(a, "shared", "from-x1")) && (await present(a, "shared", "from-x2")), (v) => v);
    }
    assert.ok((await transportEvent(0, "exchange_streams_opened")) >= 1);
    assert.ok((await transportEvent(1, "exchange_streams_opened")) >= 1);
    assert.equal(await transportEvent(2, "exchange_streams_opened"), 0);
    for (const i of [0, 1, 2]) assert.equal(await transportEvent(i, "exchange_stream_fallbacks"), 0);
  });

  it("refuses frames without a valid MAC for their place, or naming another sender, applying nothing", { timeout: 30_000 }, async () => {
    const target = ADDRS[1]!;
    const unsigned = await rawStream(target, "x0", [injection("x0", "victim", "no-mac")], () => undefined);
    assert.equal(unsigned.code, grpc.status.UNAUTHENTICATED);
    assert.match(unsigned.details, /MAC/);
    // A correctly signed frame is applied and answered.
    const good = await rawStream(target, "x0", [injection("x0", "victim", "first")], macFor(0));
    assert.deepEqual(good, { code: grpc.status.OK, details: "OK", replies: 1 });
    // The same frame and MAC again, second on a stream (a replay inside it): refused.
    const again = injection("x0", "victim", "replayed");
    const replayed = await rawStream(target, "x0", [again, again], macFor(0));
    assert.equal(replayed.code, grpc.status.UNAUTHENTICATED);
    assert.match(replayed.details, /MAC/);
    // A MAC made with another key.
    const otherKeys = parseClusterKeys(`${generateClusterKey()}\n`, "test");
    const forged = await rawStream(target, "x0", [injection("x0", "victim", "forged")], (i, b, n) => signStreamMessage(otherKeys, "frame", GossipService.exchangeStream.path, n, i, bodyDigest(b)));
    assert.equal(forged.code, grpc.status.UNAUTHENTICATED);
    // A key holder speaking as x0 cannot send a frame naming x2.
    const mismatch = await rawStream(target, "x0", [injection("x2", "victim", "as-x2")], macFor(0));
    assert.equal(mismatch.code, grpc.status.UNAUTHENTICATED);
    assert.match(mismatch.details, /not the sender/);
    await eventually("the one good frame applied", () => present(target, "victim", "first"), (v) => v);
  });

  it("a stream whose later frame is refused answers the frames before it, then ends with the refusal (never hangs)", { timeout: 60_000 }, async () => {
    // An interceptor refusing a message while the handler writes the answer to an earlier one could
    // lose the status (the caller then waited for its deadline): refusals now end the stream in order.
    const target = ADDRS[1]!;
    const outcomes: Array<{ code: number; replies: number }> = [];
    for (let i = 0; i < 40; i++) {
      const good = injection("x0", "victim", `before-${i}`);
      const bad = i % 2 === 0 ? Buffer.from([0x0f]) /* wire type 7: never decodes, whatever follows */ : injection("x0", "victim", `bad-mac-${i}`);
      const r = await rawStream(target, "x0", [good, bad], (j, b, n) => (j === 1 && i % 2 === 1 ? Buffer.alloc(32) : macFor(j)(j, b, n)));
      outcomes.push({ code: r.code, replies: r.replies });
    }
    for (const [i, o] of outcomes.entries()) {
      assert.equal(o.code, i % 2 === 0 ? grpc.status.INVALID_ARGUMENT : grpc.status.UNAUTHENTICATED, `stream ${i}: ${JSON.stringify(o)}`);
      assert.equal(o.replies, 1, `stream ${i}: the frame before the refused one is answered`);
    }
    assert.equal(await present(target, "victim", "bad-mac-1"), false);
    for (const e of ["no-mac", "forged", "as-x2"]) assert.equal(await present(target, "victim", e), false, e);
  });
});
