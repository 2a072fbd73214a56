// The CRDT kernel: pure, deterministic, no I/O. Importing this module registers every type.
export * from "./dot.js";
export * from "./causal-context.js";
export * from "./dot-store.js";
export * from "./awset.js";
export * from "./awset-lattice.js";
export * from "./pncounter.js";
export * from "./counter-range.js";
export * from "./lattice.js";
export * from "./errors.js";
export * from "./codec.js";
export * from "./chunk-slice.js";
