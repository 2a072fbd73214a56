// Anti-entropy gossip: the sans-IO engine (Algorithms 1 and 2 with BP and RR), keyed partition
// payloads, chunked full-state transfer, the exchange core a node and the simulator share, and the
// in-process simulator with its lossy channel.
export * from "./payload.js";
export * from "./partition.js";
export * from "./keyed-states.js";
export * from "./algorithm1.js";
export * from "./algorithm2.js";
export * from "./metrics.js";
export * from "./engine.js";
export * from "./durable-seq.js";
export * from "./peer-boots.js";
export * from "./chunk-order.js";
export * from "./exchange.js";
export * from "../common/prng.js";
export * from "./lossy-channel.js";
export * from "./topology.js";
export * from "./simulator.js";
