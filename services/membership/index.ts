// SWIM-style cluster membership: sans-IO core, discovery, gRPC driver and service, simulator.
export * from "./config.js";
export { MembershipCore, type MembershipCoreOptions, type MembershipStats } from "./core.js";
export * from "./discovery.js";
export * from "./grpc.js";
export { seededRandom, type Random } from "../common/prng.js";
export * from "./types.js";
