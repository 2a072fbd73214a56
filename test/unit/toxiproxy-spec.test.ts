// Parsing of toxic bodies and addresses: Toxiproxy's defaults, validation order and errors.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";

import { formatHostPort, normalListen, parseHostPort } from "../../services/chaos/proxy/address.ts";
import { ApiError } from "../../services/chaos/proxy/api-error.ts";
import { applyToxicUpdate, parseNewToxic, toxicJson } from "../../services/chaos/proxy/toxic-spec.ts";

const none = () => false;

function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ApiError, `expected ApiError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected an error");
}

describe("new toxic", () => {
  it("defaults: downstream, toxicity 1, name <type>_<stream>, all attributes present", () => {
    const spec = parseNewToxic({ type: "latency", attributes: { latency: 100 } }, none);
    assert.deepEqual(toxicJson(spec), {
      attributes: { latency: 100, jitter: 0 },
      name: "latency_downstream",
      type: "latency",
      stream: "downstream",
      toxicity: 1,
    });
    assert.deepEqual(Object.keys(toxicJson(spec)), ["attributes", "name", "type", "stream", "toxicity"]);
  });

  it("default name follows the given stream; stream matches case-insensitively and keeps its spelling", () => {
    const spec = parseNewToxic({ type: "bandwidth", stream: "UpStream", attributes: { rate: 5 } }, none);
    assert.equal(spec.name, "bandwidth_UpStream");
    assert.equal(spec.direction, "upstream");
    assert.equal(spec.stream, "UpStream");
  });

  it("every type has its attribute set", () => {
    const cases: Array<[string, string[]]> = [
      ["latency", ["latency", "jitter"]],
      ["bandwidth", ["rate"]],
      ["slow_close", ["delay"]],
      ["timeout", ["timeout"]],
      ["reset_peer", ["timeout"]],
      ["slicer", ["average_size", "size_variation", "delay"]],
      ["limit_data", ["bytes"]],
      ["noop", []],
    ];
    for (const [type, keys] of cases) {
      assert.deepEqual(Object.keys(parseNewToxic({ type, attributes: { ignored: 1 } }, none).attributes), keys);
    }
  });

  it("rejects a bad stream before a bad type, and a bad type before a duplicate name", () => {
    let e = apiError(() => parseNewToxic({ type: "nope", stream: "sideways" }, () => true));
    assert.deepEqual(e.toJSON(), { error: "stream was invalid, can be either upstream or downstream", status: 400 });
    e = apiError(() => parseNewToxic({ type: "nope" }, () => true));
    assert.deepEqual(e.toJSON(), { error: "invalid toxic type", status: 400 });
    e = apiError(() => parseNewToxic({ type: "latency", attributes: { latency: 1.5 } }, () => true));
    assert.deepEqual(e.toJSON(), { error: "toxic already exists", status: 409 });
    e = apiError(() => parseNewToxic({ type: "", stream: "" }, none));
    assert.equal(e.status, 400);
    assert.match(e.message, /^stream was invalid/);
  });

  it("rejects non-integer attributes and mistyped fields as a bad request body", () => {
    for (const body of [
      { type: "latency", attributes: { latency: 1.5 } },
      { type: "latency", attributes: { latency: "100" } },
      { type: "latency", attributes: [1] },
      { type: 5 },
      { type: "latency", toxicity: "all" },
      [],
      "latency",
    ]) {
      const e = apiError(() => parseNewToxic(body, none));
      assert.equal(e.status, 400);
      assert.match(e.message, /^bad request body: /);
    }
  });
});

describe("toxic update", () => {
  it("changes attributes given and toxicity, keeps the rest, ignores name/type/stream", () => {
    const spec = parseNewToxic({ name: "lat", type: "latency", attributes: { latency: 100, jitter: 5 } }, none);
    const next = applyToxicUpdate(spec, {
      name: "other",
      type: "timeout",
      stream: "upstream",
      toxicity: 0.25,
      attributes: { latency: 200 },
    });
    assert.deepEqual(toxicJson(next), {
      attributes: { latency: 200, jitter: 5 },
      name: "lat",
      type: "latency",
      stream: "downstream",
      toxicity: 0.25,
    });
    assert.equal(applyToxicUpdate(spec, {}).toxicity, 1);
  });
});

describe("addresses", () => {
  it("parses and formats host:port, IPv6 in brackets", () => {
    assert.deepEqual(parseHostPort("127.0.0.1:8474"), { host: "127.0.0.1", port: 8474 });
    assert.deepEqual(parseHostPort("[::1]:0"), { host: "::1", port: 0 });
    assert.deepEqual(parseHostPort(":99"), { host: "", port: 99 });
    assert.equal(formatHostPort("::1", 5), "[::1]:5");
    assert.equal(normalListen("localhost:7"), "127.0.0.1:7");
    for (const bad of ["127.0.0.1", "127.0.0.1:x", "host:70000", "::1:5", "[::1]5"]) {
      assert.throws(() => parseHostPort(bad));
    }
  });
});
