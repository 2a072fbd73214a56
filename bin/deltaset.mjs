#!/usr/bin/env node
// The deltaset command. Runs the TypeScript sources through esbuild's transform (ts-loader.mjs),
// so the same files run in development, in CI and in the container image without a build step.
import { register as registerHook } from "node:module";
import "./register-ts.mjs";

// Tracing of gRPC calls hooks grpc-js before anything imports it, which in an ES module program
// takes import-in-the-middle's loader hook. Only then: with telemetry off nothing of it is loaded.
if (process.argv[2] === "node") {
  const { preloadTracing, tracingRequested } = await import("../services/node/telemetry.ts");
  if (tracingRequested(process.argv.slice(3))) {
    registerHook("@opentelemetry/instrumentation/hook.mjs", import.meta.url);
    await preloadTracing();
  }
}
const { main } = await import("../services/cli/main.ts");
await main(process.argv.slice(2));
