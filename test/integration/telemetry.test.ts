// Telemetry: off by default loads none of the OpenTelemetry SDK; with --metrics-listen a node serves
// Prometheus metrics that move with the workload (calls, errors, latency, sync bytes and payloads by
// kind, members by state, store size); with --tracing it records gRPC server and client spans and
// one span per anti-entropy send (console exporter), or ships them over OTLP/HTTP to the configured
// endpoint (here a fake collector on loopback).
import { strict as assert } from "node:assert";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CausalContext } from "../../services/crdt/index.ts";
import { call, replicaClient } from "../../services/client/rpc.ts";
import { loadConfig } from "../../services/node/config.ts";
import { createLogger } from "../../services/common/logger.ts";
import { startNode } from "../../services/node/node.ts";
import { type NodeProcess, startNodeProcess } from "../helpers/node-process.ts";
import { eventually } from "../helpers/eventually.ts";

const dir = mkdtempSync(join(tmpdir(), "deltaset-telemetry-"));
const FAST = ["--gossip-interval-ms", "100", "--probe-interval-ms", "300", "--probe-timeout-ms", "150"];
const quiet = createLogger("error");

after(() => rmSync(dir, { recursive: true, force: true }));

/** Loaded CommonJS modules (the OpenTelemetry packages are CommonJS) whose path names a package. */
function loaded(pkg: string): boolean {
  return Object.keys(createRequire(import.meta.url).cache).some((p) => p.includes(`/node_modules/${pkg}/`));
}

/** Prometheus text → value of the series with exactly these labels (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort().join(",");
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const got = (m[2] ?? "").split(/,(?=[a-zA-Z_]\w*=")/).filter((s) => s !== "").sort().join(",");
    if (got === want) return Number(m[3]);
  }
  return 0;
}

async function scrape(address: string): Promise<string> {
  const res = await fetch(`http://${address}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}


describe("telemetry off (the default)", () => {
  it("loads no OpenTelemetry package, and metrics load only the metrics SDK", async () => {
    const off = await startNode(loadConfig({ listen: "127.0.0.73:0", "data-dir": join(dir, "off") }, {}), quiet);
    try {
      assert.equal(off.metricsAddress, undefined);
      assert.equal(loaded("@opentelemetry/api"), false, "an OpenTelemetry package was loaded with telemetry off");
    } finally {
      await off.stop();
    }
    const on = await startNode(loadConfig({ listen: "127.0.0.73:0", "data-dir": join(dir, "on"), "metrics-listen": "127.0.0.73:0" }, {}), quiet);
    try {
      assert.match(on.metricsAddress ?? "", /^127\.0\.0\.73:\d+$/);
      assert.equal(loaded("@opentelemetry/sdk-metrics"), true);
      assert.equal(loaded("@opentelemetry/sdk-node"), false, "metrics alone should not load the tracing SDK");
      const text = await scrape(on.metricsAddress!);
      assert.match(text, /^target_info\{.*service_name="deltaset"/m);
      assert.equal((await fetch(`http://${on.metricsAddress}/other`)).status, 404);
      // A Remove whose context covers an add this node has not received waits, and says so.
      assert.match(text, /^deltaset_pending_removes 0$/m);
      const elsewhere = CausalContext.of([{ replica: "elsewhere~1", counter: 1 }]);
      await on.store.remove("waiting", [Buffer.from("x")], elsewhere);
      assert.match(await scrape(on.metricsAddress!), /^deltaset_pending_removes 1$/m);
    } finally {
      await on.stop();
    }
  });
});

describe("two nodes with metrics, console tracing and OTLP tracing", () => {
  let n1: NodeProcess;
  let n2: NodeProcess;
  let n1Out = "";
  const otlpBodies: Buffer[] = [];
  const collector = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d: Buffer) => parts.push(d));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") otlpBodies.push(Buffer.concat(parts));
      res.writeHead(200, { "content-type": "application/x-protobuf" });
      res.end();
    });
  });
  const metricsOf = (n: NodeProcess) => /"endpoint":"http:\/\/([^/"]+)\/metrics"/.exec(n.logs())![1]!;

  before(async () => {
    await new Promise<void>((r) => collector.listen(0, "127.0.0.74", r));
    const otlp = `http://127.0.0.74:${(collector.address() as AddressInfo).port}/v1/traces`;
    n1 = await startNodeProcess(["--listen", "127.0.0.71:0", "--node-id", "m1", "--data-dir", join(dir, "m1"), "--metrics-listen", "127.0.0.71:0", "--tracing", "console", ...FAST]);
    n1.child.stdout!.on("data", (d: Buffer) => (n1Out += d.toString()));
    n2 = await startNodeProcess(
      ["--listen", "127.0.0.72:0", "--node-id", "m2", "--data-dir", join(dir, "m2"), "--seeds", n1.address, "--metrics-listen", "127.0.0.72:0", ...FAST],
      // Tracing from the environment, exported every 200 ms.
      { DELTASET_TRACING: "otlp", DELTASET_OTLP_ENDPOINT: otlp, OTEL_BSP_SCHEDULE_DELAY: "200" },
    );
    await eventually("two alive members on m2", () => scrape(metricsOf(n2)), (t) => sample(t, "deltaset_members", { state: "alive" }) === 2);
  });

  after(async () => {
    await Promise.all([n1?.stop(), n2?.stop()]);
    collector.close();
  });

  async function workload(prefix: string, n: number): Promise<void> {
    const c = replicaClient(n1.address);
    try {
      for (let i = 0; i < n; i++) await call(c, c.add, { key: `tm-${i % 4}`, elements: [Buffer.from(`${prefix}-${i}`)], texts: [] });
      // One refused call for the error counters.
      await call(c, c.add, { key: "", elements: [Buffer.from("x")], texts: [] }).catch(() => undefined);
    } finally {
      c.close();
    }
  }

  it("serves metrics that increase with the workload", async () => {
    await workload("a", 40);
    const wait = (pred: (t1: string, t2: string) => boolean) =>
      eventually("metrics", async () => [await scrape(metricsOf(n1)), await scrape(metricsOf(n2))] as const, ([t1, t2]) => pred(t1, t2));
    const [a1, a2] = await wait((_t1, t2) => sample(t2, "deltaset_gossip_received_payloads_total", { kind: "delta" }) > 0);
    await workload("b", 40);
    const [b1, b2] = await wait(
      (t1, t2) => sample(t2, "deltaset_gossip_received_bytes_total", { kind: "delta" }) > sample(a2, "deltaset_gossip_received_bytes_total", { kind: "delta" }) && sample(t1, "deltaset_rpc_calls_total", { method: "Add", status: "OK" }) >= 80,
    );
    const grew = (name: string, labels: Record<string, string>, before: string, now: string) =>
      assert.ok(sample(now, name, labels) > sample(before, name, labels), `${name}${JSON.stringify(labels)}: ${sample(before, name, labels)} -> ${sample(now, name, labels)}`);
    // The client API on m1.
    assert.equal(sample(b1, "deltaset_rpc_calls_total", { method: "Add", status: "OK" }), 80);
    assert.equal(sample(b1, "deltaset_rpc_errors_total", { method: "Add", status: "INVALID_ARGUMENT" }), 2);
    grew("deltaset_rpc_duration_seconds_count", { method: "Add" }, a1, b1);
    grew("deltaset_store_writes_total", {}, a1, b1);
    // Anti-entropy: m1 ships deltas, m2 receives them and acks.
    grew("deltaset_gossip_sent_bytes_total", { kind: "delta" }, a1, b1);
    grew("deltaset_gossip_sent_payloads_total", { kind: "delta" }, a1, b1);
    grew("deltaset_gossip_received_bytes_total", { kind: "delta" }, a2, b2);
    grew("deltaset_gossip_sent_payloads_total", { kind: "ack" }, a2, b2);
    grew("deltaset_gossip_rounds_total", {}, a1, b1);
    assert.equal(sample(b1, "deltaset_gossip_neighbours"), 1);
    assert.equal(sample(b1, "deltaset_members", { state: "alive" }), 2);
    assert.equal(sample(b1, "deltaset_members", { state: "dead" }), 0);
    // Probe round trips on loopback, against the probe timeout (150 ms here).
    assert.equal(sample(b1, "deltaset_membership_probe_rtt_ms", { stat: "timeout" }), 150);
    const p95 = sample(b1, "deltaset_membership_probe_rtt_ms", { stat: "p95" });
    assert.ok(p95 > 0 && p95 <= sample(b1, "deltaset_membership_probe_rtt_ms", { stat: "max" }) && p95 < 150, `probe round trip p95 ${p95} ms`);
    for (const name of ["deltaset_gossip_state_fallbacks_total", "deltaset_gossip_buffer_bytes", "deltaset_gossip_lag_max", "deltaset_store_data_bytes"]) {
      assert.match(b1, new RegExp(`^${name}\\b`, "m"), `${name} is exported`);
    }
    // Per-partition figures are aggregated: no partition label anywhere.
    assert.doesNotMatch(b1, /partition="/);
  });

  it("reports the node process: CPU, memory, event loop, garbage collection", async () => {
    const before = await scrape(metricsOf(n1));
    await workload("r", 40);
    // The node's gossip and the workload allocate: young-generation collections happen within seconds.
    const now = await eventually("a minor collection recorded", () => scrape(metricsOf(n1)), (t) => sample(t, "deltaset_gc_duration_seconds_count", { kind: "minor" }) > 0);
    assert.ok(sample(now, "deltaset_process_cpu_seconds_total", { mode: "user" }) > sample(before, "deltaset_process_cpu_seconds_total", { mode: "user" }), "user CPU grows with the workload");
    const rss = sample(now, "deltaset_process_resident_memory_bytes");
    const used = sample(now, "deltaset_heap_bytes", { state: "used" });
    assert.ok(rss > 10 * 2 ** 20 && used > 2 ** 20 && used <= sample(now, "deltaset_heap_bytes", { state: "total" }) && used < rss, `rss ${rss}, heap used ${used}`);
    const elu = sample(now, "deltaset_event_loop_utilization");
    assert.ok(elu > 0 && elu <= 1, `event loop utilization ${elu}`);
    // Lateness, not the sampling period (10 ms): an idle loop runs its timer well within that.
    const p50 = sample(now, "deltaset_event_loop_delay_seconds", { stat: "p50" });
    const max = sample(now, "deltaset_event_loop_delay_seconds", { stat: "max" });
    assert.match(now, /^deltaset_event_loop_delay_seconds\{stat="p99"\} /m);
    assert.ok(p50 >= 0 && p50 < 0.01 && p50 <= max, `event loop delay p50 ${p50} s, max ${max} s`);
    assert.ok(sample(now, "deltaset_gc_duration_seconds_sum", { kind: "minor" }) > 0);
  });

  it("records gRPC server spans and a span per anti-entropy frame sent and received (console exporter)", async () => {
    // A write on m2 too, so that anti-entropy runs in both directions.
    const c = replicaClient(n2.address);
    await call(c, c.add, { key: "tm-m2", elements: [Buffer.from("from-m2")], texts: [] }).finally(() => c.close());
    const spans = await eventually(
      "spans on m1's stdout",
      async () =>
        n1Out.split(/\n\}\n/).map((block) => ({
          name: /\n {2}name: '([^']+)'/.exec(block)?.[1],
          kind: Number(/\n {2}kind: (\d)/.exec(block)?.[1]),
          traceId: /\n {2}traceId: '([0-9a-f]+)'/.exec(block)?.[1],
        })),
      (s) => s.some((x) => x.name === "gossip.send") && s.some((x) => x.name === "gossip.receive") && s.some((x) => x.name === "grpc.deltaset.v1.Replica/Add"),
    );
    // SpanKind: 1 SERVER, 2 CLIENT.
    assert.ok(spans.some((s) => s.name === "grpc.deltaset.v1.Replica/Add" && s.kind === 1), "server span of Add");
    // Frames travel on a long-lived ExchangeStream, whose call span lasts as long as it does: each
    // frame sent is a gossip.send span, each frame received a gossip.receive span.
    assert.ok(spans.some((s) => s.name === "gossip.receive"), "a span per frame received");
  });

  it("ships spans over OTLP/HTTP to the configured endpoint", async () => {
    // Protobuf keeps strings as they are: the span names can be found in the raw bodies.
    const all = () => Buffer.concat(otlpBodies).toString("latin1");
    // Spans leave in periodic batches: wait until the one with the Add has been exported too.
    await eventually(
      "OTLP exports with m2's spans",
      async () => all(),
      (t) => t.includes("gossip.send") && t.includes("gossip.receive") && t.includes("grpc.deltaset.v1.Replica/Add"),
    );
    assert.match(n2.logs(), /"msg":"tracing on".*"exporter":"otlp"/);
  });
});
