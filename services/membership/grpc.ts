// The gRPC side of membership: the service implementation (for server.addService) and the driver
// that runs the core with real timers and peer clients.
export { createMembershipService, toMemberEvent, WATCH_BACKLOG_LIMIT } from "./grpc-service.js";
export { MembershipDriver, type ChangeListener, type MembershipDriverOptions } from "./driver.js";
export { MembershipService } from "../gen/deltaset/v1/membership.js";
