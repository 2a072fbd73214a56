// `node --import ./bin/register-ts.mjs file.ts` runs a TypeScript entry point of this project the
// way bin/deltaset.mjs runs the node and the CLI (see ts-loader.mjs). Stack traces point into the
// .ts sources through the transforms' inline source maps.
import { register } from "node:module";

register("./ts-loader.mjs", import.meta.url);
process.setSourceMapsEnabled(true);
