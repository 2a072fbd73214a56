// The Membership gRPC service around a MembershipDriver: the protocol RPCs (Join, Leave, Ping,
// PingReq) hand the request to the core and map refusals to gRPC statuses; Members and Watch serve
// operators. Nothing a peer sends can throw out of a handler: unexpected errors become INTERNAL.
import * as grpc from "@grpc/grpc-js";
import {
  MemberState,
  type MemberEvent,
  type MembersReply,
  type MembershipServer,
  type WatchRequest,
} from "../gen/deltaset/v1/membership.js";
import { driverEndpoint, type MembershipDriver } from "./driver.js";
import { REFUSED_SETTING_HEADER, REFUSER_IN_CLUSTER_HEADER, type Answer, type MembershipChange, type Refusal } from "./types.js";

/** Most events a Watch stream may have queued before it is ended with RESOURCE_EXHAUSTED. */
export const WATCH_BACKLOG_LIMIT = 4096;

const STATUS: Record<Refusal["code"], grpc.status> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  FAILED_PRECONDITION: grpc.status.FAILED_PRECONDITION,
  UNAVAILABLE: grpc.status.UNAVAILABLE,
};

function isRefusal(value: unknown): value is Refusal {
  return typeof value === "object" && value !== null && "code" in value && "message" in value && !("from" in value);
}

function statusOf(refusal: Refusal): Partial<grpc.StatusObject> {
  if (refusal.setting === undefined) return { code: STATUS[refusal.code], details: refusal.message };
  const metadata = new grpc.Metadata();
  metadata.set(REFUSED_SETTING_HEADER, refusal.setting);
  metadata.set(REFUSER_IN_CLUSTER_HEADER, refusal.inCluster === false ? "0" : "1");
  return { code: STATUS[refusal.code], details: refusal.message, metadata };
}

function internal(error: unknown): Partial<grpc.StatusObject> {
  return { code: grpc.status.INTERNAL, details: `membership handler failed: ${error instanceof Error ? error.message : String(error)}` };
}

function unary<Req, Res>(handle: (request: Req) => Answer<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    try {
      const answer = handle(call.request);
      if (answer.ok) callback(null, answer.reply);
      else callback(statusOf(answer.refusal));
    } catch (error) {
      callback(internal(error));
    }
  };
}

/**
 * A MembershipChange as the proto MemberEvent. A reaped member (forgotten by this node) is sent with
 * member.state = REAPED and previous = DEAD or LEFT.
 */
export function toMemberEvent(change: MembershipChange): MemberEvent {
  const member = change.kind === "reaped" ? { ...change.member, state: MemberState.REAPED } : change.member;
  return { member, previous: change.previous };
}

/** The implementation for server.addService(MembershipService, createMembershipService(driver)). */
/**
 * stopping: aborted as the node starts to stop; open Watch streams then end at once with
 * UNAVAILABLE, since a watch never ends by itself and a stopping node waits for its running calls.
 */
export function createMembershipService(driver: MembershipDriver, stopping?: AbortSignal): MembershipServer {
  const endpoint = driverEndpoint(driver);
  return {
    join: unary((request) => endpoint.join(request)),
    leave: unary((request) => endpoint.leave(request)),
    ping: unary((request) => endpoint.ping(request)),
    pingReq: (call, callback) => {
      let answered = false;
      const answer = (result: Parameters<Parameters<typeof endpoint.pingReq>[1]>[0]) => {
        if (answered) return;
        answered = true;
        if (isRefusal(result)) callback(statusOf(result));
        else callback(null, result);
      };
      try {
        const cancel = endpoint.pingReq(call.request, answer);
        call.on("cancelled", () => {
          answered = true;
          cancel();
        });
      } catch (error) {
        if (!answered) {
          answered = true;
          callback(internal(error));
        }
      }
    },
    members: (call, callback) => {
      try {
        const reply: MembersReply = {
          self: endpoint.nodeId,
          members: driver.members({ includeDeparted: call.request.includeDeparted === true }),
        };
        callback(null, reply);
      } catch (error) {
        callback(internal(error));
      }
    },
    watch: (call: grpc.ServerWritableStream<WatchRequest, MemberEvent>) => {
      if (!endpoint.running() || stopping?.aborted === true) {
        call.emit("error", { code: grpc.status.UNAVAILABLE, details: "membership is not running on this node" });
        return;
      }
      let open = true;
      const close = (status?: Partial<grpc.StatusObject>) => {
        if (!open) return;
        open = false;
        unsubscribe();
        unhook();
        unhookStop();
        if (status) call.emit("error", status);
        else call.end();
      };
      // Synchronous: no change can slip between the current view and the subscription.
      if (call.request.includeCurrent) {
        for (const member of driver.members({ includeDeparted: true })) {
          call.write({ member, previous: MemberState.MEMBER_STATE_UNSPECIFIED });
        }
      }
      const unsubscribe = driver.onChange((change) => {
        if (!open) return;
        if (call.writableLength > WATCH_BACKLOG_LIMIT) {
          close({ code: grpc.status.RESOURCE_EXHAUSTED, details: "watch stream is not read fast enough" });
          return;
        }
        call.write(toMemberEvent(change));
      });
      const unhook = endpoint.onStop(() => close());
      const stopped = () => close({ code: grpc.status.UNAVAILABLE, details: "the node is stopping" });
      stopping?.addEventListener("abort", stopped, { once: true });
      const unhookStop = () => stopping?.removeEventListener("abort", stopped);
      call.on("cancelled", () => close());
      call.on("close", () => close());
    },
  };
}
