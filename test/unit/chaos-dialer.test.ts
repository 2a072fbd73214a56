// The peer dialer of chaos runs, against the in-process Toxiproxy-compatible server: one proxy per
// directed link named <self>-to-<peer>, reused (as it is, even disabled) after a restart, found by
// upstream whatever its name, and never a direct dial when the API is down.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { once } from "node:events";
import { Toxiproxy } from "toxiproxy-node-client";
import { startToxiproxyServer } from "../../services/chaos/proxy/index.js";
import { LinkTable, precreateLinkProxies } from "../../services/chaos/links.js";
import { ToxiproxyDialer, linkProxyName, toxiproxyUrl } from "../../services/node/peer-dialer.js";

async function echoServer(): Promise<{ address: string; close(): Promise<void> }> {
  const server = net.createServer((s) => s.pipe(s));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  return { address: `127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

async function roundTrip(address: string, text: string): Promise<string> {
  const i = address.lastIndexOf(":");
  const socket = net.connect(Number(address.slice(i + 1)), address.slice(0, i));
  await once(socket, "connect");
  socket.write(text);
  const [data] = (await once(socket, "data")) as [Buffer];
  socket.destroy();
  return data.toString();
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

test("names and URLs", () => {
  assert.equal(toxiproxyUrl("127.0.0.1:8474"), "http://127.0.0.1:8474");
  assert.equal(toxiproxyUrl("http://h:1/"), "http://h:1");
  assert.equal(linkProxyName("n1", "n2", "127.0.0.12:7070"), "n1-to-n2");
  assert.equal(linkProxyName("n1", "", "127.0.0.12:7070"), "n1-to-127.0.0.12_7070");
});

test("a peer is dialed through its own proxy, created once and reused after a restart", async () => {
  const server = await startToxiproxyServer({ port: 0 });
  const peer = await echoServer();
  try {
    const dialer = new ToxiproxyDialer({ api: server.url, self: "n1" });
    const via = await dialer.dial("n2", peer.address);
    assert.notEqual(via, peer.address);
    assert.equal(await roundTrip(via, "hello"), "hello");
    assert.equal(dialer.dial("n2", peer.address), via, "known links resolve at once");
    const tp = new Toxiproxy(server.url);
    const proxy = await tp.get("n1-to-n2");
    assert.equal(proxy.upstream, peer.address);
    assert.equal(proxy.listen, via);

    // The experiment cuts the link; a restarted node finds the same proxy and leaves it cut.
    await proxy.update({ enabled: false, listen: proxy.listen, upstream: proxy.upstream });
    const restarted = new ToxiproxyDialer({ api: server.url, self: "n1" });
    assert.equal(await restarted.dial("", peer.address), via, "found by upstream, not by name");
    assert.equal((await tp.get("n1-to-n2")).enabled, false, "a restart does not heal a fault");
    assert.equal(Object.keys(await tp.getAll()).length, 1);

    // Another node's link to the same peer is another proxy.
    const other = new ToxiproxyDialer({ api: server.url, self: "n3" });
    assert.notEqual(await other.dial("n2", peer.address), via);
    dialer.close();
    restarted.close();
    other.close();
  } finally {
    await peer.close();
    await server.close();
  }
});

test("when the API is down the dialer retries and never dials the peer directly", async () => {
  const port = await freePort();
  const peer = await echoServer();
  const logs: string[] = [];
  const dialer = new ToxiproxyDialer({ api: `127.0.0.1:${port}`, self: "n1", initialBackoffMs: 20, maxBackoffMs: 50, log: (_l, m) => logs.push(m) });
  let resolved: string | undefined;
  const dialing = dialer.dial("n2", peer.address);
  assert.ok(dialing instanceof Promise);
  void dialing.then((a) => (resolved = a));
  const until = Date.now() + 5000;
  while (dialer.failures < 3 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  assert.ok(dialer.failures >= 3, "retried");
  assert.equal(resolved, undefined, "no fallback to the direct address");
  assert.ok(logs.some((l) => /not dialed directly/.test(l)));
  const server = await startToxiproxyServer({ port });
  try {
    const via = await dialing;
    assert.notEqual(via, peer.address);
    assert.equal(await roundTrip(via, "late"), "late");
  } finally {
    dialer.close();
    await peer.close();
    await server.close();
  }
});

test("the link table finds, cuts and heals links by node", async () => {
  const server = await startToxiproxyServer({ port: 0 });
  const peers = [await echoServer(), await echoServer(), await echoServer()];
  try {
    const nodes = peers.map((p, i) => ({ nodeId: `n${i + 1}`, address: p.address, toxiproxy: server.url }));
    const table = new LinkTable(nodes);
    assert.equal((await table.missing()).length, 6);
    await precreateLinkProxies(nodes);
    assert.deepEqual(await table.missing(), []);
    const n1to2 = await new ToxiproxyDialer({ api: server.url, self: "n1" }).dial("n2", peers[1]!.address);
    assert.equal(await roundTrip(n1to2, "x"), "x");
    assert.equal(await table.cut([["n1", "n2"]]), 1);
    await assert.rejects(roundTrip(n1to2, "x"), "a cut link passes nothing");
    const n2to1 = await new ToxiproxyDialer({ api: server.url, self: "n2" }).dial("n1", peers[0]!.address);
    assert.equal(await roundTrip(n2to1, "y"), "y", "the other direction is open");
    assert.equal(await table.toxic([["n2", "n1"]], { type: "latency", streams: ["upstream", "downstream"], attributes: { latency: 10, jitter: 0 } }), 1);
    const tp = new Toxiproxy(server.url);
    const raw = (await (await fetch(`${server.url}/proxies/n2-to-n1`)).json()) as { toxics: unknown[] };
    assert.equal(raw.toxics.length, 2);
    await table.heal();
    assert.equal((await tp.get("n1-to-n2")).enabled, true);
    const healed = (await (await fetch(`${server.url}/proxies/n2-to-n1`)).json()) as { toxics: unknown[] };
    assert.equal(healed.toxics.length, 0);
    assert.equal(await roundTrip(n1to2, "z"), "z");
  } finally {
    for (const p of peers) await p.close();
    await server.close();
  }
});
