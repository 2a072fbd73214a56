// Real TCP connections over 127.0.0.1 through the Toxiproxy-compatible server, driven through
// toxiproxy-node-client: bytes flow, each toxic does what it says, a disabled proxy is a real
// partition. Timing checks are lower bounds only.
import { strict as assert } from "node:assert";
import { randomBytes } from "node:crypto";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { after, afterEach, before, describe, it } from "node:test";
import { Toxiproxy, type Proxy } from "toxiproxy-node-client";

import { runProxyServerCli, startToxiproxyServer, type ToxiproxyServer } from "../../services/chaos/proxy/index.ts";
import { RECEIVED_BYTES_METRIC, SENT_BYTES_METRIC, bytesByProxy } from "../../services/chaos/proxy/byte-counts.ts";

const TEST = { timeout: 10_000 };
/** Timers may fire up to a millisecond or so early relative to performance.now(). */
const SLACK_MS = 5;

interface EchoServer {
  port: number;
  /** Bytes the echo server has received in total. */
  received(): number;
  close(): Promise<void>;
}

async function startEcho(): Promise<EchoServer> {
  const sockets = new Set<net.Socket>();
  let received = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("data", (d) => (received += d.length));
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    received: () => received,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function addressOf(listen: string): { host: string; port: number } {
  const colon = listen.lastIndexOf(":");
  return { host: listen.slice(0, colon), port: Number(listen.slice(colon + 1)) };
}

const openSockets = new Set<net.Socket>();

function connect(listen: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(addressOf(listen));
    openSockets.add(socket);
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
    socket.on("close", () => openSockets.delete(socket));
  });
}

interface Outcome {
  data: Buffer;
  ended: boolean;
  error?: NodeJS.ErrnoException;
  /** ms from the call until the end/close/error, or until `waitMs` ran out. */
  elapsed: number;
}

/** Reads until `bytes` have arrived, the socket ends/closes/fails, or `waitMs` passes. */
function readFrom(socket: net.Socket, bytes: number, waitMs: number): Promise<Outcome> {
  const start = performance.now();
  const chunks: Buffer[] = [];
  let length = 0;
  let ended = false;
  return new Promise((resolve) => {
    let error: NodeJS.ErrnoException | undefined;
    const done = () => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.off("close", onClose);
      socket.off("error", onError);
      resolve({ data: Buffer.concat(chunks), ended, error, elapsed: performance.now() - start });
    };
    const onData = (d: Buffer) => {
      chunks.push(d);
      length += d.length;
      if (length >= bytes) done();
    };
    const onEnd = () => {
      ended = true;
    };
    const onClose = () => done();
    const onError = (e: NodeJS.ErrnoException) => {
      error = e;
    };
    const timer = setTimeout(done, waitMs);
    socket.on("data", onData);
    socket.on("end", onEnd);
    socket.on("close", onClose);
    socket.on("error", onError);
  });
}

let server: ToxiproxyServer;
let tp: Toxiproxy;
let echo: EchoServer;
let proxyCount = 0;

before(async () => {
  server = await startToxiproxyServer({ port: 0 });
  tp = new Toxiproxy(server.url);
  echo = await startEcho();
});
afterEach(async () => {
  for (const s of openSockets) s.destroy();
  for (const proxy of Object.values(await tp.getAll())) await proxy.remove();
});
after(async () => {
  await server.close();
  await echo.close();
});

function newProxy(): Promise<Proxy> {
  return tp.createProxy({ name: `p${++proxyCount}`, listen: "127.0.0.1:0", upstream: `127.0.0.1:${echo.port}` });
}

async function addToxic(proxy: Proxy, type: string, attributes: Record<string, number>, stream = "downstream", toxicity = 1) {
  return proxy.addToxic({ name: `${type}_${stream}`, type: type as "latency", stream: stream as "downstream", toxicity, attributes: attributes as never });
}

async function echoRoundTrip(listen: string, payload: Buffer, waitMs = 5000): Promise<Outcome> {
  const socket = await connect(listen);
  const reading = readFrom(socket, payload.length, waitMs);
  socket.write(payload);
  const outcome = await reading;
  socket.destroy();
  return outcome;
}

describe("data path", () => {
  it("forwards bytes both ways unchanged", TEST, async () => {
    const proxy = await newProxy();
    const payload = randomBytes(256 * 1024);
    const outcome = await echoRoundTrip(proxy.listen, payload);
    assert.ok(outcome.data.equals(payload));
  });

  it("a client EOF reaches the server and the server's EOF comes back", TEST, async () => {
    const proxy = await newProxy();
    const socket = await connect(proxy.listen);
    const reading = readFrom(socket, Infinity, 5000);
    socket.end("bye");
    const outcome = await reading;
    assert.equal(outcome.data.toString(), "bye");
    assert.ok(outcome.ended);
  });

  it("closes the client when the upstream refuses", TEST, async () => {
    const proxy = await tp.createProxy({ name: "dead", listen: "127.0.0.1:0", upstream: "127.0.0.1:1" });
    const socket = await connect(proxy.listen);
    const outcome = await readFrom(socket, 1, 5000);
    assert.equal(outcome.data.length, 0);
    assert.ok(outcome.elapsed < 5000, "closed rather than left hanging");
  });
});

describe("byte counters on /metrics (Toxiproxy's -proxy-metrics names)", () => {
  it("counts what each direction received and what it sent on after the toxics", TEST, async () => {
    const proxy = await newProxy();
    const payload = randomBytes(10_000);
    const out = await echoRoundTrip(proxy.listen, payload);
    assert.equal(out.data.length, payload.length);
    const counted = async () => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const sample = (metric: string, direction: string) => {
        const line = text.split("\n").find((l) => l.startsWith(`${metric}{direction="${direction}"`) && l.includes(`proxy="${proxy.name}"`));
        assert.ok(line, `${metric} ${direction} for ${proxy.name} in:\n${text}`);
        return Number(line.slice(line.lastIndexOf(" ") + 1));
      };
      return {
        receivedUp: sample(RECEIVED_BYTES_METRIC, "upstream"),
        sentUp: sample(SENT_BYTES_METRIC, "upstream"),
        receivedDown: sample(RECEIVED_BYTES_METRIC, "downstream"),
        sentDown: sample(SENT_BYTES_METRIC, "downstream"),
        byProxy: bytesByProxy(text).get(proxy.name),
      };
    };
    assert.deepEqual(await counted(), { receivedUp: 10_000, sentUp: 10_000, receivedDown: 10_000, sentDown: 10_000, byProxy: 20_000 });
    // A limit_data toxic cuts the downstream after 1 000 bytes: received still counts what came,
    // sent only what went on.
    await addToxic(proxy, "limit_data", { bytes: 1000 });
    const cut = await echoRoundTrip(proxy.listen, payload, 2000);
    assert.ok(cut.data.length <= 1000);
    const after = await counted();
    assert.equal(after.sentDown, 10_000 + cut.data.length);
    assert.ok(after.receivedUp > 10_000);
  });
});

describe("enable/disable", () => {
  it("disabling closes live connections and refuses new ones; enabling listens again", TEST, async () => {
    const proxy = await newProxy();
    const socket = await connect(proxy.listen);
    const first = readFrom(socket, 2, 5000);
    socket.write("hi");
    assert.equal((await first).data.toString(), "hi");

    const before = echo.received();
    const closed = readFrom(socket, 1, 5000);
    const off = await proxy.update({ enabled: false, listen: proxy.listen, upstream: proxy.upstream });
    assert.equal(off.enabled, false);
    const outcome = await closed;
    assert.ok(outcome.elapsed < 5000, "the live connection was closed");
    assert.equal(outcome.data.length, 0);
    socket.write("lost", () => {});
    await assert.rejects(connect(proxy.listen), (e: NodeJS.ErrnoException) => e.code === "ECONNREFUSED");
    assert.equal(echo.received(), before, "no byte reached the server while disabled");

    const on = await off.update({ enabled: true, listen: off.listen, upstream: off.upstream });
    assert.equal(on.listen, proxy.listen);
    assert.equal((await echoRoundTrip(on.listen, Buffer.from("again"))).data.toString(), "again");
  });

  it("changing listen restarts the proxy on the new address", TEST, async () => {
    const proxy = await newProxy();
    const moved = await proxy.update({ enabled: true, listen: "127.0.0.1:0", upstream: proxy.upstream });
    assert.notEqual(moved.listen, proxy.listen);
    await assert.rejects(connect(proxy.listen));
    assert.equal((await echoRoundTrip(moved.listen, Buffer.from("x"))).data.toString(), "x");
  });

  it("reset re-enables a disabled proxy", TEST, async () => {
    const proxy = await newProxy();
    await proxy.update({ enabled: false, listen: proxy.listen, upstream: proxy.upstream });
    await tp.reset();
    assert.equal((await echoRoundTrip(proxy.listen, Buffer.from("up"))).data.toString(), "up");
  });
});

describe("toxics on real connections", () => {
  it("latency: a round trip takes at least the configured latency", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "latency", { latency: 300, jitter: 0 });
    let outcome = await echoRoundTrip(proxy.listen, Buffer.from("ping"));
    assert.equal(outcome.data.toString(), "ping");
    assert.ok(outcome.elapsed >= 300 - SLACK_MS, `round trip ${outcome.elapsed} ms`);

    await addToxic(proxy, "latency", { latency: 200, jitter: 0 }, "upstream");
    outcome = await echoRoundTrip(proxy.listen, Buffer.from("ping"));
    assert.ok(outcome.elapsed >= 500 - SLACK_MS, `round trip ${outcome.elapsed} ms with both directions`);
  });

  it("latency added to and removed from a live connection applies to it", TEST, async () => {
    const proxy = await newProxy();
    const socket = await connect(proxy.listen);
    let reading = readFrom(socket, 1, 5000);
    socket.write("a");
    await reading;
    const toxic = await addToxic(proxy, "latency", { latency: 250, jitter: 0 });
    reading = readFrom(socket, 1, 5000);
    socket.write("b");
    const delayed = await reading;
    assert.equal(delayed.data.toString(), "b");
    assert.ok(delayed.elapsed >= 250 - SLACK_MS, `live round trip ${delayed.elapsed} ms`);
    await toxic.remove();
    reading = readFrom(socket, 1, 5000);
    socket.write("c");
    assert.equal((await reading).data.toString(), "c");
  });

  it("timeout 0: data stops, the connection stays open, removing the toxic closes it", TEST, async () => {
    const proxy = await newProxy();
    const toxic = await addToxic(proxy, "timeout", { timeout: 0 }, "upstream");
    const socket = await connect(proxy.listen);
    const before = echo.received();
    const reading = readFrom(socket, 1, 600);
    socket.write("black hole");
    const outcome = await reading;
    assert.equal(outcome.data.length, 0);
    assert.ok(!outcome.ended && !socket.destroyed, "still open");
    assert.equal(echo.received(), before, "nothing reached the server");
    const closing = readFrom(socket, 1, 5000);
    await toxic.remove();
    const closed = await closing;
    assert.ok(closed.elapsed < 5000, "closed when the toxic was removed (as upstream)");
  });

  it("timeout N closes the connection after N ms", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "timeout", { timeout: 300 });
    const socket = await connect(proxy.listen);
    const reading = readFrom(socket, 1, 5000);
    socket.write("x");
    const outcome = await reading;
    assert.equal(outcome.data.length, 0);
    assert.ok(outcome.elapsed >= 300 - SLACK_MS && outcome.elapsed < 5000, `closed after ${outcome.elapsed} ms`);
  });

  it("limit_data closes after exactly N bytes", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "limit_data", { bytes: 10 });
    const socket = await connect(proxy.listen);
    const reading = readFrom(socket, Infinity, 5000);
    socket.write(Buffer.alloc(100, 7));
    const outcome = await reading;
    assert.equal(outcome.data.length, 10);
    assert.ok(outcome.ended, "closed with FIN after the limit");
    assert.ok(outcome.elapsed < 5000);
  });

  it("slicer delivers exactly the bytes sent", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "slicer", { average_size: 64, size_variation: 32, delay: 50 });
    const payload = randomBytes(20_000);
    const outcome = await echoRoundTrip(proxy.listen, payload, 8000);
    assert.ok(outcome.data.equals(payload));
  });

  it("bandwidth: N bytes at R KB/s take at least N/R ms", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "bandwidth", { rate: 100 }); // 100 KB/s = 100 bytes/ms
    const payload = randomBytes(60_000);
    const outcome = await echoRoundTrip(proxy.listen, payload, 8000);
    assert.ok(outcome.data.equals(payload));
    assert.ok(outcome.elapsed >= 600 - SLACK_MS, `took ${outcome.elapsed} ms`);
  });

  it("slow_close holds the server's EOF for the delay", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "slow_close", { delay: 300 });
    const socket = await connect(proxy.listen);
    const reading = readFrom(socket, Infinity, 5000);
    socket.end("x");
    const outcome = await reading;
    assert.equal(outcome.data.toString(), "x");
    assert.ok(outcome.ended);
    assert.ok(outcome.elapsed >= 300 - SLACK_MS, `EOF after ${outcome.elapsed} ms`);
  });

  it("reset_peer resets the connection (ECONNRESET), after its timeout", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "reset_peer", { timeout: 200 });
    const socket = await connect(proxy.listen);
    const reading = readFrom(socket, 1, 5000);
    socket.write("x");
    const outcome = await reading;
    assert.equal(outcome.data.length, 0);
    assert.equal(outcome.error?.code, "ECONNRESET");
    assert.ok(outcome.elapsed >= 200 - SLACK_MS, `reset after ${outcome.elapsed} ms`);
  });

  it("toxicity 0 never applies", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "timeout", { timeout: 0 }, "downstream", 0);
    await addToxic(proxy, "reset_peer", { timeout: 0 }, "upstream", 0);
    for (let i = 0; i < 5; i++) {
      const outcome = await echoRoundTrip(proxy.listen, Buffer.from(`n${i}`));
      assert.equal(outcome.data.toString(), `n${i}`);
    }
  });

  it("toxicity 1 always applies", TEST, async () => {
    const proxy = await newProxy();
    await addToxic(proxy, "timeout", { timeout: 0 }, "downstream", 1);
    for (let i = 0; i < 3; i++) {
      const outcome = await echoRoundTrip(proxy.listen, Buffer.from("x"), 200);
      assert.equal(outcome.data.length, 0);
    }
  });
});

describe("command line", () => {
  it("runProxyServerCli serves the API until aborted", TEST, async () => {
    const controller = new AbortController();
    const lines: string[] = [];
    let url = "";
    const listening = new Promise<void>((resolve) => {
      const running = runProxyServerCli(["--listen", "127.0.0.1:0"], {
        signal: controller.signal,
        log: (line) => lines.push(line),
        onListening: (u) => {
          url = u;
          resolve();
        },
      });
      void running.then(() => lines.push("stopped"));
    });
    await listening;
    const client = new Toxiproxy(url);
    assert.match(await client.getVersion(), /"version"/);
    await client.createProxy({ name: "cli", listen: "127.0.0.1:0", upstream: `127.0.0.1:${echo.port}` });
    controller.abort();
    for (let i = 0; i < 100 && !lines.includes("stopped"); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(lines.includes("stopped"), "the CLI returned after abort");
    await assert.rejects(fetch(`${url}/version`));
  });
});
