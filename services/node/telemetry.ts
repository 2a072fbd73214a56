// Telemetry of a node: OpenTelemetry metrics served for Prometheus (--metrics-listen) and traces
// sent to a configured exporter (--tracing console|none|otlp). Off by default, and then nothing of
// the SDK is loaded: every OpenTelemetry import in this file is dynamic, and metrics.ts imports
// only types. No exporter talks to the network unless configured: OTLP needs --otlp-endpoint.
//
// gRPC spans (client and server) come from @opentelemetry/instrumentation-grpc, which must hook
// grpc-js before it is first imported; in an ES module program that takes import-in-the-middle's
// loader hook. bin/deltaset.mjs therefore asks tracingRequested() before importing the program and
// then calls preloadTracing(). Without that (a node started in-process) only the manual spans
// (one per anti-entropy send) are recorded.
import { type Server, createServer } from "node:http";
import type { Span, Tracer } from "@opentelemetry/api";
import { parseArgs } from "node:util";
import { ConfigError, type NodeConfig, configFlags, loadConfig, withBoolValues } from "./config.js";
import type { Logger } from "../common/logger.js";
import { type ClusterSources, type RpcRecorder, certificateMetrics, clusterMetrics, rpcMetrics, storeMetrics } from "./metrics.js";
import { runtimeMetrics } from "./runtime-metrics.js";
import type { Store } from "../store/store.js";

/** Runs fn inside a span (child of the active one); the span ends when fn settles. */
export type SpanRunner = <T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>) => Promise<T>;

export interface NodeTelemetry {
  /** host:port of the Prometheus endpoint (path /metrics), when metrics are on. */
  readonly metricsAddress?: string;
  /** The Replica service's onCall hook (metrics on). */
  readonly onCall?: RpcRecorder["onCall"];
  /** Calls refused by the access interceptor (metrics on). */
  readonly onRefused?: RpcRecorder["onRefused"];
  /** Failed incoming TLS handshakes (metrics on). */
  readonly onTlsHandshakeFailure?: RpcRecorder["onTlsHandshakeFailure"];
  /** Calls forwarded to owners (metrics on). */
  readonly onForwarded?: RpcRecorder["onForwarded"];
  /** Manual spans (tracing on). */
  readonly span?: SpanRunner;
  /** Export the anti-entropy and membership figures once those parts run. */
  observeCluster(sources: ClusterSources): void;
  shutdown(): Promise<void>;
}

/** gRPC method names not worth a span each (probes and membership pings run every second). */
const UNTRACED_METHODS = ["Check", "Watch", "ServerReflectionInfo", "Ping", "PingReq"];

const TRACING = Symbol.for("deltaset.telemetry.tracing");
interface TracingState {
  /** The gRPC instrumentation, created before grpc-js was imported. */
  grpc?: import("@opentelemetry/instrumentation").Instrumentation;
  sdk?: { shutdown(): Promise<void> };
  tracer?: Tracer;
  users: number;
}
const state = (): TracingState => ((globalThis as Record<symbol, TracingState>)[TRACING] ??= { users: 0 });

/**
 * True when `deltaset node <args>` will trace (from flags, environment or config file). Errors in
 * the configuration answer false here: the node command reports them.
 */
export function tracingRequested(args: string[], env: NodeJS.ProcessEnv = process.env): boolean {
  try {
    const { values } = parseArgs({ args: withBoolValues(args), options: configFlags(), allowPositionals: true, strict: false });
    const flags = Object.fromEntries(Object.entries(values).filter(([, v]) => typeof v === "string")) as Record<string, string>;
    return loadConfig(flags, env).tracing !== "off";
  } catch {
    return false;
  }
}

/** Hook grpc-js for spans; call before anything imports @grpc/grpc-js (see bin/deltaset.mjs). */
export async function preloadTracing(): Promise<void> {
  const s = state();
  if (s.grpc !== undefined) return;
  const { GrpcInstrumentation } = await import("@opentelemetry/instrumentation-grpc");
  s.grpc = new GrpcInstrumentation({ ignoreGrpcMethods: UNTRACED_METHODS });
}

async function spanProcessors(config: NodeConfig) {
  const { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor } = await import("@opentelemetry/sdk-trace-base");
  switch (config.tracing) {
    case "console":
      return [new SimpleSpanProcessor(new ConsoleSpanExporter())];
    case "otlp": {
      const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-proto");
      return [new BatchSpanProcessor(new OTLPTraceExporter({ url: config.otlpEndpoint! }))];
    }
    default:
      // "none": spans are recorded and batched as with a real exporter, then dropped.
      return [new BatchSpanProcessor({ export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} })];
  }
}

/** Start (once per process) the tracing SDK; later nodes in the same process share it. */
async function startTracing(config: NodeConfig, nodeId: string, log: Logger): Promise<{ tracer: Tracer; release(): Promise<void> }> {
  const s = state();
  if (s.sdk === undefined) {
    const [{ NodeSDK }, { resourceFromAttributes }, api] = await Promise.all([
      import("@opentelemetry/sdk-node"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/api"),
    ]);
    const sdk = new NodeSDK({
      resource: resourceFromAttributes({ "service.name": "deltaset", "service.instance.id": nodeId }),
      autoDetectResources: false,
      spanProcessors: await spanProcessors(config),
      // Explicitly empty: otherwise the SDK builds OTLP exporters from OTEL_* defaults.
      metricReaders: [],
      logRecordProcessors: [],
      instrumentations: s.grpc === undefined ? [] : [s.grpc],
    });
    sdk.start();
    s.sdk = sdk;
    s.tracer = api.trace.getTracer("deltaset");
    log.info("tracing on", { exporter: config.tracing, grpcSpans: s.grpc !== undefined, ...(config.tracing === "otlp" ? { endpoint: config.otlpEndpoint } : {}) });
  } else {
    log.info("tracing on (shared with the other nodes of this process)", { exporter: config.tracing });
  }
  s.users++;
  return {
    tracer: s.tracer!,
    async release() {
      if (--s.users > 0 || s.sdk === undefined) return;
      const sdk = s.sdk;
      s.sdk = undefined;
      await sdk.shutdown();
    },
  };
}

function spanRunner(tracer: Tracer, SpanStatusCode: typeof import("@opentelemetry/api").SpanStatusCode): SpanRunner {
  return (name, attributes, fn) =>
    tracer.startActiveSpan(name, { attributes }, async (span: Span) => {
      try {
        return await fn();
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        throw err;
      } finally {
        span.end();
      }
    });
}

function listen(server: Server, hostPort: string): Promise<string> {
  const i = hostPort.lastIndexOf(":");
  const host = hostPort.slice(0, i).replace(/^\[|\]$/g, "");
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(Number(hostPort.slice(i + 1)), host, () => {
      server.off("error", reject);
      const a = server.address();
      resolve(typeof a === "object" && a !== null ? `${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}` : hostPort);
    });
  });
}

/** Metrics for one node: its own MeterProvider and HTTP endpoint (several nodes may share a process). */
async function startMetrics(config: NodeConfig, nodeId: string, store: Store) {
  const [{ MeterProvider }, { PrometheusExporter }, { resourceFromAttributes }] = await Promise.all([
    import("@opentelemetry/sdk-metrics"),
    import("@opentelemetry/exporter-prometheus"),
    import("@opentelemetry/resources"),
  ]);
  const exporter = new PrometheusExporter({ preventServerStart: true, withoutScopeInfo: true });
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ "service.name": "deltaset", "service.instance.id": nodeId, "deltaset.cluster": config.cluster }),
    readers: [exporter],
  });
  const meter = provider.getMeter("deltaset");
  const server = createServer((req, res) => {
    if (req.method === "GET" && (req.url ?? "").split("?")[0] === "/metrics") return exporter.getMetricsRequestHandler(req, res);
    res.statusCode = 404;
    res.end("deltaset serves metrics at /metrics\n");
  });
  let address: string;
  try {
    address = await listen(server, config.metricsListen!);
  } catch (err) {
    await provider.shutdown();
    throw new ConfigError(`metrics listen ${config.metricsListen}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  storeMetrics(meter, store);
  const stopRuntime = runtimeMetrics(meter);
  return {
    address,
    meter,
    async shutdown() {
      stopRuntime();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await provider.shutdown();
    },
  };
}

/** Start what the configuration asks for; undefined when telemetry is off (nothing loaded). */
export async function startTelemetry(
  config: NodeConfig,
  log: Logger,
  store: Store,
  certificateSecondsLeft: () => number | undefined = () => undefined,
): Promise<NodeTelemetry | undefined> {
  const metricsOn = config.metricsListen !== undefined && config.metricsListen !== "";
  const tracingOn = config.tracing !== "off";
  if (!metricsOn && !tracingOn) return undefined;
  const metrics = metricsOn ? await startMetrics(config, store.nodeId, store) : undefined;
  let tracing: Awaited<ReturnType<typeof startTracing>> | undefined;
  try {
    if (tracingOn) tracing = await startTracing(config, store.nodeId, log);
  } catch (err) {
    await metrics?.shutdown();
    throw err;
  }
  const rpc = metrics ? rpcMetrics(metrics.meter) : undefined;
  const span = tracing ? spanRunner(tracing.tracer, (await import("@opentelemetry/api")).SpanStatusCode) : undefined;
  let sources: ClusterSources | undefined;
  if (metrics) {
    clusterMetrics(metrics.meter, () => sources);
    certificateMetrics(metrics.meter, certificateSecondsLeft);
    log.info("metrics on", { endpoint: `http://${metrics.address}/metrics` });
  }
  let stopped: Promise<void> | undefined;
  return {
    metricsAddress: metrics?.address,
    onCall: rpc?.onCall,
    onRefused: rpc?.onRefused,
    onTlsHandshakeFailure: rpc?.onTlsHandshakeFailure,
    onForwarded: rpc?.onForwarded,
    span,
    observeCluster(s) {
      sources = s;
    },
    shutdown: () => (stopped ??= Promise.all([metrics?.shutdown(), tracing?.release()]).then(() => undefined)),
  };
}
