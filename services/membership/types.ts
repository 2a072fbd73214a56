// Values that flow in and out of the sans-IO membership core. Requests and replies are the proto
// messages themselves, so the gRPC transport only moves them.
import {
  MemberState,
  type JoinReply,
  type JoinRequest,
  type LeaveReply,
  type LeaveRequest,
  type MemberInfo,
  type PingReply,
  type PingReqRequest,
  type PingRequest,
} from "../gen/deltaset/v1/membership.js";

export { MemberState };
export type { JoinReply, JoinRequest, LeaveReply, LeaveRequest, MemberInfo, PingReply, PingReqRequest, PingRequest };

/** A node's identity: stable id and the host:port where it serves gRPC. */
export interface NodeIdentity {
  nodeId: string;
  address: string;
}

/** An outbound call the caller must deliver; its answer goes back via the core's receive* methods. */
export type OutboundCall =
  | { kind: "ping"; id: number; address: string; nodeId: string; request: PingRequest; timeoutMs: number }
  | { kind: "pingReq"; id: number; address: string; nodeId: string; request: PingReqRequest; timeoutMs: number }
  | { kind: "join"; id: number; address: string; request: JoinRequest; timeoutMs: number }
  | { kind: "leave"; id: number; address: string; nodeId: string; request: LeaveRequest; timeoutMs: number };

/** The late answer to an inbound PingReq (the core waited for the target first). */
export interface DeferredReply {
  requestId: number;
  reply: PingReply;
}

/** What a membership change means for the rest of the node. */
export type ChangeKind = "alive" | "suspect" | "dead" | "left" | "reaped";

/**
 * One change of one member in this node's view. `member` is the record after the change (for
 * "reaped", the last record before it was forgotten); `previous` is the state before, or
 * MEMBER_STATE_UNSPECIFIED when the member was not known.
 */
export interface MembershipChange {
  kind: ChangeKind;
  member: MemberInfo;
  previous: MemberState;
}

/** Everything the core produced since the last drain. */
export interface CoreOutput {
  calls: OutboundCall[];
  replies: DeferredReply[];
  events: MembershipChange[];
}

/** Counters for metrics and tests. */
export interface MembershipStats {
  probes: number;
  probesFailed: number;
  indirectProbes: number;
  suspicionsRaised: number;
  deathsDeclared: number;
  refutations: number;
  /** Another live process claimed this node's id (suspicion.ts contested). */
  identityContests: number;
  reaped: number;
  refusedRequests: number;
  invalidReplies: number;
}

/** A refused inbound request, with the gRPC status it maps to. */
export interface Refusal {
  code: "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "UNAVAILABLE";
  message: string;
  /** A cluster-wide setting that differs between caller and this node (the flag's name). */
  setting?: ClusterSetting;
  /** With setting: whether the refusing node is in a cluster (it then speaks for one). */
  inCluster?: boolean;
}

/** Trailing metadata of a refusal because a cluster-wide setting differs: the flag's name. */
export const REFUSED_SETTING_HEADER = "x-deltaset-refused-setting";
/** Beside it: "1" when the refusing node is in a cluster, "0" when it is alone (not joined) itself. */
export const REFUSER_IN_CLUSTER_HEADER = "x-deltaset-refuser-in-cluster";

/** The flags every node of a cluster must set alike, checked on Join, Ping and PingReq (the name on Leave too). */
export const CLUSTER_SETTINGS = ["cluster", "partitions", "replication-factor"] as const;
export type ClusterSetting = (typeof CLUSTER_SETTINGS)[number];

/** Whether a refusal's header value names one of CLUSTER_SETTINGS. */
export function isClusterSetting(value: unknown): value is ClusterSetting {
  return (CLUSTER_SETTINGS as readonly unknown[]).includes(value);
}

/**
 * A node's cluster-wide settings as membership messages carry them: the partition count, and the
 * replication factor with 0 for "all".
 */
export interface ClusterSettings {
  partitions: number;
  replicationFactor: number;
}

/** The fields of a Join, Ping or PingReq that carry a node's settings (none without settings). */
export function settingsFields(settings: ClusterSettings | undefined): { partitions?: number; replicationFactor?: number } {
  return settings === undefined ? {} : { partitions: settings.partitions, replicationFactor: settings.replicationFactor };
}

/** The answer to an inbound request: a reply now, a refusal, or (PingReq) a reply later. */
export type Answer<T> = { ok: true; reply: T } | { ok: false; refusal: Refusal };
export type DeferredAnswer = { ok: true; pending: number } | { ok: true; reply: PingReply; pending?: undefined } | { ok: false; refusal: Refusal };

/** True for the states in which a member takes part in the cluster (probed, gossiped to). */
export function isLive(state: MemberState): boolean {
  return state === MemberState.ALIVE || state === MemberState.SUSPECT;
}

/** True for DEAD and LEFT. */
export function isDeparted(state: MemberState): boolean {
  return state === MemberState.DEAD || state === MemberState.LEFT;
}

/** The event kind that a transition into `state` is reported as. */
export function kindOf(state: MemberState): ChangeKind {
  switch (state) {
    case MemberState.SUSPECT: return "suspect";
    case MemberState.DEAD: return "dead";
    case MemberState.LEFT: return "left";
    default: return "alive";
  }
}
