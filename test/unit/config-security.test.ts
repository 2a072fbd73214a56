// Configuration of telemetry, TLS and client authentication: defaults (all off), sources (flags,
// environment, config file), validation with messages that name the setting, and the start-up
// decision of bin/deltaset.mjs on whether to hook grpc-js for tracing.
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ConfigError, describeConfig, loadConfig } from "../../services/node/config.ts";
import { tracingRequested } from "../../services/node/telemetry.ts";
import { loadTls, tlsMode } from "../../services/node/tls.ts";
import { makeCa } from "../helpers/certs.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-config-sec-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("telemetry settings", () => {
  it("are off by default", () => {
    const c = loadConfig({}, {});
    assert.equal(c.tracing, "off");
    assert.equal(c.metricsListen, undefined);
    assert.equal(c.authTokensFile, undefined);
    assert.deepEqual(c.tls, {});
  });

  it("come from flags and the environment, flags winning", () => {
    const env = { DELTASET_METRICS_LISTEN: "127.0.0.1:9464", DELTASET_TRACING: "console" };
    assert.equal(loadConfig({}, env).metricsListen, "127.0.0.1:9464");
    assert.equal(loadConfig({}, env).tracing, "console");
    assert.equal(loadConfig({ tracing: "none" }, env).tracing, "none");
  });

  it("serve metrics on loopback unless exposing them elsewhere is asked for", () => {
    assert.equal(loadConfig({ "metrics-listen": "9464" }, {}).metricsListen, "127.0.0.1:9464");
    assert.throws(() => loadConfig({ "metrics-listen": "0.0.0.0:9464" }, {}), /not a loopback address.*--metrics-expose/);
    assert.equal(loadConfig({ "metrics-listen": "0.0.0.0:9464", "metrics-expose": "true" }, {}).metricsListen, "0.0.0.0:9464");
    assert.equal(loadConfig({}, { DELTASET_METRICS_LISTEN: "10.0.0.5:9464", DELTASET_METRICS_EXPOSE: "true" }).metricsListen, "10.0.0.5:9464");
  });

  it("refuse an unknown exporter, OTLP without an endpoint, and a malformed metrics address", () => {
    assert.throws(() => loadConfig({ tracing: "jaeger" }, {}), /tracing must be off, console, none or otlp/);
    assert.throws(() => loadConfig({ tracing: "otlp" }, {}), /needs --otlp-endpoint/);
    assert.equal(loadConfig({ tracing: "otlp", "otlp-endpoint": "http://127.0.0.1:4318/v1/traces" }, {}).tracing, "otlp");
    assert.throws(() => loadConfig({ "metrics-listen": "host-without-port" }, {}), /metrics listen "host-without-port" is not host:port/);
  });

  it("decide the grpc-js hook from flags, environment and config file, and say no on bad input", () => {
    assert.equal(tracingRequested([], {}), false);
    assert.equal(tracingRequested(["--metrics-listen", "127.0.0.1:0"], {}), false);
    assert.equal(tracingRequested(["--tracing", "console"], {}), true);
    assert.equal(tracingRequested(["--tracing=none"], {}), true);
    assert.equal(tracingRequested(["--tracing", "off"], { DELTASET_TRACING: "none" }), false);
    assert.equal(tracingRequested([], { DELTASET_TRACING: "none" }), true);
    const file = join(dir, "traced.json");
    writeFileSync(file, JSON.stringify({ tracing: "none" }));
    assert.equal(tracingRequested(["--config", file], {}), true);
    assert.equal(tracingRequested(["--tracing", "bogus"], {}), false);
  });
});

describe("TLS and authentication settings", () => {
  it("refuse a CA without the node's own certificate, and a certificate without its key", () => {
    assert.throws(() => loadConfig({ "tls-ca": "/x/ca.pem" }, {}), (e: Error) => e instanceof ConfigError && /tls.ca .*needs tls.cert and tls.key/.test(e.message));
    assert.throws(() => loadConfig({ "tls-cert": "/x/c.pem" }, {}), /tls.cert and tls.key go together/);
  });

  it("refuse --tls-mutual true without a CA, naming both settings", () => {
    const tls = { "tls-cert": "/x/c.pem", "tls-key": "/x/c.key" };
    assert.throws(() => loadConfig({ ...tls, "tls-mutual": "true" }, {}), (e: Error) => e instanceof ConfigError && /tls\.mutual \(--tls-mutual\) needs tls\.ca \(--tls-ca\)/.test(e.message));
    assert.throws(() => loadConfig(tls, { DELTASET_TLS_MUTUAL: "on" }), /tls\.mutual .*needs tls\.ca/);
    assert.equal(loadConfig({ ...tls, "tls-mutual": "false" }, {}).tls.mutual, false);
    assert.equal(loadConfig({ ...tls, "tls-ca": "/x/ca.pem", "tls-mutual": "true" }, {}).tls.mutual, true);
  });

  it("refuse a CA file that holds no certificate (a key given as the CA), and take a real one", () => {
    const ca = makeCa(dir, "unit-ca");
    const node = ca.issue("unit-node", ["127.0.21.1"]);
    assert.throws(() => loadTls({ ...node, ca: node.key }), (e: Error) => e instanceof ConfigError && /tls\.ca .*unit-node\.key holds no certificate/.test(e.message));
    const broken = join(dir, "broken-ca.pem");
    writeFileSync(broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    assert.throws(() => loadTls({ ...node, ca: broken }), /tls\.ca .*broken-ca\.pem: certificate 1 of 1 is not readable/);
    const m = loadTls({ ...node, ca: ca.ca });
    assert.equal(tlsMode(m), "mutual");
  });

  it("report unreadable or non-PEM certificate files by setting and path", () => {
    assert.throws(() => loadTls({ cert: join(dir, "none.pem"), key: join(dir, "none.key") }), /tls.cert .*none.pem: ENOENT/);
    const junk = join(dir, "junk.pem");
    writeFileSync(junk, "not a certificate");
    assert.throws(() => loadTls({ cert: junk, key: junk }), /tls.cert .*junk.pem holds no PEM data/);
    assert.equal(loadTls({}), undefined);
    assert.equal(tlsMode(undefined), "off");
  });

  it("print the tokens file's path, never tokens (the configuration holds none)", () => {
    const c = loadConfig({ "auth-tokens-file": "/etc/deltaset/tokens" }, {});
    const printed = JSON.stringify(describeConfig(c));
    assert.match(printed, /"authTokensFile":"\/etc\/deltaset\/tokens"/);
  });
});
