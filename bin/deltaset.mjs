#!/usr/bin/env node
// The deltaset command. Runs the TypeScript sources through tsx (a runtime dependency), so the
// same files run in development, in CI and in the container image without a build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../services/cli/main.ts");
await main(process.argv.slice(2));
