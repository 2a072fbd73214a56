// The HTTP API as toxiproxy-node-client 4.1.0 uses it, plus raw requests for what the client has no
// call for (toxic list, PATCH, error bodies, the browser guard). Loopback only; no data timing.
import { strict as assert } from "node:assert";
import { after, before, beforeEach, describe, it } from "node:test";
import { Toxiproxy, ToxiproxyError } from "toxiproxy-node-client";

import { startToxiproxyServer, type ToxiproxyServer } from "../../services/chaos/proxy/index.ts";

// Upstream addresses are never dialled in this file: no test opens a connection through a proxy.
const UPSTREAM = "127.0.0.1:9";

let server: ToxiproxyServer;
let tp: Toxiproxy;

before(async () => {
  server = await startToxiproxyServer({ port: 0 });
  tp = new Toxiproxy(server.url);
});
after(() => server.close());
beforeEach(async () => {
  for (const proxy of Object.values(await tp.getAll())) await proxy.remove();
});

async function raw(method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const res = await fetch(server.url + path, { method, body, headers });
  const text = await res.text();
  return { status: res.status, text, type: res.headers.get("content-type") ?? "" };
}

async function rejectsWithStatus(promise: Promise<unknown>, status: number): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ToxiproxyError, `expected ToxiproxyError, got ${String(error)}`);
    assert.equal(error.message, `Request failed with status code ${status}`);
    return true;
  });
}

describe("proxies", () => {
  it("GET /version answers upstream's JSON line", async () => {
    const version = await tp.getVersion();
    assert.match(version, /^\{"version": "[^"]+"\}\n$/);
    assert.equal(typeof JSON.parse(version).version, "string");
  });

  it("create: 201, enabled by default, port 0 replaced by the real port", async () => {
    const res = await raw("POST", "/proxies", JSON.stringify({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM }));
    assert.equal(res.status, 201);
    const body = JSON.parse(res.text);
    assert.deepEqual(Object.keys(body), ["name", "listen", "upstream", "enabled", "toxics"]);
    assert.equal(body.enabled, true);
    assert.deepEqual(body.toxics, []);
    assert.match(body.listen, /^127\.0\.0\.1:\d+$/);
    assert.notEqual(body.listen, "127.0.0.1:0");

    const viaClient = await tp.createProxy({ name: "b", listen: "localhost:0", upstream: UPSTREAM });
    assert.equal(viaClient.name, "b");
    assert.equal(viaClient.enabled, true);
    assert.match(viaClient.listen, /^127\.0\.0\.1:[1-9]\d*$/);
  });

  it("create disabled keeps the requested listen and does not listen", async () => {
    const proxy = await tp.createProxy({ name: "off", listen: "127.0.0.1:0", upstream: UPSTREAM, enabled: false });
    assert.equal(proxy.enabled, false);
    assert.equal(proxy.listen, "127.0.0.1:0");
  });

  it("get and getAll return what was created", async () => {
    const a = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    await tp.createProxy({ name: "b", listen: "127.0.0.1:0", upstream: "127.0.0.1:10", enabled: false });
    const got = await tp.get("a");
    assert.deepEqual(got.toJson(), a.toJson());
    const all = await tp.getAll();
    assert.deepEqual(Object.keys(all).sort(), ["a", "b"]);
    assert.equal(all.b!.upstream, "127.0.0.1:10");
    assert.equal(all.b!.enabled, false);
  });

  it("populate: 201 with {proxies}, keeps an identical proxy, replaces one that differs", async () => {
    const res = await raw(
      "POST",
      "/populate",
      JSON.stringify([
        { name: "p1", listen: "127.0.0.1:0", upstream: UPSTREAM },
        { name: "p2", listen: "127.0.0.1:0", upstream: UPSTREAM, enabled: false },
      ]),
    );
    assert.equal(res.status, 201);
    const created = JSON.parse(res.text).proxies as Array<{ name: string; listen: string; enabled: boolean }>;
    assert.deepEqual(created.map((p) => [p.name, p.enabled]), [["p1", true], ["p2", false]]);

    const p1 = await tp.get("p1");
    await p1.addToxic({ name: "lat", type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 5, jitter: 0 } });
    const again = await tp.populate([
      { name: "p1", listen: p1.listen, upstream: UPSTREAM },
      { name: "p2", listen: "127.0.0.1:0", upstream: "127.0.0.1:11" },
    ]);
    assert.equal(again.p1!.listen, p1.listen);
    assert.ok(await (await tp.get("p1")).getToxic("lat"), "identical proxy kept with its toxics");
    assert.equal(again.p2!.upstream, "127.0.0.1:11");
    assert.equal(again.p2!.enabled, true);
  });

  it("populate checks every entry before creating any", async () => {
    const res = await raw("POST", "/populate", JSON.stringify([{ name: "ok", upstream: UPSTREAM }, { upstream: UPSTREAM }]));
    assert.equal(res.status, 400);
    assert.deepEqual(JSON.parse(res.text), { error: "missing required field: name at proxy 2", status: 400 });
    assert.deepEqual(Object.keys(await tp.getAll()), []);
    await rejectsWithStatus(tp.populate([{ name: "x", listen: "127.0.0.1:0", upstream: "" }]), 400);
  });

  it("update via the client disables and re-enables on the same address", async () => {
    const proxy = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    const off = await proxy.update({ enabled: false, listen: proxy.listen, upstream: proxy.upstream });
    assert.equal(off.enabled, false);
    assert.equal(off.listen, proxy.listen);
    const on = await off.update({ enabled: true, listen: off.listen, upstream: off.upstream });
    assert.equal(on.enabled, true);
    assert.equal(on.listen, proxy.listen);
  });

  it("PATCH updates too, with fields defaulting to the current ones", async () => {
    await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    const res = await raw("PATCH", "/proxies/a", JSON.stringify({ upstream: "127.0.0.1:12" }));
    assert.equal(res.status, 200);
    const body = JSON.parse(res.text);
    assert.equal(body.upstream, "127.0.0.1:12");
    assert.equal(body.enabled, true);
  });

  it("remove: 204 with no body, then 404", async () => {
    const proxy = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    await proxy.remove();
    await rejectsWithStatus(tp.get("a"), 404);
    const res = await raw("DELETE", "/proxies/a");
    assert.deepEqual(JSON.parse(res.text), { error: "proxy not found", status: 404 });
    await tp.createProxy({ name: "b", listen: "127.0.0.1:0", upstream: UPSTREAM });
    const deleted = await raw("DELETE", "/proxies/b");
    assert.equal(deleted.status, 204);
    assert.equal(deleted.text, "");
  });

  it("errors: 409 duplicate, 400 missing field / bad body, 500 address in use", async () => {
    const a = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    await rejectsWithStatus(tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM }), 409);
    const cases: Array<[string, number, string]> = [
      [JSON.stringify({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM }), 409, "proxy already exists"],
      [JSON.stringify({ listen: "127.0.0.1:0", upstream: UPSTREAM }), 400, "missing required field: name"],
      [JSON.stringify({ name: "n", listen: "127.0.0.1:0" }), 400, "missing required field: upstream"],
      ["", 400, "bad request body: EOF"],
      [JSON.stringify({ name: "busy", listen: a.listen, upstream: UPSTREAM }), 500, `listen tcp ${a.listen}: bind: address already in use`],
    ];
    for (const [body, status, error] of cases) {
      const res = await raw("POST", "/proxies", body);
      assert.equal(res.status, status, body);
      assert.deepEqual(JSON.parse(res.text), { error, status });
    }
    const bad = await raw("POST", "/proxies", "{nope");
    assert.equal(bad.status, 400);
    assert.match(JSON.parse(bad.text).error, /^bad request body: /);
    assert.deepEqual(Object.keys(await tp.getAll()), ["a"], "failed creations leave nothing behind");
  });
});

describe("toxics", () => {
  it("add, get, update and remove through the client", async () => {
    const proxy = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    const added = await proxy.addToxic({
      name: "lat",
      type: "latency",
      stream: "downstream",
      toxicity: 1,
      attributes: { latency: 100, jitter: 10 },
    });
    assert.deepEqual(added.toJson(), {
      attributes: { latency: 100, jitter: 10 },
      name: "lat",
      stream: "downstream",
      toxicity: 1,
      type: "latency",
    });
    const got = await proxy.getToxic<{ latency: number; jitter: number }>("lat");
    assert.equal(got.attributes.latency, 100);
    const updated = await got.update({ ...got.toJson(), attributes: { latency: 200, jitter: 0 } });
    assert.deepEqual(updated.attributes, { latency: 200, jitter: 0 });
    assert.deepEqual((await tp.get("a")).toJson().enabled, true);
    await updated.remove();
    await rejectsWithStatus(proxy.getToxic("lat"), 404);
  });

  it("POST creates with 200 and upstream's defaults; the list puts upstream toxics first", async () => {
    await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    const created = await raw("POST", "/proxies/a/toxics", JSON.stringify({ type: "timeout", attributes: { timeout: 0 } }));
    assert.equal(created.status, 200);
    assert.deepEqual(JSON.parse(created.text), {
      attributes: { timeout: 0 },
      name: "timeout_downstream",
      type: "timeout",
      stream: "downstream",
      toxicity: 1,
    });
    await raw("POST", "/proxies/a/toxics", JSON.stringify({ type: "bandwidth", stream: "upstream", attributes: { rate: 1 } }));
    const list = await raw("GET", "/proxies/a/toxics");
    assert.equal(list.status, 200);
    assert.deepEqual(
      JSON.parse(list.text).map((t: { name: string }) => t.name),
      ["bandwidth_upstream", "timeout_downstream"],
    );
    const proxyJson = JSON.parse((await raw("GET", "/proxies/a")).text);
    assert.equal(proxyJson.toxics.length, 2);
  });

  it("PATCH updates a toxic's attributes and toxicity only", async () => {
    await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    await raw("POST", "/proxies/a/toxics", JSON.stringify({ name: "s", type: "slicer", attributes: { average_size: 10 } }));
    const res = await raw("PATCH", "/proxies/a/toxics/s", JSON.stringify({ toxicity: 0.5, attributes: { delay: 20 } }));
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.text), {
      attributes: { average_size: 10, size_variation: 0, delay: 20 },
      name: "s",
      type: "slicer",
      stream: "downstream",
      toxicity: 0.5,
    });
  });

  it("errors: 404 proxy/toxic, 409 duplicate, 400 stream/type/body", async () => {
    const proxy = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    const body = { name: "t", type: "latency" as const, stream: "upstream" as const, toxicity: 1, attributes: { latency: 1, jitter: 0 } };
    await proxy.addToxic(body);
    await rejectsWithStatus(proxy.addToxic({ ...body, stream: "downstream" }), 409);
    await rejectsWithStatus(proxy.addToxic({ ...body, name: "u", type: "bogus" as "latency" }), 400);
    await rejectsWithStatus(proxy.getToxic("missing"), 404);
    const cases: Array<[string, string, string | undefined, number, string]> = [
      ["POST", "/proxies/none/toxics", JSON.stringify(body), 404, "proxy not found"],
      ["POST", "/proxies/none/toxics", "{garbage", 404, "proxy not found"],
      ["GET", "/proxies/none/toxics", undefined, 404, "proxy not found"],
      ["GET", "/proxies/a/toxics/none", undefined, 404, "toxic not found"],
      ["POST", "/proxies/a/toxics/none", "{}", 404, "toxic not found"],
      ["DELETE", "/proxies/a/toxics/none", undefined, 404, "toxic not found"],
      ["POST", "/proxies/a/toxics", JSON.stringify({ ...body, name: "x", stream: "both" }), 400, "stream was invalid, can be either upstream or downstream"],
      ["POST", "/proxies/a/toxics", JSON.stringify({ ...body, name: "x", type: "jam" }), 400, "invalid toxic type"],
      ["POST", "/proxies/a/toxics", JSON.stringify(body), 409, "toxic already exists"],
      ["POST", "/proxies/a/toxics", "", 400, "bad request body: EOF"],
    ];
    for (const [method, path, requestBody, status, error] of cases) {
      const res = await raw(method, path, requestBody);
      assert.equal(res.status, status, `${method} ${path}`);
      assert.deepEqual(JSON.parse(res.text), { error, status }, `${method} ${path}`);
      assert.match(res.type, /json/);
    }
  });

  it("reset re-enables every proxy and removes every toxic (204)", async () => {
    const a = await tp.createProxy({ name: "a", listen: "127.0.0.1:0", upstream: UPSTREAM });
    await a.addToxic({ name: "t", type: "timeout", stream: "downstream", toxicity: 1, attributes: { timeout: 0 } });
    await a.update({ enabled: false, listen: a.listen, upstream: a.upstream });
    const res = await raw("POST", "/reset");
    assert.equal(res.status, 204);
    assert.equal(res.text, "");
    await tp.reset();
    const after = await tp.get("a");
    assert.equal(after.enabled, true);
    assert.equal(after.listen, a.listen);
    assert.deepEqual(JSON.parse((await raw("GET", "/proxies/a/toxics")).text), []);
  });
});

describe("routing", () => {
  it("refuses browsers with 403", async () => {
    const res = await raw("GET", "/proxies", undefined, { "User-Agent": "Mozilla/5.0 (X11; Linux x86_64)" });
    assert.equal(res.status, 403);
    assert.equal(res.text, "User agent not allowed\n");
    assert.equal((await raw("GET", "/proxies", undefined, { "User-Agent": "curl/8.0" })).status, 200);
  });

  it("unknown paths are 404, wrong methods 405", async () => {
    assert.equal((await raw("GET", "/nope")).status, 404);
    assert.equal((await raw("GET", "/proxies/")).status, 404);
    assert.equal((await raw("PUT", "/proxies")).status, 405);
    assert.equal((await raw("DELETE", "/reset")).status, 405);
    assert.equal((await raw("PATCH", "/proxies/x/toxics")).status, 405);
  });
});
