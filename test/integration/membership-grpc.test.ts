// Five membership drivers on real gRPC servers (127.0.0.21..25) form a cluster through one seed;
// a hard shutdown is detected, a graceful leave is seen as LEFT, a restarted node rejoins with a
// higher incarnation, the Watch stream reports it all, bad input is refused, and after every node
// restarted the cluster re-forms through the seed. Short protocol timings keep it quick.
import { strict as assert } from "node:assert";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { deathBoundMs, resolveConfig, type MembershipConfig } from "../../services/membership/config.ts";
import { staticSeeds } from "../../services/membership/discovery.ts";
import { MembershipDriver, MembershipService, createMembershipService } from "../../services/membership/grpc.ts";
import {
  MemberState,
  MembershipClient,
  type MemberEvent,
  type MemberInfo,
} from "../../services/gen/deltaset/v1/membership.ts";

const CLUSTER = "it-membership";
const HOSTS = ["127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24", "127.0.0.25"];
const CONFIG: Partial<MembershipConfig> = {
  probeIntervalMs: 250,
  probeTimeoutMs: 150,
  indirectTimeoutMs: 150,
  suspicionMult: 4,
  pushPullIntervalMs: 2000,
  requestTimeoutMs: 1000,
  reapAfterMs: 60_000,
};

interface Node {
  index: number;
  nodeId: string;
  address: string;
  server: grpc.Server;
  driver: MembershipDriver;
}

const nodes: (Node | undefined)[] = [];
const ports: number[] = [];
const clients: grpc.Client[] = [];
let seedAddress = "";

function bind(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e, port) => (e ? reject(e) : resolve(port))));
}

async function startNode(index: number, options: { incarnation?: bigint } = {}): Promise<Node> {
  const server = new grpc.Server();
  const port = await bind(server, `${HOSTS[index]}:${ports[index] ?? 0}`);
  ports[index] = port;
  const address = `${HOSTS[index]}:${port}`;
  if (index === 0) seedAddress = address;
  const driver = new MembershipDriver({
    cluster: CLUSTER,
    self: { nodeId: `n${index}`, address },
    seeds: staticSeeds([seedAddress]),
    config: CONFIG,
    incarnation: options.incarnation,
    joinBackoff: { initialMs: 100, maxMs: 500 },
  });
  server.addService(MembershipService, createMembershipService(driver));
  driver.start();
  const node = { index, nodeId: `n${index}`, address, server, driver };
  nodes[index] = node;
  return node;
}

async function stopNode(index: number): Promise<void> {
  const node = nodes[index];
  if (!node) return;
  nodes[index] = undefined;
  node.server.forceShutdown();
  await node.driver.stop();
}

function client(address: string): MembershipClient {
  const c = new MembershipClient(address, grpc.credentials.createInsecure());
  clients.push(c);
  return c;
}

function running(): Node[] {
  return nodes.filter((n): n is Node => n !== undefined);
}

function stateIn(viewer: Node, nodeId: string): MemberInfo | undefined {
  return viewer.driver.members({ includeDeparted: true }).find((m) => m.nodeId === nodeId);
}

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<number> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) assert.fail(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - start;
}

function allSee(viewers: Node[], nodeId: string, state: MemberState): boolean {
  return viewers.every((v) => stateIn(v, nodeId)?.state === state);
}

function unary<Req, Res>(fn: (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (e: grpc.ServiceError | null, r: Res) => void) => unknown, req: Req): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e, r) => (e ? reject(e) : resolve(r))));
}

async function expectCode(p: Promise<unknown>, code: grpc.status): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(e.code, code, `expected ${grpc.status[code]}, got ${grpc.status[e.code]}: ${e.details}`);
    return true;
  });
}

const watched: MemberEvent[] = [];
let watch: grpc.ClientReadableStream<MemberEvent> | undefined;

after(async () => {
  watch?.cancel();
  for (const c of clients) c.close();
  for (let i = 0; i < HOSTS.length; i++) await stopNode(i);
});

describe("membership over gRPC", () => {
  it("five drivers form a cluster through one seed", async () => {
    for (let i = 0; i < HOSTS.length; i++) await startNode(i);
    await waitFor("every node sees 5 ALIVE members", () =>
      running().every((n) => n.driver.members().filter((m) => m.state === MemberState.ALIVE).length === 5), 10_000);
    const reply = await unary(client(nodes[2]!.address).members.bind(client(nodes[2]!.address)), { includeDeparted: false });
    assert.equal(reply.self, "n2");
    assert.deepEqual(reply.members.map((m) => m.nodeId), ["n0", "n1", "n2", "n3", "n4"]);
    // Watch node 1 from here on; the current view comes first.
    watch = client(nodes[1]!.address).watch({ includeCurrent: true });
    watch.on("data", (event: MemberEvent) => watched.push(event));
    watch.on("error", () => {});
    await waitFor("the current view on the Watch stream", () => watched.length >= 5, 5000);
    assert.ok(watched.slice(0, 5).every((e) => e.previous === MemberState.MEMBER_STATE_UNSPECIFIED));
  });

  it("refuses another cluster and malformed requests, and survives garbage bytes", async () => {
    const c = client(nodes[0]!.address);
    await expectCode(unary(c.ping.bind(c), { cluster: "other", from: "x", seq: 1n, target: "n0", updates: [] }), grpc.status.FAILED_PRECONDITION);
    await expectCode(unary(c.join.bind(c), { cluster: "other", self: { nodeId: "x", address: "127.0.0.9:1", state: MemberState.ALIVE, incarnation: 0n, sinceUnixMs: 0n } }), grpc.status.FAILED_PRECONDITION);
    await expectCode(unary(c.join.bind(c), { cluster: CLUSTER, self: undefined }), grpc.status.INVALID_ARGUMENT);
    await expectCode(unary(c.join.bind(c), { cluster: CLUSTER, self: { nodeId: "x", address: "nowhere", state: MemberState.ALIVE, incarnation: 0n, sinceUnixMs: 0n } }), grpc.status.INVALID_ARGUMENT);
    await expectCode(unary(c.pingReq.bind(c), { cluster: CLUSTER, from: "x", seq: 1n, target: "n1", targetAddress: "", timeoutMs: 10, updates: [] }), grpc.status.INVALID_ARGUMENT);
    await expectCode(unary(c.leave.bind(c), { cluster: "", nodeId: "n1", incarnation: 0n }), grpc.status.INVALID_ARGUMENT);
    const raw = new grpc.Client(nodes[0]!.address, grpc.credentials.createInsecure());
    clients.push(raw);
    const garbage = await new Promise<grpc.ServiceError | null>((resolve) =>
      raw.makeUnaryRequest("/deltaset.v1.Membership/Ping", (b: Buffer) => b, (b: Buffer) => b, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x7f, 0x12]), (e) => resolve(e)));
    assert.ok(garbage && garbage.code !== grpc.status.OK, "garbage is refused");
    const pong = await unary(c.ping.bind(c), { cluster: CLUSTER, from: "probe", seq: 5n, target: "n0", updates: [] });
    assert.equal(pong.ack, true);
    assert.equal(pong.seq, 5n);
    assert.equal(nodes[0]!.driver.members().length, 5, "nothing bad entered the view");
  });

  it("a hard shutdown is marked DEAD by every other member within the bound", async () => {
    const victim = nodes[4]!;
    await stopNode(4);
    const others = running();
    const bound = deathBoundMs(resolveConfig(CONFIG), 5) + 3000;
    const took = await waitFor("n4 DEAD everywhere", () => allSee(others, "n4", MemberState.DEAD), bound);
    assert.ok(took <= bound);
    // The stream trails the view by a network hop.
    await waitFor("Watch reports n4 DEAD", () => watched.some((e) => e.member?.nodeId === "n4" && e.member.state === MemberState.DEAD), 2000);
    const states = watched.filter((e) => e.member?.nodeId === "n4").map((e) => e.member!.state);
    assert.deepEqual(states.slice(-2), [MemberState.SUSPECT, MemberState.DEAD].slice(states.includes(MemberState.SUSPECT) ? 0 : 1), "suspected (here or by gossip), then dead");
    assert.ok(others.every((n) => n.driver.members().every((m) => m.nodeId !== victim.nodeId)), "departed members leave the default view");
  });

  it("a graceful leave is seen as LEFT quickly, and never as a failure", async () => {
    const leaver = nodes[3]!;
    const before = watched.length;
    const acked = await leaver.driver.leave();
    assert.ok(acked >= 1, "the leave was acknowledged");
    await stopNode(3);
    const others = running();
    await waitFor("n3 LEFT everywhere", () => allSee(others, "n3", MemberState.LEFT), 2000);
    await waitFor("Watch reports n3 LEFT", () => watched.slice(before).some((e) => e.member?.nodeId === "n3"), 2000);
    const about = watched.slice(before).filter((e) => e.member?.nodeId === "n3").map((e) => e.member!.state);
    assert.deepEqual(about, [MemberState.LEFT], "LEFT, and no suspicion or death");
  });

  it("a node restarted with the same id rejoins ALIVE with a higher incarnation, even from 0", async () => {
    const old = stateIn(nodes[0]!, "n4")!.incarnation;
    await startNode(4, { incarnation: 0n });
    const all = running();
    await waitFor("n4 ALIVE everywhere", () => allSee(all, "n4", MemberState.ALIVE), 5000);
    for (const viewer of all) assert.ok(stateIn(viewer, "n4")!.incarnation > old, `${viewer.nodeId} holds a newer incarnation`);
    // From DEAD, straight to ALIVE or (when probed before its refutation arrived) through SUSPECT.
    await waitFor("Watch reports n4 back", () =>
      watched.some((e) => e.member?.nodeId === "n4" && e.member.state === MemberState.ALIVE && e.member.incarnation > old), 3000);
  });

  it("after every node restarts at once, the cluster re-forms through the seed", async () => {
    watch?.cancel();
    watch = undefined;
    const indexes = running().map((n) => n.index);
    for (const i of indexes) await stopNode(i);
    // The seed comes back last: the others must keep retrying until it is there.
    for (const i of indexes.filter((i) => i !== 0)) await startNode(i);
    await new Promise((r) => setTimeout(r, 700));
    await startNode(0);
    const expected = indexes.map((i) => `n${i}`).sort();
    await waitFor("everyone sees everyone ALIVE again", () =>
      running().every((n) => JSON.stringify(n.driver.members().filter((m) => m.state === MemberState.ALIVE).map((m) => m.nodeId)) === JSON.stringify(expected)), 10_000);
  });
});
